//! The hosts file by value: what a node of each site answers.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use sitegrid_api::{ServiceGrid, StatefulSetGrid};

use super::{hosts, render, View};
use crate::domain::ClusterDomain;
use crate::fixtures::{grid, labels, pod, statefulset};

mod headless;

const HEADER: &str = "# sitegrid-dnsd, node n1: the names of this site's StatefulSetGrid pods and headless ServiceGrids.\n\
                      # Replaced whole whenever they change; edits are lost.\n";

/// What the API server holds: grids, service grids, StatefulSets, pods.
#[derive(Default)]
pub(super) struct World {
    pub(super) grids: Vec<Arc<StatefulSetGrid>>,
    pub(super) service_grids: Vec<Arc<ServiceGrid>>,
    pub(super) statefulsets: Vec<Arc<StatefulSet>>,
    pub(super) pods: Vec<Arc<Pod>>,
}

impl World {
    /// The file a node labelled `node_labels` gets, in `domain`.
    fn file_in(&self, node_labels: &BTreeMap<String, String>, domain: &str) -> String {
        let view = View {
            node: "n1",
            node_labels,
            grids: &self.grids,
            service_grids: &self.service_grids,
            statefulsets: &self.statefulsets,
            pods: &self.pods,
        };
        render(&view, &domain.parse::<ClusterDomain>().unwrap())
    }

    pub(super) fn file(&self, node_labels: &[(&str, &str)]) -> String {
        self.file_in(&labels(node_labels), "cluster.local")
    }

    /// The seeds' example: statefulsetgrid-demo (3 replicas behind
    /// servicegrid-demo-svc) in beijing and guangzhou, every pod running and ready.
    pub(super) fn seed() -> World {
        let g = grid(
            "default",
            "statefulsetgrid-demo",
            "location",
            "servicegrid-demo-svc",
            3,
        );
        let mut w = World::default();
        for (unit, net) in [("beijing", "10.0.0"), ("guangzhou", "10.0.1")] {
            let sts = statefulset(&g, unit);
            for i in 0..3 {
                w.pods
                    .push(pod(&sts, i, &[&format!("{net}.{}", 10 + i)], true));
            }
            w.statefulsets.push(sts);
        }
        w.grids.push(g);
        w
    }
}

