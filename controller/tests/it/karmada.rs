//! The Karmada status aggregation (`deploy/karmada/`, Lua, tested by
//! `deploy/karmada/test.sh`) and the controller's own multi-cluster
//! aggregation give the same `states`, `sites`, `readySites`, per-cluster
//! states and `SitesUnique` condition for the same reports: users who move
//! between clusternet and Karmada read the same status.

use std::path::PathBuf;

use serde_json::{json, Map, Value};
use sitegrid_controller::fed::aggregate::{self, ClusterReport, SITES_UNIQUE};

/// "now" in the Karmada test runner (deploy/karmada/testlib/run.py).
const NOW: &str = "2026-11-23T12:00:00Z";

fn cases(kind: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/karmada/testdata")
        .join(kind)
        .join("aggregatestatus-test.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---\n")
        .map(|doc| {
            serde_saphyr::from_str::<Value>(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .filter(|case| case.get("statusItems").is_some())
        .collect()
}

/// What both aggregations promise alike (the controller adds reachability).
fn shared_part(status: &Value) -> Value {
    let clusters: Map<String, Value> = status
        .get("clusters")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, c)| Some((name.clone(), c.get("states")?.clone())))
        .collect();
    let unique = status
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|list| list.iter().find(|c| c["type"] == SITES_UNIQUE))
        .cloned();
    json!({
        "states": status.get("states").cloned().unwrap_or_else(|| json!({})),
        "sites": status.get("sites").cloned().unwrap_or(json!(0)),
        "readySites": status.get("readySites").cloned().unwrap_or(json!(0)),
        "clusters": clusters,
        "sitesUnique": unique,
    })
}

fn agree(kind: &str) {
    let cases = cases(kind);
    assert!(cases.len() >= 2, "{kind}: too few cases");
    for case in cases {
        let name = case["name"].as_str().unwrap_or_default().to_owned();
        let items = case["statusItems"].as_array().cloned().unwrap_or_default();
        let reports: Vec<ClusterReport> = items
            .iter()
            .map(|item| ClusterReport {
                name: item["clusterName"].as_str().unwrap().to_owned(),
                states: item
                    .pointer("/status/states")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
                reachable: true,
                ..ClusterReport::default()
            })
            .collect();
        let previous = case.pointer("/desiredObj/status");
        let ours = aggregate::workload_status(&reports, previous, NOW);
        let theirs = case
            .pointer("/output/status")
            .cloned()
            .unwrap_or_else(|| json!({}));
        assert_eq!(shared_part(&ours), shared_part(&theirs), "{kind}: {name}");
    }
}

#[test]
fn deploymentgrid_status_is_aggregated_as_karmadas_script_does() {
    agree("deploymentgrid");
}

#[test]
fn statefulsetgrid_status_is_aggregated_as_karmadas_script_does() {
    agree("statefulsetgrid");
}
