//! The headless Service's own name: the site's ready pods behind it.

use std::sync::Arc;

use super::{body, World};
use crate::fixtures::{pod, service_grid};

#[test]
fn the_headless_service_name_answers_with_the_sites_ready_pods() {
    let mut w = World::seed();
    w.service_grids.push(service_grid(
        "default",
        "servicegrid-demo",
        "statefulsetgrid-demo",
        true,
    ));
    // pod 1 of beijing turns unready; pod 2 is being deleted.
    let sts = Arc::clone(&w.statefulsets[0]);
    w.pods[1] = pod(&sts, 1, &["10.0.0.11"], false);
    let mut leaving = (*pod(&sts, 2, &["10.0.0.12"], true)).clone();
    leaving.metadata.deletion_timestamp =
        serde_json::from_value(serde_json::json!("2026-11-21T15:12:23Z")).ok();
    assert!(leaving.metadata.deletion_timestamp.is_some());
    w.pods[2] = Arc::new(leaving);
    let file = w.file(&[("location", "beijing")]);
    assert_eq!(
        file,
        body(&[
            "10.0.0.10 servicegrid-demo-svc.default.svc.cluster.local",
            "10.0.0.10 statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local",
            // The ordinal names stay: a client asking for pod 1 by name gets pod 1.
            "10.0.0.11 statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local",
            "10.0.0.12 statefulsetgrid-demo-2.servicegrid-demo-svc.default.svc.cluster.local",
        ])
    );
    let gz = w.file(&[("location", "guangzhou")]);
    for ip in ["10.0.1.10", "10.0.1.11", "10.0.1.12"] {
        assert!(
            gz.contains(&format!(
                "{ip} servicegrid-demo-svc.default.svc.cluster.local\n"
            )),
            "{gz}"
        );
    }
    assert!(!gz.contains("10.0.0."), "{gz}");
}

#[test]
fn headless_names_need_a_headless_selecting_service_and_a_ready_pod() {
    let mut w = World::seed();
    // Not headless: its ClusterIP answers, not dnsd.
    w.service_grids = vec![service_grid(
        "default",
        "servicegrid-demo",
        "statefulsetgrid-demo",
        false,
    )];
    assert!(!w
        .file(&[("location", "beijing")])
        .contains("\n10.0.0.10 servicegrid-demo-svc."));
    // Headless but selecting other pods.
    w.service_grids = vec![service_grid("default", "servicegrid-demo", "other", true)];
    assert!(!w
        .file(&[("location", "beijing")])
        .contains(" servicegrid-demo-svc.default"));
    // No ready pod in the site: no line, so CoreDNS falls through to every site's pods.
    w.service_grids = vec![service_grid(
        "default",
        "servicegrid-demo",
        "statefulsetgrid-demo",
        true,
    )];
    let sts = Arc::clone(&w.statefulsets[0]);
    for i in 0..3 {
        w.pods[i as usize] = pod(&sts, i, &[&format!("10.0.0.{}", 10 + i)], false);
    }
    assert!(!w
        .file(&[("location", "beijing")])
        .contains(" servicegrid-demo-svc.default"));
    // ...unless the Service publishes unready addresses.
    let mut sg = (*w.service_grids[0]).clone();
    sg.spec.template.publish_not_ready_addresses = Some(true);
    w.service_grids = vec![Arc::new(sg)];
    let file = w.file(&[("location", "beijing")]);
    assert_eq!(
        file.matches(" servicegrid-demo-svc.default.svc").count(),
        3,
        "{file}"
    );
}
