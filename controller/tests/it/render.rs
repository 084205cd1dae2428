//! The expansion of the seed examples, checked by value.

use sitegrid_fakeapi::testing::labels;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use sitegrid_api::{DeploymentGrid, ServiceGrid, SiteName, StatefulSetGrid, TemplateName};
use sitegrid_controller::render::{render_service, render_workloads, GridError, SiteError};

const UID: &str = "6f1c1a5e-0000-4000-8000-000000000001";

/// A seed grid as the API server would return it (with a uid).
fn persisted<K: Resource + serde::de::DeserializeOwned>(fixture: &str) -> K {
    let mut grid: K = crate::common::load(fixture);
    grid.meta_mut().uid = Some(UID.to_owned());
    grid
}

fn sites(names: &[&str]) -> BTreeSet<SiteName> {
    names.iter().map(|n| SiteName::from(*n)).collect()
}

fn owner(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "superedge.io/v1".to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        uid: UID.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[test]
fn seed_deployment_grid_gives_one_deployment_per_site() {
    let grid: DeploymentGrid = persisted("seed000-04-deploymentgrid.yaml");
    let out = render_workloads(&grid, &sites(&["beijing", "guangzhou"])).unwrap();
    assert_eq!(out.len(), 2);
    for (site, deployment) in out {
        let deployment = deployment.unwrap();
        let meta = &deployment.metadata;
        assert_eq!(
            meta.name.as_deref(),
            Some(format!("deploymentgrid-demo-{site}").as_str())
        );
        assert_eq!(meta.namespace.as_deref(), Some("default"));
        let expected_labels = labels(&[
            ("superedge.io/grid-selector", "deploymentgrid-demo"),
            ("superedge.io/grid-uniq-key", "location"),
            ("sitegrid.io/node-unit", site.as_str()),
        ]);
        assert_eq!(meta.labels.as_ref(), Some(&expected_labels));
        assert_eq!(
            meta.owner_references,
            Some(vec![owner("DeploymentGrid", "deploymentgrid-demo")])
        );

        // The template, unchanged except for the site's node selector.
        let mut expected = grid.spec.template.clone();
        expected.template.spec.as_mut().unwrap().node_selector =
            Some(labels(&[("location", site.as_str())]));
        assert_eq!(deployment.spec, Some(expected));
        assert_eq!(deployment.status, None);
    }
}

#[test]
fn no_sites_no_deployments() {
    let grid: DeploymentGrid = persisted("seed000-04-deploymentgrid.yaml");
    assert!(render_workloads(&grid, &BTreeSet::new())
        .unwrap()
        .is_empty());
}

#[test]
fn the_site_selector_merges_with_the_templates_own() {
    let mut grid: DeploymentGrid = persisted("seed000-04-deploymentgrid.yaml");
    let pod = grid.spec.template.template.spec.as_mut().unwrap();
    pod.node_selector = Some(labels(&[("disk", "ssd"), ("location", "elsewhere")]));
    let out = render_workloads(&grid, &sites(&["beijing"])).unwrap();
    let spec = out[&SiteName::from("beijing")]
        .as_ref()
        .unwrap()
        .spec
        .clone()
        .unwrap();
    let selector = spec.template.spec.unwrap().node_selector.unwrap();
    assert_eq!(
        selector,
        labels(&[("disk", "ssd"), ("location", "beijing")])
    );
}

#[test]
fn grid_labels_are_carried_and_grid_labels_win() {
    let mut grid: DeploymentGrid = persisted("seed000-10-deploymentgrid.yaml");
    grid.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "superedge.io/grid-selector".to_owned(),
            "spoofed".to_owned(),
        );
    let out = render_workloads(&grid, &sites(&["zone1"])).unwrap();
    let meta = &out[&SiteName::from("zone1")].as_ref().unwrap().metadata;
    let expected = labels(&[
        ("superedge.io/fed", "yes"),
        ("superedge.io/grid-selector", "deploymentgrid-demo"),
        ("superedge.io/grid-uniq-key", "zone"),
        ("sitegrid.io/node-unit", "zone1"),
    ]);
    assert_eq!(meta.labels.as_ref(), Some(&expected));
}

