//! Protobuf, as kube-apiserver writes it for the kinds sitegrid-proxy reads
//! upstream: lists, GETs and watch streams of Services, Endpoints and
//! EndpointSlices, read back through the decoder the proxy reads
//! its upstream with, are the objects the JSON answers carry; kinds this
//! server has no message for stay JSON.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};
use sitegrid_apimachinery::protobuf::{self, to_json};
use sitegrid_fakeapi::ApiServerConfig;

use crate::common::{configmap, start, start_default, Harness};

/// What a reflector of the proxy offers (`upstream::protobuf`).
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// `v` as the typed object reads it: two answers are the same when every
/// client decoding them into the type gets the same value.
fn typed<T: DeserializeOwned + Serialize>(v: &Value) -> Value {
    let t: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
    serde_json::to_value(t).unwrap()
}

fn typed_of(kind: &str, v: &Value) -> Value {
    match kind {
        "Service" => typed::<Service>(v),
        "Endpoints" => typed::<Endpoints>(v),
        "EndpointSlice" => typed::<EndpointSlice>(v),
        other => panic!("no type for {other}"),
    }
}

/// The same list: kind, apiVersion, metadata, and every item typed.
fn assert_same_list(json: &Value, read: &Value) {
    assert_eq!(read["kind"], json["kind"]);
    assert_eq!(read["apiVersion"], json["apiVersion"]);
    for field in ["resourceVersion", "continue", "remainingItemCount"] {
        // Go writes an empty `continue` in protobuf, and omits it in JSON.
        let r = &read["metadata"][field];
        let r = if r == "" { &Value::Null } else { r };
        assert_eq!(r, &json["metadata"][field], "metadata.{field}");
    }
    let kind = json["kind"].as_str().unwrap().trim_end_matches("List");
    let items = |l: &Value| -> Vec<Value> {
        l["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| typed_of(kind, i))
            .collect()
    };
    let (want, got) = (items(json), items(read));
    assert!(!want.is_empty(), "the sample has {kind}s");
    assert_eq!(got, want);
}

fn read(body: &[u8]) -> Value {
    serde_json::from_slice(&to_json::answer(body).expect("protobuf that decodes")).unwrap()
}

async fn two_sites() -> Harness {
    let h = start_default().await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    h
}

#[tokio::test]
async fn lists_and_gets_in_protobuf_are_the_json_answers() {
    let h = two_sites().await;
    for path in [
        "/api/v1/services",
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/api/v1/services?limit=2",
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io/service-name%3Dplain-echo",
    ] {
        let json = h.client.get(path).await;
        let pb = h.client.get_as(path, PROTOBUF).await;
        assert_eq!(pb.code(), 200, "{path}");
        assert_eq!(pb.headers["content-type"], protobuf::MEDIA_TYPE, "{path}");
        assert!(pb.body.starts_with(protobuf::MAGIC), "{path}");
        assert_same_list(&json.json(), &read(&pb.body));
    }

    let get = "/api/v1/namespaces/default/services/plain-echo";
    let pb = h.client.get_as(get, PROTOBUF).await;
    assert_eq!(pb.headers["content-type"], protobuf::MEDIA_TYPE);
    let (json, read) = (h.client.get(get).await.json(), read(&pb.body));
    assert_eq!(read["kind"], "Service");
    assert_eq!(typed::<Service>(&read), typed::<Service>(&json));

    // A kind without a message here: JSON, whatever the offer.
    let nodes = h.client.get_as("/api/v1/nodes", PROTOBUF).await;
    assert_eq!(nodes.headers["content-type"], "application/json");
    assert_eq!(nodes.json()["kind"], "NodeList");
    // JSON first in the offer: JSON.
    let svc = h
        .client
        .get_as(
            "/api/v1/services",
            "application/json, application/vnd.kubernetes.protobuf",
        )
        .await;
    assert_eq!(svc.headers["content-type"], "application/json");
}

#[tokio::test]
async fn a_protobuf_watch_streams_the_json_watchs_events() {
    let h = start(ApiServerConfig {
        bookmark_interval: Duration::from_millis(100),
        ..ApiServerConfig::default()
    })
    .await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let rv = h.server.resource_version();
    let path = format!("/api/v1/services?watch=1&resourceVersion={rv}");
    let mut pb = h.client.watch_protobuf(&path).await;
    let mut json = h.client.watch(&path).await;

    let mut svc = h
        .server
        .get("services", Some("default"), "plain-echo")
        .unwrap();
    svc["metadata"]["labels"] = json!({"changed": "yes"});
    h.server.apply(svc);
    h.server.delete("services", Some("default"), "plain-echo");
    for want in ["MODIFIED", "DELETED"] {
        let (j, p) = (json.event().await, pb.next_protobuf().await.unwrap());
        assert_eq!(j["type"], want);
        assert_eq!(p["type"], want);
        assert_eq!(
            typed::<Service>(&p["object"]),
            typed::<Service>(&j["object"])
        );
    }

    // Bookmarks, asked for, carry the resourceVersion: after a write of
    // another kind, the one it reached.
    let at = h.server.resource_version();
    let mut pb = h
        .client
        .watch_protobuf(&format!(
            "/api/v1/services?watch=1&allowWatchBookmarks=true&resourceVersion={at}"
        ))
        .await;
    h.server
        .apply(configmap("default", "elsewhere", json!({"a": "b"})));
    let bookmark = pb.next_protobuf().await.unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(
        bookmark["object"]["metadata"]["resourceVersion"],
        h.server.resource_version().to_string()
    );

    // A start the history no longer holds: 410 in an ERROR event, as the
    // reflector reads it to relist.
    h.server.compact();
    let mut pb = h
        .client
        .watch_protobuf("/api/v1/services?watch=1&resourceVersion=1")
        .await;
    let error = pb.next_protobuf().await.unwrap();
    assert_eq!(error["type"], "ERROR");
    assert_eq!(error["object"]["kind"], "Status");
    assert_eq!(error["object"]["code"], 410);
}
