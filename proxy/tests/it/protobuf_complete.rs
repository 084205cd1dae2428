//! Objects with fields the protobuf encoder does not know (a field of a
//! Kubernetes release newer than the proxy's types): never served in
//! protobuf as if complete. Protobuf clients that take JSON too (kube-proxy
//! sends `application/vnd.kubernetes.protobuf, */*`) get JSON with every
//! field; their open protobuf watches end before the event and resume in
//! JSON; a client that takes protobuf only gets 406.

use k8s_pb::api::discovery::v1 as discovery;
use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};
use sitegrid_cache::{CacheConfig, ResourceKind};
use sitegrid_proxy::handlers::HandlerSettings;

use crate::common::*;
use crate::protobuf::{decode, fetch, unknown, watch, KUBE_PROXY, PROTOBUF};

const SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices";

/// The sample's EndpointSlice of `servicegrid-demo-svc` at upstream version
/// `rv`, its first endpoint carrying a field no Kubernetes type here has.
fn slice_with_a_future_field(rv: u64) -> Value {
    let mut slice = sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .find(|o| {
            o["kind"] == "EndpointSlice"
                && o["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc"
        })
        .expect("the sample has the demo's slice");
    slice["metadata"]["resourceVersion"] = json!(rv.to_string());
    slice["metadata"]["creationTimestamp"] = json!("2026-11-21T15:12:23Z");
    for e in slice["endpoints"].as_array_mut().unwrap() {
        e["hints"]["forRegions"] = json!([{"name": "north"}]);
    }
    slice
}

fn future_fields(list: &Value) -> usize {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["hints"]["forRegions"] == json!([{"name": "north"}]))
        .count()
}

#[tokio::test]
async fn a_slice_protobuf_cannot_carry_whole_is_served_in_json_to_protobuf_clients() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    // Before: kube-proxy's Accept gets protobuf.
    let (_, content_type, _) = fetch(&app, SLICES, KUBE_PROXY).await;
    assert_eq!(content_type, PROTOBUF);
    let rv = list_rv(&app, SLICES).await;
    let mut pb = watch(&app, &format!("{SLICES}?watch=1&resourceVersion={rv}")).await;

    p.handle(
        ResourceKind::EndpointSlices,
        W::Apply(obj(slice_with_a_future_field(900))),
    );
    // The protobuf watch ends before the event it could not write whole.
    assert!(pb.next(1).await.is_empty(), "no event, then the end");

    // kube-proxy's Accept now gets JSON, every field there.
    let (code, content_type, body) = fetch(&app, SLICES, KUBE_PROXY).await;
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert!(future_fields(&list) > 0, "{list}");
    // Its resumed watch replays the change in JSON, the field included.
    let resp = call(
        &app,
        &format!("{SLICES}?watch=1&resourceVersion={rv}"),
        Some(KUBE_PROXY),
    )
    .await;
    assert_eq!(resp.headers()["content-type"], "application/json");
    let mut body = resp.into_body();
    let events = frames(&mut body, 1).await;
    assert_eq!(events[0]["type"], "MODIFIED");
    let one = json!({"items": [events[0]["object"].clone()]});
    assert!(future_fields(&one) > 0, "{}", events[0]);

    // A client that takes protobuf only is told why it gets nothing.
    let (code, content_type, body) = fetch(&app, SLICES, PROTOBUF).await;
    assert_eq!(code, 406, "{}", String::from_utf8_lossy(&body));
    assert_eq!(content_type, PROTOBUF);
    // Other kinds stay protobuf.
    let (code, content_type, _) = fetch(&app, "/api/v1/services", KUBE_PROXY).await;
    assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
}

#[tokio::test]
async fn newer_fields_the_types_know_survive_protobuf() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let mut slice = slice_with_a_future_field(900);
    for e in slice["endpoints"].as_array_mut().unwrap() {
        e["hints"] = json!({"forZones": [{"name": "bj-a"}], "forNodes": [{"name": "bj-1"}]});
        e["conditions"] = json!({"ready": true, "serving": true, "terminating": false});
    }
    p.handle(ResourceKind::EndpointSlices, W::Apply(obj(slice)));
    let (code, content_type, wire) = fetch(&app, SLICES, KUBE_PROXY).await;
    assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
    let list: discovery::EndpointSliceList = decode(&unknown(&wire));
    let demo = demo_slice(&list.items);
    // Filtered to bj-1's site: the hints of the endpoints kept are as the
    // API server wrote them (kube-proxy uses hints only when every endpoint
    // has them; here every one still does).
    let upstream = slice_with_a_future_field(900)["endpoints"]
        .as_array()
        .unwrap()
        .len();
    assert!(!demo.endpoints.is_empty() && demo.endpoints.len() < upstream);
    for e in &demo.endpoints {
        let hints = e.hints.as_ref().expect("hints kept");
        let zones: Vec<_> = hints.for_zones.iter().map(|z| z.name.as_deref()).collect();
        let nodes: Vec<_> = hints.for_nodes.iter().map(|n| n.name.as_deref()).collect();
        assert_eq!((zones, nodes), (vec![Some("bj-a")], vec![Some("bj-1")]));
        let c = e.conditions.as_ref().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(true), Some(true), Some(false))
        );
    }
}