/// (replicas, image) of a rendered site.
fn replicas_and_image(
    out: &sitegrid_controller::render::SiteResults<k8s_openapi::api::apps::v1::Deployment>,
    site: &str,
) -> (i32, String) {
    let spec = out[&SiteName::from(site)]
        .as_ref()
        .unwrap()
        .spec
        .clone()
        .unwrap();
    let image = spec.template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    (spec.replicas.unwrap(), image)
}

#[test]
fn canary_sites_run_their_pool_template() {
    // templates: zone1 → test1, zone2 → test2; defaultTemplateName: test1.
    let grid: DeploymentGrid = persisted("seed000-09-deploymentgrid.yaml");
    let out = render_workloads(&grid, &sites(&["zone1", "zone2", "zone3"])).unwrap();
    assert_eq!(
        replicas_and_image(&out, "zone1"),
        (2, "superedge/echoserver:2.2".to_owned())
    );
    assert_eq!(
        replicas_and_image(&out, "zone2"),
        (3, "superedge/echoserver:2.3".to_owned())
    );
    // Not in `templates`: the default name, test1 — not `spec.template` (replicas 1).
    assert_eq!(
        replicas_and_image(&out, "zone3"),
        (2, "superedge/echoserver:2.2".to_owned())
    );
}

#[test]
fn default_template_name_default_means_spec_template() {
    let mut grid: DeploymentGrid = persisted("seed000-09-deploymentgrid.yaml");
    grid.spec.default_template_name = Some(TemplateName::from("default"));
    let out = render_workloads(&grid, &sites(&["zone3"])).unwrap();
    assert_eq!(
        replicas_and_image(&out, "zone3"),
        (1, "superedge/echoserver:2.2".to_owned())
    );
    // A site may ask for it by name, too.
    grid.spec
        .templates
        .insert(SiteName::from("zone2"), TemplateName::from("default"));
    let out = render_workloads(&grid, &sites(&["zone2"])).unwrap();
    assert_eq!(replicas_and_image(&out, "zone2").0, 1);
}

#[test]
fn a_missing_pool_entry_fails_only_its_site() {
    let mut grid: DeploymentGrid = persisted("seed000-09-deploymentgrid.yaml");
    grid.spec
        .templates
        .insert(SiteName::from("zone1"), TemplateName::from("test9"));
    let out = render_workloads(&grid, &sites(&["zone1", "zone2"])).unwrap();
    assert_eq!(
        out[&SiteName::from("zone1")],
        Err(SiteError::UnknownTemplate {
            site: SiteName::from("zone1"),
            template: TemplateName::from("test9"),
        })
    );
    assert_eq!(replicas_and_image(&out, "zone2").0, 3);
}

#[test]
fn unused_templates_are_those_no_site_and_no_default_names() {
    use sitegrid_api::WorkloadGridSpec;
    let mut grid: DeploymentGrid = persisted("seed000-09-deploymentgrid.yaml");
    // test1 is the default, test2 is zone2's: nothing unused.
    assert!(grid.spec.unused_templates().is_empty());
    grid.spec
        .templates
        .insert(SiteName::from("zone2"), TemplateName::from("test1"));
    assert_eq!(grid.spec.unused_templates(), [TemplateName::from("test2")]);
    grid.spec.default_template_name = None;
    grid.spec.templates.clear();
    assert_eq!(
        grid.spec.unused_templates(),
        [TemplateName::from("test1"), TemplateName::from("test2")]
    );
}

#[test]
fn a_site_value_that_is_no_valid_name_gets_a_hash_suffix() {
    let grid: DeploymentGrid = persisted("seed000-04-deploymentgrid.yaml");
    let out = render_workloads(&grid, &sites(&["Bei_Jing"])).unwrap();
    let deployment = out[&SiteName::from("Bei_Jing")].as_ref().unwrap();
    assert_eq!(
        deployment.metadata.name.as_deref(),
        Some("deploymentgrid-demo-bei-jing-240db8b6")
    );
    // The selector keeps the real label value.
    let pod = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(pod.node_selector, Some(labels(&[("location", "Bei_Jing")])));
}

