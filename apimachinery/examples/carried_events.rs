//! CPU per carried watch event, in-process and single-threaded: an
//! EndpointSlice of ten endpoints (one per site) arrives in a protobuf
//! watch frame, is carried in its JSON line as the proxy's reflector client
//! writes it, read back as the cache reads it, filtered to one site's
//! endpoint and written as JSON. What the proxy's sync thread does per
//! change before its writer, without the noise of a whole proxy (the
//! allocator here stays warm, as the proxy's does not).
//!
//! `cargo run --release -p sitegrid-apimachinery --example carried_events`
//! (pin it to a quiet core with `taskset -c 1`).

use k8s_pb::api::core::v1::ObjectReference;
use k8s_pb::api::discovery::v1 as disc;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use prost::Message;
use sitegrid_apimachinery::protobuf::{self, to_json};

fn main() {
    let endpoints = (0..10)
        .map(|i| disc::Endpoint {
            addresses: vec![format!("10.{i}.0.{i}")],
            conditions: Some(disc::EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("default".into()),
                name: Some(format!("svc-1-abcde-{i}")),
                uid: Some(format!("0b6f1c2e-1111-2222-3333-44445555{i:04}")),
                ..Default::default()
            }),
            node_name: Some(format!("site-{i}-node-0")),
            zone: Some(format!("site-{i}")),
            ..Default::default()
        })
        .collect();
    let slice = disc::EndpointSlice {
        metadata: Some(meta::ObjectMeta {
            name: Some("svc-1-x7k2p".into()),
            generate_name: Some("svc-1-".into()),
            namespace: Some("default".into()),
            uid: Some("9d1c2e3f-aaaa-bbbb-cccc-ddddeeeeffff".into()),
            resource_version: Some("123456".into()),
            labels: [
                ("kubernetes.io/service-name", "svc-1"),
                (
                    "endpointslice.kubernetes.io/managed-by",
                    "endpointslice-controller.k8s.io",
                ),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
            ..Default::default()
        }),
        address_type: Some("IPv4".into()),
        endpoints,
        ports: vec![disc::EndpointPort {
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            port: Some(80),
            app_protocol: None,
        }],
    };
    let object = protobuf::envelope(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        &slice.encode_to_vec(),
    );
    let frame = bytes::Bytes::from(
        meta::WatchEvent {
            r#type: Some("MODIFIED".into()),
            object: Some(RawExtension {
                raw: Some(object.to_vec()),
            }),
        }
        .encode_to_vec(),
    );
    let events = 200_000;
    let mut written = 0;
    for round in 1..=3 {
        let start = std::time::Instant::now();
        for _ in 0..events {
            let mut line = Vec::new();
            to_json::watch_event_carried(frame.clone(), &mut line).expect("an event");
            // The object's JSON string, as the cache gets it from kube-client.
            let text = std::str::from_utf8(&line).expect("UTF-8");
            let text = text
                .split_once(r#""object":""#)
                .and_then(|(_, rest)| rest.strip_suffix(r#""}"#))
                .expect("a carried object");
            let carried = to_json::carried_value(text).expect("carried");
            let Ok(to_json::Decoded::Slice(read)) = carried.value else {
                panic!("an EndpointSlice read as its message");
            };
            let kept = read.into_value_keeping(|e| e.node == Some("site-0-node-0"));
            written += serde_json::to_vec(&kept).expect("JSON").len();
        }
        let per_event = start.elapsed().as_secs_f64() * 1e6 / f64::from(events);
        println!("round {round}: {per_event:.2} µs per event");
    }
    assert!(written > 0);
}
