//! The matrix from grids written as the API server holds them, over the
//! one test world's nodes (bj-1..3 in beijing, gz-1..3 in guangzhou).

use serde_json::{json, Value};
use sitegrid_cache::topology::NodeLabels;
use sitegrid_fakeapi::sample;

use super::*;
use crate::status::render;

fn world_nodes() -> NodeLabels {
    sample::WORLD
        .nodes
        .iter()
        .map(|n| {
            let labels = sitegrid_fakeapi::testing::labels(&[("location", &n.location)]);
            (n.name.clone(), labels)
        })
        .collect()
}

/// The seed's DeploymentGrid (2 replicas per site), with `status` and extra `spec`.
fn deployment_grid(spec: Value, status: Value) -> DeploymentGrid {
    let mut grid = json!({
        "apiVersion": "superedge.io/v1", "kind": "DeploymentGrid",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"gridUniqKey": "location", "template": {"replicas": 2, "selector": {}, "template": {}}},
    });
    json_patch_merge(&mut grid["spec"], spec);
    if !status.is_null() {
        grid["status"] = status;
    }
    serde_json::from_value(grid).unwrap()
}

fn json_patch_merge(target: &mut Value, patch: Value) {
    if let (Some(t), Value::Object(p)) = (target.as_object_mut(), patch) {
        t.extend(p);
    }
}

fn deployment_state(ready: i32, updated: i32, available: i32) -> Value {
    json!({"replicas": 2, "readyReplicas": ready, "updatedReplicas": updated, "availableReplicas": available})
}

fn world(deployment_grids: Vec<DeploymentGrid>) -> World {
    World {
        deployment_grids,
        nodes: world_nodes(),
        ..World::default()
    }
}

#[test]
fn a_deployment_grid_reads_each_site_from_its_status() {
    let grid = deployment_grid(
        json!({}),
        json!({"states": {"beijing": deployment_state(2, 2, 2), "guangzhou": deployment_state(1, 2, 1)},
               "sites": 2, "readySites": 1}),
    );
    let report = build(&world(vec![grid]));
    assert_eq!(report.sites, ["beijing", "guangzhou"]);
    let row = &report.grids[0];
    assert_eq!((row.ready_sites, row.site_count), (1, 2));
    let bj = &row.cells["beijing"];
    assert_eq!(
        (bj.ready, bj.desired, bj.is_ready),
        (Some(2), Some(2), true)
    );
    assert_eq!(bj.source, Source::GridStatus);
    let gz = &row.cells["guangzhou"];
    assert_eq!(
        (gz.ready, gz.desired, gz.is_ready),
        (Some(1), Some(2), false)
    );
    assert_eq!(render::cell_text(gz), "1/2*");
    assert!(row.messages.is_empty(), "{:?}", row.messages);
}

#[test]
fn a_deployment_is_not_ready_until_its_replicas_are_updated_and_available() {
    // Ready pods of the old template: the controller does not count the site.
    let grid = deployment_grid(
        json!({}),
        json!({"states": {"beijing": deployment_state(2, 1, 2), "guangzhou": deployment_state(2, 2, 1)}}),
    );
    let report = build(&world(vec![grid]));
    for site in ["beijing", "guangzhou"] {
        assert!(!report.grids[0].cells[site].is_ready, "{site}");
    }
}

#[test]
fn canary_sites_want_their_templates_replicas_and_failures_are_named() {
    let failed = json!({"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
        "conditions": [{"type": "SiteReconciled", "status": "False", "reason": "ApplyFailed",
                        "message": "site beijing: Deployment web-beijing: refused"}]});
    let grid = deployment_grid(
        json!({"templatePool": {"big": {"replicas": 3, "selector": {}, "template": {}}},
               "templates": {"beijing": "big", "guangzhou": "gone"}}),
        json!({"states": {"beijing": failed, "guangzhou": deployment_state(2, 2, 2)}}),
    );
    let row = &build(&world(vec![grid])).grids[0];
    let bj = &row.cells["beijing"];
    assert_eq!(bj.desired, Some(3));
    assert_eq!(bj.template.as_deref(), Some("big"));
    assert!(!bj.is_ready, "a site the controller failed is not ready");
    let gz = &row.cells["guangzhou"];
    assert_eq!(gz.desired, None);
    assert_eq!(render::cell_text(gz), "2/?*");
    let messages = row.messages.join("\n");
    assert!(
        messages.contains("beijing: ApplyFailed: site beijing: Deployment web-beijing: refused"),
        "{messages}"
    );
    assert!(
        messages.contains("guangzhou: templatePool has no template \"gone\""),
        "{messages}"
    );
}

