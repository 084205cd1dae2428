//! Protobuf as kube-proxy asks for it (`Accept: application/vnd.kubernetes.protobuf, */*`):
//! lists, gets, errors and watch streams, decoded here with k8s-pb's messages
//! and compared with what the same proxy answers in JSON. (The bytes
//! themselves are checked against kube-apiserver's in sitegrid-apimachinery.)

use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::discovery::{v1 as discovery, v1beta1 as discovery_beta};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use kube::runtime::watcher::Event as W;
use prost::Message;
use serde_json::Value;
use sitegrid_cache::{CacheConfig, ResourceKind};
use sitegrid_proxy::{handlers::HandlerSettings, http::Body};

use crate::common::*;

pub(crate) const KUBE_PROXY: &str = "application/vnd.kubernetes.protobuf, */*";
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Status code, content type and body.
pub(crate) async fn fetch(
    app: &sitegrid_proxy::gateway::Gateway,
    uri: &str,
    accept: &str,
) -> (u16, String, Bytes) {
    let resp = call(app, uri, Some(accept)).await;
    let code = resp.status().as_u16();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, content_type, body)
}

/// The `runtime.Unknown` envelope after the `k8s\0` magic.
pub(crate) fn unknown(wire: &[u8]) -> Unknown {
    assert_eq!(&wire[..4], b"k8s\0", "the protobuf magic");
    Unknown::decode(&wire[4..]).unwrap()
}

/// `(apiVersion, kind)` of an envelope.
fn type_of(u: &Unknown) -> (String, String) {
    let t = u.type_meta.clone().unwrap_or_default();
    (
        t.api_version.unwrap_or_default(),
        t.kind.unwrap_or_default(),
    )
}

pub(crate) fn decode<M: Message + Default>(u: &Unknown) -> M {
    M::decode(u.raw.as_deref().unwrap_or_default()).unwrap()
}

fn meta_name_rv(m: &Option<meta::ObjectMeta>) -> (String, String) {
    let m = m.clone().unwrap_or_default();
    (
        m.name.unwrap_or_default(),
        m.resource_version.unwrap_or_default(),
    )
}

/// `(name, resourceVersion)` of each item of a JSON list.
fn json_items(list: &Value) -> Vec<(String, String)> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_owned(),
                i["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn kube_proxys_accept_gets_protobuf_lists_of_the_same_objects_as_json() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    for (path, api_version, kind) in [
        ("/api/v1/services", "v1", "ServiceList"),
        ("/api/v1/endpoints", "v1", "EndpointsList"),
        ("/api/v1/nodes", "v1", "NodeList"),
        (
            "/apis/discovery.k8s.io/v1/endpointslices",
            "discovery.k8s.io/v1",
            "EndpointSliceList",
        ),
        (
            "/apis/discovery.k8s.io/v1beta1/endpointslices",
            "discovery.k8s.io/v1beta1",
            "EndpointSliceList",
        ),
    ] {
        let (_, json) = get_json(&app, path).await;
        let (code, content_type, wire) = fetch(&app, path, KUBE_PROXY).await;
        assert_eq!(code, 200, "{path}");
        assert_eq!(content_type, PROTOBUF, "{path}");
        let u = unknown(&wire);
        assert_eq!(
            type_of(&u),
            (api_version.to_owned(), kind.to_owned()),
            "{path}"
        );
        let (list_meta, items): (meta::ListMeta, Vec<(String, String)>) = match kind {
            "ServiceList" => {
                let l: core::ServiceList = decode(&u);
                (
                    l.metadata.unwrap(),
                    l.items.iter().map(|i| meta_name_rv(&i.metadata)).collect(),
                )
            }
            "EndpointsList" => {
                let l: core::EndpointsList = decode(&u);
                // The site filter applies to protobuf as to JSON: bj-1 sees only beijing's pods.
                let demo = l
                    .items
                    .iter()
                    .find(|e| {
                        e.metadata.as_ref().unwrap().name.as_deref() == Some("servicegrid-demo-svc")
                    })
                    .unwrap();
                let ips: Vec<String> = demo
                    .subsets
                    .iter()
                    .flat_map(|s| s.addresses.iter().map(|a| a.ip.clone().unwrap()))
                    .collect();
                assert_eq!(ips, subset_ips(item(&json, "servicegrid-demo-svc")));
                (
                    l.metadata.unwrap(),
                    l.items.iter().map(|i| meta_name_rv(&i.metadata)).collect(),
                )
            }
            "NodeList" => {
                let l: core::NodeList = decode(&u);
                (
                    l.metadata.unwrap(),
                    l.items.iter().map(|i| meta_name_rv(&i.metadata)).collect(),
                )
            }
            _ if api_version.ends_with("v1") => {
                let l: discovery::EndpointSliceList = decode(&u);
                let demo = demo_slice(&l.items);
                let ips: Vec<String> = demo
                    .endpoints
                    .iter()
                    .flat_map(|e| e.addresses.clone())
                    .collect();
                assert_eq!(ips, slice_ips(slice_of(&json, "servicegrid-demo-svc")));
                (
                    l.metadata.unwrap(),
                    l.items.iter().map(|i| meta_name_rv(&i.metadata)).collect(),
                )
            }
            _ => {
                let l: discovery_beta::EndpointSliceList = decode(&u);
                (
                    l.metadata.unwrap(),
                    l.items.iter().map(|i| meta_name_rv(&i.metadata)).collect(),
                )
            }
        };
        assert_eq!(items, json_items(&json), "{path}");
        assert_eq!(
            list_meta.resource_version.as_deref(),
            json["metadata"]["resourceVersion"].as_str(),
            "{path}"
        );
    }
}

