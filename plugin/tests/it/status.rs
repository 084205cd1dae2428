//! `kubectl sitegrid status` against the in-memory API server holding the
//! two-site world: bj-1..3 in beijing, gz-1..3 in guangzhou, and the
//! sample's `servicegrid-demo-svc` with pods on bj-1, bj-3, gz-2 and gz-3.

use serde_json::{json, Value};

use crate::common::{deployment_grid, lines, service_grid, site_state, Cluster};

/// The seed's grids: a DeploymentGrid whose guangzhou has 1 of 2 ready, and the ServiceGrid.
fn seeded() -> Cluster {
    let cluster = Cluster::two_sites();
    cluster.apply([
        deployment_grid(
            "default",
            "deploymentgrid-demo",
            json!({"states": {"beijing": site_state(2), "guangzhou": site_state(1)},
                   "sites": 2, "readySites": 1}),
        ),
        service_grid(),
    ]);
    cluster
}

#[test]
fn status_prints_grids_by_sites_with_not_ready_cells_marked() {
    let ran = seeded().run(&["status"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        lines(&ran.stdout),
        [
            "GRID                     READY   BEIJING   GUANGZHOU",
            "dg/deploymentgrid-demo   1/2     2/2       1/2*",
            "sg/servicegrid-demo      2/2     2/2       2/2",
        ]
    );
}

#[test]
fn status_json_carries_every_cell_and_where_it_comes_from() {
    let ran = seeded().run(&["status", "-o", "json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(report["sites"], json!(["beijing", "guangzhou"]));
    let dg = &report["grids"][0];
    assert_eq!(
        (&dg["kind"], &dg["name"]),
        (&json!("DeploymentGrid"), &json!("deploymentgrid-demo"))
    );
    assert_eq!(dg["readySites"], 1);
    let gz = &dg["cells"]["guangzhou"];
    assert_eq!(
        (&gz["ready"], &gz["desired"], &gz["isReady"]),
        (&json!(1), &json!(2), &json!(false))
    );
    assert_eq!(gz["source"], "gridStatus");
    let sg = &report["grids"][1]["cells"]["beijing"];
    assert_eq!(sg["source"], "endpointSlices");
    assert_eq!((&sg["ready"], &sg["desired"]), (&json!(2), &json!(2)));
}

#[test]
fn wide_adds_the_key_the_age_and_what_is_wrong() {
    let cluster = seeded();
    let failing = json!({"replicas": 0, "conditions": [{"type": "SiteReconciled", "status": "False",
        "reason": "TemplateNotFound", "message": "site guangzhou: no template \"test9\"",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    cluster.apply([deployment_grid(
        "default",
        "deploymentgrid-demo",
        json!({"states": {"beijing": site_state(2), "guangzhou": failing}, "sites": 2, "readySites": 1}),
    )]);
    let ran = cluster.run(&["status", "-o", "wide"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let out = lines(&ran.stdout);
    let headers: Vec<&str> = out[0].split_whitespace().collect();
    assert_eq!(
        headers,
        [
            "GRID",
            "KEY",
            "READY",
            "BEIJING",
            "GUANGZHOU",
            "AGE",
            "MESSAGE"
        ]
    );
    let dg: Vec<&str> = out[1].split_whitespace().collect();
    assert_eq!(
        &dg[..5],
        ["dg/deploymentgrid-demo", "location", "1/2", "2/2", "0/2*"]
    );
    assert!(
        out[1].ends_with("guangzhou: TemplateNotFound: site guangzhou: no template \"test9\""),
        "{}",
        out[1]
    );
    assert!(
        out[2].ends_with("<none>"),
        "a healthy grid has no message: {}",
        out[2]
    );
}

#[test]
fn namespaces_follow_kubectl_n_and_a() {
    let cluster = seeded();
    cluster.apply([
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
        deployment_grid(
            "shop",
            "cart",
            json!({"states": {"beijing": site_state(2)}}),
        ),
    ]);
    let default = cluster.run(&["status"]);
    assert!(!default.stdout.contains("cart"), "{}", default.stdout);
    let shop = cluster.run(&["status", "-n", "shop"]);
    assert_eq!(
        lines(&shop.stdout)[1].split_whitespace().next(),
        Some("dg/cart")
    );
    assert_eq!(lines(&shop.stdout).len(), 2, "{}", shop.stdout);
    let all = cluster.run(&["-A", "status"]);
    let rows: Vec<Vec<&str>> = lines(&all.stdout)
        .iter()
        .map(|l| l.split_whitespace().take(2).collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAMESPACE", "GRID"],
            vec!["default", "dg/deploymentgrid-demo"],
            vec!["default", "sg/servicegrid-demo"],
            vec!["shop", "dg/cart"],
        ]
    );
    // cart has no guangzhou state: reported as unknown, not as absent.
    assert!(lines(&all.stdout)[3].contains("?/2*"), "{}", all.stdout);
}

#[test]
fn a_namespace_without_grids_says_so() {
    let ran = Cluster::two_sites().run(&["status", "-n", "kube-system"]);
    assert_eq!(ran.code, 0);
    assert_eq!(ran.stdout, "");
    assert_eq!(ran.stderr, "No grids found in kube-system namespace.\n");
}
