//! `endpoints --node` says exactly what sitegrid-proxy serves: for every node
//! of the world and several `topologyKeys` (one key, fall-through to `"*"`,
//! a key no node has, ready and not-ready endpoints, an invalid
//! annotation), the endpoints it marks served are those the proxy's cache
//! (its writer, fed the same objects as its reflectors would feed it) holds
//! in the node's EndpointSlices.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use serde_json::{json, Value};
use sitegrid_cache::testing::{obj, sync};
use sitegrid_cache::topology::NodeLabels;
use sitegrid_cache::{with_start_rv, ApiVersion, CacheConfig, ResourceKind};
use sitegrid_fakeapi::sample;
use sitegrid_plugin::endpoints::{explain, Inputs};

/// The world with `servicegrid-demo-svc` annotated `keys`, zones on some
/// nodes, and gz-3's endpoint not ready.
fn world(keys: &str) -> Vec<Value> {
    let mut objects = sample::two_sites("v1");
    for (i, o) in objects.iter_mut().enumerate() {
        o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match o["kind"].as_str() {
            Some("Service") if name == "servicegrid-demo-svc" => {
                o["metadata"]["annotations"] = json!({"topologyKeys": keys});
            }
            Some("Node") if ["bj-1", "bj-2", "gz-2"].contains(&name.as_str()) => {
                o["metadata"]["labels"]["zone"] = json!(if name == "gz-2" { "z2" } else { "z1" });
            }
            Some("EndpointSlice") => {
                for ep in o["endpoints"].as_array_mut().into_iter().flatten() {
                    if ep["nodeName"] == "gz-3" {
                        ep["conditions"]["ready"] = json!(false);
                    }
                }
            }
            _ => {}
        }
    }
    objects
}

fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    objects.iter().filter(move |o| o["kind"] == kind)
}

/// The addresses of the Service's slices as the proxy for `node` serves them.
fn proxy_serves(objects: &[Value], node: &str) -> Vec<String> {
    let (cache, slot) = with_start_rv(CacheConfig::default(), 1000);
    let mut writer = slot.start(node, ApiVersion::V1);
    for (kind, name) in [
        (ResourceKind::Nodes, "Node"),
        (ResourceKind::Services, "Service"),
        (ResourceKind::EndpointSlices, "EndpointSlice"),
    ] {
        sync(&mut writer, kind, of_kind(objects, name).map(obj));
    }
    let mut ips: Vec<String> = of_kind(objects, "EndpointSlice")
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc")
        .flat_map(|s| {
            let key = format!("default/{}", s["metadata"]["name"].as_str().unwrap());
            let view = cache.store(ResourceKind::EndpointSlices).get(&key).unwrap();
            let served = view
                .body(cache.codec(), ApiVersion::V1, ApiVersion::V1)
                .to_value();
            served["endpoints"].as_array().cloned().unwrap_or_default()
        })
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    ips.sort();
    ips
}

/// The addresses `explain` marks served for `node`.
fn plugin_serves(objects: &[Value], node: &str) -> Vec<String> {
    let service: Service = serde_json::from_value(
        of_kind(objects, "Service")
            .find(|s| s["metadata"]["name"] == "servicegrid-demo-svc")
            .unwrap()
            .clone(),
    )
    .unwrap();
    let nodes: NodeLabels = of_kind(objects, "Node")
        .map(|n| {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(n["metadata"]["labels"].clone()).unwrap();
            (n["metadata"]["name"].as_str().unwrap().to_owned(), labels)
        })
        .collect();
    let slices: Vec<Value> = of_kind(objects, "EndpointSlice")
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc")
        .cloned()
        .collect();
    let (_, verdicts) = explain(&Inputs {
        service: &service,
        node,
        nodes: &nodes,
        slices: &slices,
    });
    let mut ips: Vec<String> = verdicts
        .into_iter()
        .filter(|v| v.served)
        .flat_map(|v| v.addresses)
        .collect();
    ips.sort();
    ips
}

#[test]
fn every_node_is_told_what_its_proxy_serves() {
    let nodes = ["bj-1", "bj-2", "bj-3", "gz-1", "gz-2", "gz-3"];
    let mut differs = 0;
    for keys in [
        r#"["location"]"#,
        r#"["zone","location"]"#,
        r#"["zone","*"]"#,
        r#"["rack"]"#,
        r#"["rack","location","*"]"#,
        "not json",
    ] {
        let objects = world(keys);
        for node in nodes {
            let proxy = proxy_serves(&objects, node);
            assert_eq!(plugin_serves(&objects, node), proxy, "{keys} on {node}");
            differs += usize::from(proxy.len() != 4);
        }
    }
    // The worlds filter for real: most nodes are not served every endpoint.
    assert!(differs > 20, "{differs}");
}
