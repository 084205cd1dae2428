//! The real `kubectl` (1.32) against the server: discovery fallback,
//! client-side printing, JSON output and the write verbs. Without kubectl
//! these tests fail, saying how to get it.

use serde_json::Value;
use sitegrid_fakeapi::{kubectl::Kubectl, sample::WORLD, ApiServerConfig};

use crate::common::start;

#[tokio::test]
async fn kubectl_reads_and_writes() {
    let h = start(ApiServerConfig::default()).await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let kubectl = Kubectl::new(h.handle.url());

    let svc = kubectl.ok_async(&["get", "svc", "-A"]).await;
    let first = svc.lines().next().unwrap();
    assert!(
        first.starts_with("NAMESPACE") && first.contains("NAME"),
        "{svc}"
    );
    for name in ["kubernetes", "plain-echo", "servicegrid-demo-svc"] {
        assert!(svc.contains(name), "{name} in {svc}");
    }
    let all = kubectl
        .ok_async(&["get", "svc,ep,endpointslices,nodes", "-A"])
        .await;
    for needle in [
        "service/servicegrid-demo-svc",
        "endpoints/plain-echo",
        "endpointslice.discovery.k8s.io/kubernetes",
        "node/gz-3",
    ] {
        assert!(all.contains(needle), "{needle} in {all}");
    }
    let json: Value = serde_json::from_str(
        &kubectl
            .ok_async(&["get", "endpointslices", "-A", "-o", "json"])
            .await,
    )
    .unwrap();
    let items = json["items"].as_array().unwrap();
    // One slice per Service of the sample, and `kubernetes`.
    assert_eq!(items.len(), WORLD.services.len() + 1);
    assert!(items
        .iter()
        .all(|i| i["apiVersion"] == "discovery.k8s.io/v1"));
    let demo = items
        .iter()
        .find(|i| i["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc")
        .unwrap();
    let nodes: Vec<&str> = demo["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["bj-1", "bj-3", "gz-2", "gz-3"]);
    let raw: Value = serde_json::from_str(
        &kubectl
            .ok_async(&[
                "get",
                "--raw",
                "/api/v1/namespaces/default/endpoints/plain-echo",
            ])
            .await,
    )
    .unwrap();
    assert_eq!(raw["kind"], "Endpoints");
    assert_eq!(raw["subsets"][0]["addresses"].as_array().unwrap().len(), 2);

    // Writes: POST, merge PATCH, DELETE (which then GETs until the object is gone).
    // `create configmap` would send protobuf, which this server does not
    // decode; `create -f` sends JSON (and needs no OpenAPI with --validate=false).
    let manifest =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"demo"},"data":{"a":"b"}}"#;
    let created = kubectl
        .run_async(&["create", "--validate=false", "-f", "-"], manifest)
        .await;
    assert!(created.success, "{}", created.stderr);
    kubectl
        .ok_async(&["label", "configmap", "demo", "site=bj"])
        .await;
    let cm = h.server.get("configmaps", Some("default"), "demo").unwrap();
    assert_eq!(cm["data"]["a"], "b");
    assert_eq!(cm["metadata"]["labels"]["site"], "bj");
    kubectl.ok_async(&["delete", "configmap", "demo"]).await;
    assert!(h
        .server
        .get("configmaps", Some("default"), "demo")
        .is_none());
}

#[tokio::test]
async fn kubectl_with_v1beta1_endpointslices() {
    let h = start(ApiServerConfig {
        endpointslice_version: "v1beta1",
        ..ApiServerConfig::default()
    })
    .await;
    h.server
        .load(sitegrid_fakeapi::sample::two_sites("v1beta1"));
    let json: Value = serde_json::from_str(
        &Kubectl::new(h.handle.url())
            .ok_async(&["get", "endpointslices", "-A", "-o", "json"])
            .await,
    )
    .unwrap();
    let items = json["items"].as_array().unwrap();
    // One slice per Service of the sample, and `kubernetes`.
    assert_eq!(items.len(), WORLD.services.len() + 1);
    assert!(items
        .iter()
        .all(|i| i["apiVersion"] == "discovery.k8s.io/v1beta1"));
}

#[tokio::test]
async fn kubectl_prints_server_side_tables() {
    let h = start(ApiServerConfig::default()).await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let kubectl = Kubectl::new(h.handle.url());

    // The columns come from the server's Table; without one kubectl would
    // print only NAME and AGE.
    let ep = kubectl.ok_async(&["get", "endpoints", "-A"]).await;
    let header: Vec<&str> = ep.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "ENDPOINTS", "AGE"], "{ep}");
    let plain = ep.lines().find(|l| l.contains("plain-echo")).unwrap();
    assert!(plain.contains(" 10.0.0.81:8080,10.0.1.33:8080 "), "{ep}");

    let nodes = kubectl.ok_async(&["get", "nodes", "-o", "wide"]).await;
    let header: Vec<&str> = nodes.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header[..5],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{nodes}"
    );
    assert!(header.contains(&"INTERNAL-IP"), "{nodes}");
}