#[test]
fn grids_not_read_from_the_api_server_do_not_render() {
    let grid: DeploymentGrid = crate::common::load("seed000-04-deploymentgrid.yaml");
    assert_eq!(
        render_workloads(&grid, &sites(&["beijing"])),
        Err(GridError::NotPersisted)
    );
    let sg: ServiceGrid = crate::common::load("seed000-05-servicegrid.yaml");
    assert_eq!(render_service(&sg), Err(GridError::NotPersisted));
}

#[test]
fn statefulsets_keep_the_shared_headless_service() {
    let grid: StatefulSetGrid = persisted("seed001-06-statefulsetgrid.yaml");
    let out = render_workloads(&grid, &sites(&["zone-0", "zone-1"])).unwrap();
    let names: Vec<_> = out
        .values()
        .map(|s| s.as_ref().unwrap().metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["statefulsetgrid-demo-zone-0", "statefulsetgrid-demo-zone-1"]
    );
    for (site, sts) in &out {
        let sts = sts.as_ref().unwrap();
        let spec = sts.spec.as_ref().unwrap();
        assert_eq!(spec.service_name.as_deref(), Some("servicegrid-demo-svc"));
        assert_eq!(spec.replicas, Some(3));
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.node_selector, Some(labels(&[("zone", site.as_str())])));
        // The site label is on the StatefulSet only: the pod template is the
        // grid's, so labelling an existing StatefulSet restarts no pod.
        let sts_labels = sts.metadata.labels.as_ref().unwrap();
        assert_eq!(sts_labels["sitegrid.io/node-unit"], site.as_str());
        assert_eq!(spec.template.metadata, grid.spec.template.template.metadata);
        assert_eq!(
            sts.metadata.owner_references,
            Some(vec![owner("StatefulSetGrid", "statefulsetgrid-demo")])
        );
    }
}

#[test]
fn statefulset_names_leave_room_for_the_revision_hash() {
    let mut grid: StatefulSetGrid = persisted("seed001-06-statefulsetgrid.yaml");
    grid.metadata.name = Some("statefulsetgrid-with-a-rather-long-name-for-a-demo".to_owned());
    let out = render_workloads(&grid, &sites(&["guangzhou"])).unwrap();
    let name = out[&SiteName::from("guangzhou")]
        .as_ref()
        .unwrap()
        .metadata
        .name
        .clone()
        .unwrap();
    assert_eq!(name, "statefulsetgrid-with-a-rather-long-name-for-3f7d1e59");
    assert!(name.len() <= 52);
}

#[test]
fn seed_service_grid_gives_one_topology_aware_service() {
    let mut grid: ServiceGrid = persisted("seed000-05-servicegrid.yaml");
    grid.metadata.annotations = Some(labels(&[("team", "edge")]));
    let service = render_service(&grid).unwrap();
    let meta = &service.metadata;
    assert_eq!(meta.name.as_deref(), Some("servicegrid-demo-svc"));
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(
        meta.annotations.as_ref(),
        Some(&labels(&[
            ("team", "edge"),
            ("topologyKeys", r#"["location"]"#)
        ]))
    );
    assert_eq!(
        meta.labels.as_ref(),
        Some(&labels(&[
            ("superedge.io/grid-selector", "servicegrid-demo"),
            ("superedge.io/grid-uniq-key", "location"),
        ]))
    );
    assert_eq!(
        meta.owner_references,
        Some(vec![owner("ServiceGrid", "servicegrid-demo")])
    );
    assert_eq!(service.spec, Some(grid.spec.template.clone()));
}

#[test]
fn headless_service_grid_stays_headless() {
    let grid: ServiceGrid = persisted("seed000-08-servicegrid.yaml");
    let service = render_service(&grid).unwrap();
    assert_eq!(service.spec.unwrap().cluster_ip.as_deref(), Some("None"));
}