#[tokio::test]
async fn negotiation_follows_quality_and_a_json_client_keeps_json() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    for (accept, want) in [
        (PROTOBUF, PROTOBUF),
        (
            "application/json;q=0.9, application/vnd.kubernetes.protobuf",
            PROTOBUF,
        ),
        (
            "application/vnd.kubernetes.protobuf;q=0.5, application/json",
            "application/json",
        ),
        ("application/json, */*", "application/json"),
        ("*/*", "application/json"),
    ] {
        let (code, content_type, _) = fetch(&app, "/api/v1/nodes", accept).await;
        assert_eq!((code, content_type.as_str()), (200, want), "{accept}");
    }
    // Tables stay JSON, even for a client that would take protobuf otherwise.
    let (_, content_type, body) = fetch(
        &app,
        "/api/v1/nodes",
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(content_type, "application/json");
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["kind"],
        "Table"
    );
}

#[tokio::test]
async fn protobuf_pages_continue_where_the_last_ended() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (_, json) = get_json(&app, "/api/v1/nodes").await;
    let mut names = Vec::new();
    let mut uri = "/api/v1/nodes?limit=4".to_owned();
    let mut remaining = Vec::new();
    loop {
        let (code, _, wire) = fetch(&app, &uri, KUBE_PROXY).await;
        assert_eq!(code, 200);
        let list: core::NodeList = decode(&unknown(&wire));
        names.extend(list.items.iter().map(|n| meta_name_rv(&n.metadata).0));
        let m = list.metadata.unwrap();
        remaining.push(m.remaining_item_count);
        match m.r#continue.as_deref() {
            Some("") | None => break,
            Some(token) => uri = format!("/api/v1/nodes?limit=4&continue={token}"),
        }
    }
    assert_eq!(
        names,
        json_items(&json)
            .into_iter()
            .map(|i| i.0)
            .collect::<Vec<_>>()
    );
    assert_eq!(remaining, vec![Some(2), None], "six nodes in pages of four");
}

#[tokio::test]
async fn a_protobuf_client_gets_objects_and_errors_in_protobuf() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (_, json) = get_json(
        &app,
        "/api/v1/namespaces/default/endpoints/servicegrid-demo-svc",
    )
    .await;
    let (code, content_type, wire) = fetch(
        &app,
        "/api/v1/namespaces/default/endpoints/servicegrid-demo-svc",
        KUBE_PROXY,
    )
    .await;
    assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
    let u = unknown(&wire);
    assert_eq!(type_of(&u), ("v1".to_owned(), "Endpoints".to_owned()));
    let e: core::Endpoints = decode(&u);
    let m = e.metadata.unwrap();
    assert_eq!(
        m.resource_version.as_deref(),
        json["metadata"]["resourceVersion"].as_str()
    );
    assert_eq!(
        (m.name.as_deref(), m.namespace.as_deref()),
        (Some("servicegrid-demo-svc"), Some("default"))
    );

    for (uri, code, reason) in [
        ("/api/v1/namespaces/default/endpoints/nope", 404, "NotFound"),
        (
            "/api/v1/endpoints?labelSelector=a%3D%3D%3Db",
            400,
            "BadRequest",
        ),
        (
            "/api/v1/endpoints?resourceVersionMatch=Exact",
            422,
            "Invalid",
        ),
        ("/api/v1/endpoints?limit=x", 400, "BadRequest"),
    ] {
        let (got, content_type, wire) = fetch(&app, uri, KUBE_PROXY).await;
        assert_eq!((got, content_type.as_str()), (code, PROTOBUF), "{uri}");
        let u = unknown(&wire);
        assert_eq!(type_of(&u), ("v1".to_owned(), "Status".to_owned()), "{uri}");
        let s: meta::Status = decode(&u);
        assert_eq!(
            (s.code, s.reason.as_deref()),
            (Some(i32::from(code)), Some(reason)),
            "{uri}"
        );
        assert_eq!(s.status.as_deref(), Some("Failure"));
    }
    // A client that offers nothing a Status can be written in gets kube-apiserver's indented JSON.
    let (code, content_type, body) = fetch(
        &app,
        "/api/v1/nodes/nope",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!((code, content_type.as_str()), (404, "application/json"));
    assert!(
        body.starts_with(b"{\n  \"kind\": \"Status\""),
        "{}",
        String::from_utf8_lossy(&body)
    );
}

