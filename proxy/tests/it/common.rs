//! Shared fixtures: a cache filled through the projector with scripted
//! upstream events (the two-site example), and helpers to call the proxy.
#![allow(dead_code)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};
use sitegrid_proxy::{
    cache::{self, ApiVersion, Cache, CacheConfig, ResourceKind, Writer},
    gateway::{self, stack::boxed_request, Gateway, GatewayConfig},
    handlers::HandlerSettings,
    http::Body,
    upstream::UpstreamObject,
};
use tower::ServiceExt;

pub fn obj(v: Value) -> UpstreamObject {
    UpstreamObject::from_json(&v.to_string()).unwrap()
}

pub fn node(name: &str, location: &str, rv: u64) -> UpstreamObject {
    obj(
        json!({"metadata":{"name":name,"resourceVersion":rv.to_string(),"creationTimestamp":"2026-11-21T15:12:22Z",
        "labels":{"location":location,"kubernetes.io/hostname":name}},
        "status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.20.2"}}}),
    )
}

pub fn service(name: &str, labels: Value, keys: Option<&str>, rv: u64) -> UpstreamObject {
    let mut meta = json!({"name":name,"namespace":"default","resourceVersion":rv.to_string(),
        "creationTimestamp":"2026-11-21T15:12:23Z","labels":labels});
    if let Some(k) = keys {
        meta["annotations"] = json!({"topologyKeys": k});
    }
    obj(
        json!({"metadata":meta,"spec":{"ports":[{"protocol":"TCP","port":80,"targetPort":8080}],
        "clusterIP":"10.96.0.10","type":"ClusterIP"},"status":{"loadBalancer":{}}}),
    )
}

pub fn endpoints(ns: &str, name: &str, addrs: &[(&str, &str)], rv: u64) -> UpstreamObject {
    let addresses: Vec<Value> = addrs
        .iter()
        .map(|(ip, n)| json!({"ip":ip,"nodeName":n}))
        .collect();
    obj(
        json!({"metadata":{"name":name,"namespace":ns,"resourceVersion":rv.to_string(),
        "creationTimestamp":"2026-11-21T15:12:23Z","labels":{"app":name}},
        "subsets":[{"addresses":addresses,"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]}),
    )
}

pub fn slice(name: &str, svc: &str, eps: &[(&str, &str)], rv: u64) -> UpstreamObject {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(ip, n)| json!({"addresses":[ip],"conditions":{"ready":true},"nodeName":n}))
        .collect();
    obj(
        json!({"metadata":{"name":name,"namespace":"default","resourceVersion":rv.to_string(),
        "creationTimestamp":"2026-11-21T15:12:23Z","labels":{"kubernetes.io/service-name":svc}},
        "addressType":"IPv4","endpoints":endpoints,"ports":[{"name":"http","protocol":"TCP","port":8080}]}),
    )
}

pub fn sync(p: &mut Writer, kind: ResourceKind, objs: Vec<UpstreamObject>) {
    p.handle(kind, W::Init);
    for o in objs {
        p.handle(kind, W::InitApply(o));
    }
    p.handle(kind, W::InitDone);
}

/// The two-site example as node `local` sees it.
pub fn two_sites(local: &str, config: CacheConfig) -> (Cache, Writer) {
    let (cache, slot) = cache::new(config);
    let mut p = slot.start(local, ApiVersion::V1);
    sync(
        &mut p,
        ResourceKind::Nodes,
        vec![
            node("bj-1", "beijing", 1),
            node("bj-2", "beijing", 2),
            node("gz-1", "guangzhou", 3),
            node("gz-2", "guangzhou", 4),
        ],
    );
    sync(
        &mut p,
        ResourceKind::Services,
        vec![
            service(
                "echo",
                json!({"superedge.io/grid-selector":"servicegrid-demo"}),
                Some(r#"["location"]"#),
                10,
            ),
            service("plain", json!({"app":"plain"}), None, 11),
            service(
                "headless",
                json!({"service.kubernetes.io/headless":""}),
                None,
                12,
            ),
        ],
    );
    sync(
        &mut p,
        ResourceKind::Endpoints,
        vec![
            endpoints(
                "default",
                "echo",
                &[
                    ("10.0.0.1", "bj-1"),
                    ("10.0.0.2", "bj-2"),
                    ("10.0.0.3", "gz-1"),
                    ("10.0.0.4", "gz-2"),
                ],
                20,
            ),
            endpoints(
                "default",
                "plain",
                &[("10.0.1.1", "bj-1"), ("10.0.1.3", "gz-1")],
                21,
            ),
            endpoints("other", "web", &[("10.0.2.1", "gz-2")], 22),
        ],
    );
    sync(
        &mut p,
        ResourceKind::EndpointSlices,
        vec![
            slice(
                "echo-abc",
                "echo",
                &[("10.0.0.1", "bj-1"), ("10.0.0.3", "gz-1")],
                30,
            ),
            slice(
                "plain-xyz",
                "plain",
                &[("10.0.1.1", "bj-1"), ("10.0.1.3", "gz-1")],
                31,
            ),
        ],
    );
    (cache, p)
}

/// The proxy's whole request stack over `cache`, with no upstream (passthrough paths get 404).
pub fn app(cache: Cache, settings: HandlerSettings) -> Gateway {
    gateway::build(GatewayConfig {
        settings,
        max_body: 1 << 20,
        ..GatewayConfig::new(cache)
    })
}

pub async fn call(app: &Gateway, uri: &str, accept: Option<&str>) -> Response<Body> {
    let mut req = Request::get(uri);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let req = boxed_request(req.body(Empty::<Bytes>::new()).unwrap());
    app.clone().oneshot(req).await.unwrap()
}

/// Status code and JSON body of a non-streaming response.
pub async fn get_json(app: &Gateway, uri: &str) -> (u16, Value) {
    let resp = call(app, uri, None).await;
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (
        code,
        serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{uri}: {e}: {}", String::from_utf8_lossy(&body))),
    )
}

/// Reads watch frames until `n` arrived or the stream ended.
pub async fn frames(body: &mut Body, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while out.len() < n {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    buf.extend_from_slice(&d);
                    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=pos).collect();
                        out.push(serde_json::from_slice(&line).unwrap());
                    }
                }
            }
            _ => break,
        }
    }
    out
}

pub fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

pub fn summary(frames: &[Value]) -> Vec<(String, String)> {
    frames
        .iter()
        .map(|f| {
            (
                f["type"].as_str().unwrap().to_owned(),
                f["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}
