//! `kubectl sitegrid sites`: NodeUnits as site-manager writes them (the
//! seed's beijing by name, guangzhou by selector), and one the controller has
//! not handled yet.

use serde_json::{json, Value};

use crate::common::{lines, Cluster};

fn unit(name: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "site.superedge.io/v1alpha2", "kind": "NodeUnit",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    })
}

/// beijing with bj-2 NotReady, guangzhou with a label conflict, a group, and
/// `shanghai` (no status yet) naming bj-1 and a node carrying its label.
fn with_units() -> Cluster {
    let cluster = Cluster::two_sites();
    let mut sh = cluster.api.get("nodes", None, "gz-3").unwrap();
    sh["metadata"]["labels"]["shanghai"] = json!("nodeunits.superedge.io");
    cluster.apply([
        sh,
        unit(
            "beijing",
            json!({"type": "edge", "nodes": ["bj-1", "bj-2", "bj-3"]}),
            json!({"readyRate": "2/3", "readyNodes": ["bj-1", "bj-3"], "notReadyNodes": ["bj-2"],
                   "conditions": [{"type": "Conflict", "status": "False", "reason": "NoConflict",
                                   "message": "No conflicts.", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        ),
        unit(
            "guangzhou",
            json!({"type": "edge", "unschedulable": true,
                   "selector": {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["gz"]}]}}),
            json!({"readyRate": "3/3", "readyNodes": ["gz-1", "gz-2", "gz-3"],
                   "conditions": [{"type": "Conflict", "status": "True", "reason": "Conflict",
                                   "message": "node gz-3: label guangzhou set by someone else",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        ),
        unit("shanghai", json!({"type": "cloud", "nodes": ["bj-1"]}), Value::Null),
        json!({"apiVersion": "site.superedge.io/v1alpha2", "kind": "NodeGroup",
               "metadata": {"name": "location"},
               "spec": {"nodeUnits": ["beijing", "guangzhou"]},
               "status": {"unitNumber": 2, "nodeUnits": ["beijing", "guangzhou"]}}),
    ]);
    cluster
}

#[test]
fn sites_lists_units_with_their_nodes_and_readiness() {
    let ran = with_units().run(&["sites"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let rows: Vec<Vec<&str>> = lines(&ran.stdout)
        .iter()
        .map(|l| l.split_whitespace().take(4).collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "TYPE", "READY", "NODES"],
            vec!["beijing", "edge", "2/3", "bj-1,bj-2,bj-3"],
            vec!["guangzhou", "edge", "3/3", "gz-1,gz-2,gz-3"],
            // No status: bj-1 by name, gz-3 by its label; both Ready in the sample.
            vec!["shanghai", "cloud", "2/2", "bj-1,gz-3"],
        ]
    );
    assert!(lines(&ran.stdout)[0].ends_with("AGE"));
}

#[test]
fn wide_shows_who_is_not_ready_cordons_groups_and_conflicts() {
    let ran = with_units().run(&["sites", "-o", "wide"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let out = lines(&ran.stdout);
    let headers: Vec<&str> = out[0].split_whitespace().collect();
    assert_eq!(
        headers,
        [
            "NAME",
            "TYPE",
            "READY",
            "NODES",
            "NOT-READY",
            "UNSCHEDULABLE",
            "GROUPS",
            "AGE",
            "MESSAGE"
        ]
    );
    let bj: Vec<&str> = out[1].split_whitespace().collect();
    assert_eq!(&bj[4..7], ["bj-2", "false", "location"]);
    assert!(
        out[1].ends_with("<none>"),
        "no conflict in beijing: {}",
        out[1]
    );
    let gz: Vec<&str> = out[2].split_whitespace().collect();
    assert_eq!(&gz[4..7], ["<none>", "true", "location"]);
    assert!(
        out[2].ends_with("Conflict (Conflict): node gz-3: label guangzhou set by someone else"),
        "{}",
        out[2]
    );
    assert!(out[3].contains("no status yet"), "{}", out[3]);
}

#[test]
fn sites_json_says_where_each_units_figures_come_from() {
    let ran = with_units().run(&["sites", "-o", "json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v: Value = serde_json::from_str(&ran.stdout).unwrap();
    let sites = v["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 3);
    assert_eq!(sites[0]["notReadyNodes"], json!(["bj-2"]));
    assert_eq!(sites[0]["source"], "unitStatus");
    assert_eq!(sites[2]["source"], "nodes");
    assert_eq!(sites[2]["nodes"], json!(["bj-1", "gz-3"]));
}

#[test]
fn no_units_says_so() {
    let ran = Cluster::two_sites().run(&["sites"]);
    assert_eq!(ran.code, 0);
    assert_eq!(
        (ran.stdout.as_str(), ran.stderr.as_str()),
        ("", "No NodeUnits found.\n")
    );
}