#[test]
fn a_grid_without_status_shows_its_sites_unreported() {
    let report = build(&world(vec![deployment_grid(json!({}), Value::Null)]));
    let row = &report.grids[0];
    for site in ["beijing", "guangzhou"] {
        let cell = &row.cells[site];
        assert_eq!(cell.source, Source::NotReported);
        assert_eq!(render::cell_text(cell), "?/2*");
    }
    assert_eq!((row.ready_sites, row.site_count), (0, 2));
    assert!(
        row.messages[0].starts_with("no status yet"),
        "{:?}",
        row.messages
    );
}

#[test]
fn a_statefulset_grid_is_ready_on_ready_replicas_and_lists_a_site_its_nodes_lost() {
    let grid: StatefulSetGrid = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"gridUniqKey": "location", "template": {"selector": {}, "serviceName": "db", "template": {}}},
        "status": {"states": {"beijing": {"replicas": 1, "readyReplicas": 1},
                              "shanghai": {"replicas": 1, "readyReplicas": 0}}},
    }))
    .unwrap();
    let report = build(&World {
        statefulset_grids: vec![grid],
        nodes: world_nodes(),
        ..World::default()
    });
    let row = &report.grids[0];
    assert_eq!(render::cell_text(&row.cells["beijing"]), "1/1");
    assert_eq!(render::cell_text(&row.cells["shanghai"]), "0/1*");
    // guangzhou has nodes but no state: the controller has not reported it.
    assert_eq!(row.cells["guangzhou"].source, Source::NotReported);
    assert_eq!(report.sites, ["beijing", "guangzhou", "shanghai"]);
}

/// The world's EndpointSlices of `service`.
fn world_slices(service: &str) -> Vec<Value> {
    sample::two_sites("v1")
        .into_iter()
        .filter(|o| o["kind"] == "EndpointSlice")
        .filter(|o| o["metadata"]["labels"]["kubernetes.io/service-name"] == service)
        .collect()
}

#[test]
fn a_service_grid_counts_each_sites_endpoints_from_its_slices() {
    let grid: ServiceGrid = serde_json::from_value(json!({
        "metadata": {"name": "servicegrid-demo", "namespace": "default"},
        "spec": {"gridUniqKey": "location", "template": {}},
    }))
    .unwrap();
    let mut slices = world_slices("servicegrid-demo-svc");
    // gz-2's endpoint turns unready; shanghai has a node and no endpoint.
    for ep in slices[0]["endpoints"].as_array_mut().unwrap() {
        if ep["nodeName"] == "gz-2" {
            ep["conditions"]["ready"] = json!(false);
        }
    }
    let mut nodes = world_nodes();
    nodes.insert(
        "sh-1".into(),
        sitegrid_fakeapi::testing::labels(&[("location", "shanghai")]),
    );
    let report = build(&World {
        service_grids: vec![grid],
        nodes,
        slices: [(("default".into(), "servicegrid-demo-svc".into()), slices)].into(),
        ..World::default()
    });
    let row = &report.grids[0];
    let text = |site: &str| render::cell_text(&row.cells[site]);
    // The sample's pods: bj-1 and bj-3 in beijing, gz-2 and gz-3 in guangzhou.
    assert_eq!(
        (text("beijing"), text("guangzhou"), text("shanghai")),
        ("2/2".into(), "1/2".into(), "0/0*".into())
    );
    assert_eq!(row.cells["beijing"].source, Source::EndpointSlices);
    assert_eq!((row.ready_sites, row.site_count), (2, 3));
    assert!(row
        .messages
        .iter()
        .any(|m| m.starts_with("shanghai: no ready endpoint")));
}

#[test]
fn grids_of_other_keys_share_the_columns_and_leave_the_others_blank() {
    let zoned: DeploymentGrid = serde_json::from_value(json!({
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {"gridUniqKey": "zone", "template": {"selector": {}, "template": {}}},
        "status": {"states": {"zone1": deployment_state(1, 1, 1)}, "sites": 1, "readySites": 1},
    }))
    .unwrap();
    let located = deployment_grid(
        json!({}),
        json!({"states": {"beijing": deployment_state(2, 2, 2), "guangzhou": deployment_state(2, 2, 2)}}),
    );
    let report = build(&world(vec![zoned, located]));
    assert_eq!(report.sites, ["beijing", "guangzhou", "zone1"]);
    assert_eq!(
        report.grids[0].name, "edge",
        "rows sorted by name within a kind"
    );
    let table = render::table(&report, false, false, 0);
    assert_eq!(
        table,
        "GRID      READY   BEIJING   GUANGZHOU   ZONE1\n\
         dg/edge   1/1     -         -           1/1\n\
         dg/web    2/2     2/2       2/2         -\n"
    );
}