pub(super) fn body(lines: &[&str]) -> String {
    let mut s = HEADER.to_owned();
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[test]
fn each_site_gets_its_own_pods_under_the_same_names() {
    let w = World::seed();
    assert_eq!(
        w.file(&[("location", "beijing")]),
        body(&[
            "10.0.0.10 statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local",
            "10.0.0.11 statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local",
            "10.0.0.12 statefulsetgrid-demo-2.servicegrid-demo-svc.default.svc.cluster.local",
        ])
    );
    assert_eq!(
        w.file(&[("location", "guangzhou"), ("zone", "a")]),
        body(&[
            "10.0.1.10 statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local",
            "10.0.1.11 statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local",
            "10.0.1.12 statefulsetgrid-demo-2.servicegrid-demo-svc.default.svc.cluster.local",
        ])
    );
    // A node of no site, or of a site without a StatefulSet, gets no names.
    assert_eq!(w.file(&[("zone", "a")]), HEADER);
    assert_eq!(w.file(&[("location", "")]), HEADER);
    assert_eq!(w.file(&[("location", "shanghai")]), HEADER);
}

#[test]
fn a_grid_named_after_a_site_keeps_its_whole_name() {
    // SuperEdge cut the unit out of the pod name wherever it appeared.
    let g = grid("default", "beijing-db", "location", "db", 2);
    let bj = statefulset(&g, "beijing");
    let gz = statefulset(&g, "guangzhou");
    assert_eq!(bj.metadata.name.as_deref(), Some("beijing-db-beijing"));
    let w = World {
        pods: vec![
            pod(&bj, 0, &["10.0.0.1"], true),
            pod(&bj, 1, &["10.0.0.2"], true),
            pod(&gz, 0, &["10.0.1.1"], true),
        ],
        statefulsets: vec![bj, gz],
        grids: vec![g],
        ..World::default()
    };
    assert_eq!(
        w.file(&[("location", "beijing")]),
        body(&[
            "10.0.0.1 beijing-db-0.db.default.svc.cluster.local",
            "10.0.0.2 beijing-db-1.db.default.svc.cluster.local",
        ])
    );
    assert_eq!(
        w.file(&[("location", "guangzhou")]),
        body(&["10.0.1.1 beijing-db-0.db.default.svc.cluster.local"])
    );
}

#[test]
fn a_site_value_the_controller_cleans_up_still_gives_the_plain_names() {
    // "Bei_Jing" is a valid label value but not a valid StatefulSet name part:
    // the controller names the StatefulSet statefulsetgrid-demo-bei-jing-<hash>.
    let g = grid("default", "demo", "location", "demo-svc", 1);
    let sts = statefulset(&g, "Bei_Jing");
    assert!(sts
        .metadata
        .name
        .as_deref()
        .unwrap()
        .starts_with("demo-bei-jing-"));
    let w = World {
        pods: vec![pod(&sts, 0, &["10.0.0.1"], true)],
        statefulsets: vec![sts],
        grids: vec![g],
        ..World::default()
    };
    assert_eq!(
        w.file(&[("location", "Bei_Jing")]),
        body(&["10.0.0.1 demo-0.demo-svc.default.svc.cluster.local"])
    );
}

#[test]
fn several_grids_keys_and_namespaces_in_a_stable_order() {
    let db = grid("prod", "db", "location", "db", 1);
    let cache = grid("default", "cache", "zone", "cache", 2);
    let web = grid("default", "web", "location", "web-svc", 1);
    let (db_bj, cache_a, web_bj) = (
        statefulset(&db, "beijing"),
        statefulset(&cache, "a"),
        statefulset(&web, "beijing"),
    );
    let w = World {
        pods: vec![
            pod(&web_bj, 0, &["10.0.0.30"], true),
            pod(&cache_a, 1, &["10.0.0.21"], false),
            pod(&db_bj, 0, &["10.0.0.9"], true),
            pod(&cache_a, 0, &["10.0.0.20"], true),
        ],
        statefulsets: vec![web_bj, db_bj, cache_a],
        grids: vec![web, db, cache],
        ..World::default()
    };
    let want = body(&[
        "10.0.0.20 cache-0.cache.default.svc.cluster.local",
        "10.0.0.21 cache-1.cache.default.svc.cluster.local",
        "10.0.0.9 db-0.db.prod.svc.cluster.local",
        "10.0.0.30 web-0.web-svc.default.svc.cluster.local",
    ]);
    assert_eq!(w.file(&[("location", "beijing"), ("zone", "a")]), want);
    // The order of the API server's lists does not matter.
    let mut shuffled = w;
    shuffled.pods.reverse();
    shuffled.grids.reverse();
    shuffled.statefulsets.reverse();
    assert_eq!(
        shuffled.file(&[("zone", "a"), ("location", "beijing")]),
        want
    );
}

#[test]
fn the_cluster_domain_is_the_flags() {
    let w = World::seed();
    let file = w.file_in(&labels(&[("location", "beijing")]), "Edge.Example.");
    assert!(
        file.contains(
            "10.0.0.10 statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.edge.example\n"
        ),
        "{file}"
    );
    assert!(!file.contains("cluster.local"));
}

#[test]
fn pods_without_an_address_finished_or_not_owned_are_left_out() {
    let g = grid("default", "db", "location", "db", 4);
    let sts = statefulset(&g, "beijing");
    let mut finished = (*pod(&sts, 1, &["10.0.0.2"], false)).clone();
    finished.status.as_mut().unwrap().phase = Some("Failed".into());
    let mut namesake = (*pod(&sts, 2, &["10.0.0.3"], true)).clone();
    namesake.metadata.owner_references.as_mut().unwrap()[0].uid = "someone-else".into();
    let w = World {
        pods: vec![
            pod(&sts, 0, &[], false),
            Arc::new(finished),
            Arc::new(namesake),
            pod(&sts, 3, &["10.0.0.4", "fd00::4"], true),
            // Beyond the replicas: a pod the StatefulSet no longer wants.
            pod(&sts, 4, &["10.0.0.5"], true),
        ],
        statefulsets: vec![sts],
        grids: vec![g],
        ..World::default()
    };
    assert_eq!(
        w.file(&[("location", "beijing")]),
        body(&[
            "10.0.0.4 db-3.db.default.svc.cluster.local",
            "fd00::4 db-3.db.default.svc.cluster.local",
        ])
    );
}

#[test]
fn a_statefulset_of_another_grid_or_none_is_not_this_sites() {
    let g = grid("default", "db", "location", "db", 1);
    let sts = statefulset(&g, "beijing");
    let pods = vec![pod(&sts, 0, &["10.0.0.1"], true)];
    // The grid was deleted and made again: the old StatefulSet is not the new grid's.
    let again = grid("default", "db", "location", "db", 1);
    let mut again = (*again).clone();
    again.metadata.uid = Some("uid-new".into());
    let w = World {
        grids: vec![Arc::new(again)],
        statefulsets: vec![sts],
        pods,
        ..World::default()
    };
    assert_eq!(w.file(&[("location", "beijing")]), HEADER);
}

#[test]
fn names_too_long_for_dns_are_skipped_and_reported() {
    let name = "g".repeat(62);
    let g = grid("default", &name, "location", "db", 1);
    let sts = statefulset(&g, "beijing");
    let w = World {
        pods: vec![pod(&sts, 0, &["10.0.0.1"], true)],
        statefulsets: vec![sts],
        grids: vec![g],
        ..World::default()
    };
    let node = labels(&[("location", "beijing")]);
    let view = View {
        node: "n1",
        node_labels: &node,
        grids: &w.grids,
        service_grids: &w.service_grids,
        statefulsets: &w.statefulsets,
        pods: &w.pods,
    };
    let h = hosts(&view, &"cluster.local".parse().unwrap());
    assert!(h.records.is_empty());
    assert_eq!(
        h.skipped.iter().collect::<Vec<_>>(),
        [&format!("{name}-0.db.default.svc.cluster.local")]
    );
    assert_eq!(h.names(), 0);
}