/// Decoded protobuf watch events: type, envelope kind, and the envelope.
pub(crate) struct Events {
    body: Body,
    buf: Vec<u8>,
}

impl Events {
    pub(crate) async fn next(&mut self, n: usize) -> Vec<(String, Unknown)> {
        let mut out = Vec::new();
        while out.len() < n {
            if self.buf.len() >= 4 {
                let len = (&self.buf[..4]).get_u32() as usize;
                if self.buf.len() >= 4 + len {
                    let frame: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
                    let event = meta::WatchEvent::decode(frame.as_slice()).unwrap();
                    let raw = event.object.unwrap().raw.unwrap();
                    out.push((event.r#type.unwrap(), unknown(&raw)));
                    continue;
                }
            }
            match self.body.frame().await {
                Some(Ok(f)) => self.buf.extend_from_slice(&f.into_data().unwrap()),
                _ => break,
            }
        }
        out
    }
}

pub(crate) async fn watch(app: &sitegrid_proxy::gateway::Gateway, uri: &str) -> Events {
    let resp = call(app, uri, Some(KUBE_PROXY)).await;
    assert_eq!(resp.status(), 200, "{uri}");
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    Events {
        body: resp.into_body(),
        buf: Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn protobuf_watches_carry_the_same_events_as_json_ones() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/namespaces/default/endpoints").await;
    let uri = format!("/api/v1/namespaces/default/endpoints?watch=1&resourceVersion={rv}&allowWatchBookmarks=true");
    let mut pb = watch(&app, &uri).await;
    let mut json = call(&app, &uri, None).await.into_body();

    // A beijing pod moves: bj-1's view changes.
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints(
            "default",
            "servicegrid-demo-svc",
            &[("10.0.0.99", "bj-1"), ("10.0.1.72", "bj-3")],
            900,
        )),
    );
    let want = frames(&mut json, 1).await;
    let got = pb.next(1).await;
    assert_eq!(got[0].0, "MODIFIED");
    assert_eq!(
        type_of(&got[0].1),
        ("v1".to_owned(), "Endpoints".to_owned())
    );
    let e: core::Endpoints = decode(&got[0].1);
    let ips: Vec<String> = e
        .subsets
        .iter()
        .flat_map(|s| s.addresses.iter().map(|a| a.ip.clone().unwrap()))
        .collect();
    assert_eq!(ips, subset_ips(&want[0]["object"]));
    assert_eq!(
        e.metadata.unwrap().resource_version.as_deref(),
        want[0]["object"]["metadata"]["resourceVersion"].as_str()
    );

    // Deleted: the last state at the deletion's version.
    p.handle(
        ResourceKind::Endpoints,
        W::Delete(endpoints("default", "plain-echo", &[], 901)),
    );
    let want = frames(&mut json, 1).await;
    let got = pb.next(1).await;
    assert_eq!(got[0].0, "DELETED");
    let e: core::Endpoints = decode(&got[0].1);
    assert_eq!(
        meta_name_rv(&e.metadata),
        (
            "plain-echo".to_owned(),
            want[0]["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned()
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_protobuf_watch_list_ends_its_initial_events_with_an_annotated_bookmark() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let mut pb = watch(
        &app,
        "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    .await;
    let events = pb.next(8).await;
    let types: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        types,
        ["ADDED"; 6]
            .into_iter()
            .chain(["BOOKMARK"])
            .collect::<Vec<_>>()
    );
    let (_, bookmark) = &events[6];
    assert_eq!(type_of(bookmark), ("v1".to_owned(), "Node".to_owned()));
    let node: core::Node = decode(bookmark);
    let m = node.metadata.unwrap();
    assert_eq!(
        m.annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );
    let (_, json) = get_json(&app, "/api/v1/nodes").await;
    assert_eq!(
        m.resource_version.as_deref(),
        json["metadata"]["resourceVersion"].as_str()
    );
}

#[tokio::test]
async fn a_too_old_protobuf_watch_ends_with_a_protobuf_410() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let mut pb = watch(&app, "/api/v1/endpoints?watch=1&resourceVersion=1").await;
    let events = pb.next(2).await;
    assert_eq!(events.len(), 1, "the ERROR ends the stream");
    assert_eq!(events[0].0, "ERROR");
    let s: meta::Status = decode(&events[0].1);
    assert_eq!((s.code, s.reason.as_deref()), (Some(410), Some("Expired")));
}
