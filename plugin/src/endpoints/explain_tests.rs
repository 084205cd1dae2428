//! Verdicts over the one test world: `servicegrid-demo-svc` (topologyKeys
//! location) has pods on bj-1, bj-3 (beijing) and gz-2, gz-3 (guangzhou);
//! `plain-echo` has no annotation.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sitegrid_fakeapi::sample::{self, WORLD};

use super::*;

struct Fixture {
    service: Service,
    nodes: NodeLabels,
    slices: Vec<Value>,
}

fn fixture(name: &str, keys: Option<&str>) -> Fixture {
    let objects = sample::two_sites("v1");
    let mut service = objects
        .iter()
        .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == name)
        .cloned()
        .unwrap();
    if let Some(keys) = keys {
        service["metadata"]["annotations"] = json!({"topologyKeys": keys});
    }
    let nodes = objects
        .iter()
        .filter(|o| o["kind"] == "Node")
        .map(|n| {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(n["metadata"]["labels"].clone()).unwrap();
            (n["metadata"]["name"].as_str().unwrap().to_owned(), labels)
        })
        .collect();
    let slices = objects
        .into_iter()
        .filter(|o| o["kind"] == "EndpointSlice")
        .filter(|o| o["metadata"]["labels"]["kubernetes.io/service-name"] == name)
        .collect();
    Fixture {
        service: serde_json::from_value(service).unwrap(),
        nodes,
        slices,
    }
}

fn run(f: &Fixture, node: &str) -> (Filter, Vec<Verdict>) {
    explain(&Inputs {
        service: &f.service,
        node,
        nodes: &f.nodes,
        slices: &f.slices,
    })
}

fn served(verdicts: &[Verdict]) -> Vec<String> {
    let mut ips: Vec<String> = verdicts
        .iter()
        .filter(|v| v.served)
        .flat_map(|v| v.addresses.clone())
        .collect();
    ips.sort();
    ips
}

#[test]
fn a_node_is_served_its_sites_endpoints_and_told_why_the_others_go() {
    let f = fixture("servicegrid-demo-svc", None);
    let (filter, verdicts) = run(&f, "bj-1");
    assert_eq!(
        served(&verdicts),
        WORLD.ips_of("default", "servicegrid-demo-svc", Some("beijing"))
    );
    assert_eq!(filter.matched.as_deref(), Some("location=beijing"));
    assert_eq!(filter.topology_keys, Some(vec!["location".to_owned()]));
    let gz2 = verdicts
        .iter()
        .find(|v| v.node.as_deref() == Some("gz-2"))
        .unwrap();
    assert!(!gz2.served);
    assert_eq!(
        gz2.reason,
        "dropped: node gz-2 has location=guangzhou, bj-1 has location=beijing"
    );
    assert_eq!(gz2.pod.as_deref(), Some("echoserver-gz-2"));
    assert_eq!(
        filter.keys,
        [KeyStep {
            key: "location".into(),
            node_value: Some("beijing".into()),
            endpoints: 2,
            ready: 2,
            matched: true,
        }]
    );
}

#[test]
fn a_service_without_topology_keys_is_not_filtered() {
    let f = fixture("plain-echo", None);
    let (filter, verdicts) = run(&f, "gz-1");
    assert!(!filter.filtered);
    assert!(
        filter.summary.contains("no topologyKeys annotation"),
        "{}",
        filter.summary
    );
    assert_eq!(
        served(&verdicts),
        WORLD.ips_of("default", "plain-echo", None)
    );
}

#[test]
fn an_invalid_annotation_is_said_and_nothing_is_filtered() {
    let f = fixture("servicegrid-demo-svc", Some("location"));
    let (filter, verdicts) = run(&f, "bj-1");
    assert!(!filter.filtered);
    assert!(
        filter.summary.contains("is not a JSON array of strings"),
        "{}",
        filter.summary
    );
    assert_eq!(verdicts.iter().filter(|v| v.served).count(), 4);
}

#[test]
fn keys_are_tried_in_order_and_star_serves_everything() {
    // No node has `zone`: the key yields nothing, "*" wins.
    let f = fixture("servicegrid-demo-svc", Some(r#"["zone","*"]"#));
    let (filter, verdicts) = run(&f, "bj-1");
    assert_eq!(filter.matched.as_deref(), Some("*"));
    assert_eq!(
        (filter.keys[0].node_value.as_ref(), filter.keys[0].matched),
        (None, false)
    );
    assert!(filter.keys[1].matched);
    assert!(verdicts.iter().all(|v| v.served));
}

#[test]
fn a_site_without_endpoints_is_served_nothing() {
    // bj-2 in its own site `lonely`: no endpoint there, and no "*".
    let mut f = fixture("servicegrid-demo-svc", None);
    f.nodes
        .get_mut("bj-2")
        .unwrap()
        .insert("location".into(), "lonely".into());
    let (filter, verdicts) = run(&f, "bj-2");
    assert_eq!(filter.matched, None);
    assert!(verdicts.iter().all(|v| !v.served));
    assert!(
        filter.summary.contains("no key matched"),
        "{}",
        filter.summary
    );
}
