//! `kubectl sitegrid endpoints SVC --node NODE` against the two-site world,
//! with EndpointSlices in v1 and, as Kubernetes 1.20 serves them, v1beta1
//! (the node only in `topology["kubernetes.io/hostname"]`).

use serde_json::{json, Value};
use sitegrid_fakeapi::sample::{self, WORLD};
use sitegrid_fakeapi::ApiServerConfig;

use crate::common::{lines, Cluster};

fn served_ips(report: &Value) -> Vec<String> {
    let mut ips: Vec<String> = report["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["served"] == true)
        .flat_map(|e| e["addresses"].as_array().unwrap().clone())
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    ips.sort();
    ips
}

#[test]
fn a_node_is_shown_its_sites_endpoints_and_why_the_others_are_dropped() {
    let ran = Cluster::two_sites().run(&["endpoints", "servicegrid-demo-svc", "--node", "bj-1"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let out = lines(&ran.stdout);
    assert_eq!(
        out[0],
        "Service default/servicegrid-demo-svc as sitegrid-proxy on node bj-1 serves it."
    );
    assert!(
        out[1].contains("with sitegrid-proxy's own filter code")
            && out[1].contains("discovery.k8s.io/v1"),
        "{}",
        out[1]
    );
    assert!(
        out[2].contains("key location matched (bj-1 has location=beijing)"),
        "{}",
        out[2]
    );
    assert_eq!(
        out[3],
        "  key location: bj-1 has location=beijing; 2 endpoint(s) there, 2 ready  <- matched"
    );
    let table = &out[out.iter().position(|l| l.starts_with("ADDRESS")).unwrap()..];
    assert_eq!(
        table,
        [
            "ADDRESS      NODE   READY   SERVED   REASON",
            "10.0.0.70    bj-1   true    yes      node bj-1 has location=beijing, as bj-1 does",
            "10.0.1.72    bj-3   true    yes      node bj-3 has location=beijing, as bj-1 does",
            "10.0.0.139   gz-2   true    no       dropped: node gz-2 has location=guangzhou, bj-1 has location=beijing",
            "10.0.1.8     gz-3   true    no       dropped: node gz-3 has location=guangzhou, bj-1 has location=beijing",
        ]
    );
}

#[test]
fn kubernetes_1_20_slices_are_read_in_v1beta1_and_filtered_the_same() {
    let cluster = Cluster::start(
        ApiServerConfig {
            endpointslice_version: "v1beta1",
            ..ApiServerConfig::default()
        },
        sample::two_sites("v1beta1"),
    );
    for (node, site) in [("gz-1", "guangzhou"), ("bj-2", "beijing")] {
        let ran = cluster.run(&[
            "endpoints",
            "servicegrid-demo-svc",
            "--node",
            node,
            "-o",
            "json",
        ]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let report: Value = serde_json::from_str(&ran.stdout).unwrap();
        assert_eq!(report["endpointSliceVersion"], "discovery.k8s.io/v1beta1");
        assert_eq!(
            served_ips(&report),
            WORLD.ips_of("default", "servicegrid-demo-svc", Some(site)),
            "{node}"
        );
        assert_eq!(report["filter"]["matched"], format!("location={site}"));
        assert!(report["computedFrom"]
            .as_str()
            .unwrap()
            .contains("sitegrid-proxy's own filter code"));
    }
}

#[test]
fn a_service_without_topology_keys_is_said_to_be_unfiltered() {
    let ran =
        Cluster::two_sites().run(&["endpoints", "plain-echo", "--node", "bj-1", "-o", "wide"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout.contains(
            "Filter: the Service has no topologyKeys annotation: sitegrid-proxy does not filter it"
        ),
        "{}",
        ran.stdout
    );
    let rows: Vec<Vec<&str>> = lines(&ran.stdout)
        .iter()
        .skip_while(|l| !l.starts_with("ADDRESS"))
        .map(|l| l.split_whitespace().take(6).collect())
        .collect();
    assert_eq!(
        rows[0],
        ["ADDRESS", "NODE", "POD", "SLICE", "READY", "SERVED"]
    );
    let served: Vec<(&str, &str)> = rows[1..].iter().map(|r| (r[0], r[5])).collect();
    assert_eq!(served, [("10.0.0.81", "yes"), ("10.0.1.33", "yes")]);
}

#[test]
fn the_node_s_proxy_pod_is_found_or_its_absence_said() {
    let cluster = Cluster::two_sites();
    cluster.apply([json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "sitegrid-proxy-x7k2p", "namespace": "kube-system", "labels": {"app": "sitegrid-proxy"}},
        "spec": {"nodeName": "bj-1", "containers": [{"name": "proxy", "image": "sitegrid/sitegrid-proxy:0.1.0"}]},
        "status": {"phase": "Running"},
    })]);
    let on_bj1 = cluster.run(&["endpoints", "servicegrid-demo-svc", "--node", "bj-1"]);
    assert!(
        on_bj1
            .stdout
            .contains("Proxy: sitegrid-proxy on bj-1: kube-system/sitegrid-proxy-x7k2p (Running)."),
        "{}",
        on_bj1.stdout
    );
    let on_gz1 = cluster.run(&[
        "endpoints",
        "servicegrid-demo-svc",
        "--node",
        "gz-1",
        "-o",
        "json",
    ]);
    assert_eq!(on_gz1.code, 0);
    let report: Value = serde_json::from_str(&on_gz1.stdout).unwrap();
    assert_eq!(report["proxy"]["pods"], json!([]));
    assert!(
        on_gz1.stderr.starts_with("warning: no sitegrid-proxy on node gz-1 (no pod labelled app=sitegrid-proxy in kube-system)"),
        "{}",
        on_gz1.stderr
    );
}

#[test]
fn an_unknown_service_or_node_is_one_clear_error() {
    let cluster = Cluster::two_sites();
    let ran = cluster.run(&["endpoints", "nope", "--node", "bj-1"]);
    assert_eq!(ran.code, 1);
    assert_eq!(
        ran.stderr,
        "error: service \"nope\" not found in namespace \"default\"\n"
    );
    let ran = cluster.run(&[
        "endpoints",
        "kube-dns",
        "-n",
        "kube-system",
        "--node",
        "bj-9",
    ]);
    assert_eq!(ran.code, 1);
    assert_eq!(ran.stderr, "error: node \"bj-9\" not found\n");
    assert_eq!(ran.stdout, "");
}
