//! Shared fixtures: the two-site world (`sitegrid_fakeapi::sample`, the one
//! test world of the project) fed through the cache's writer as scripted
//! upstream events, builders for the changes tests make, and helpers to call
//! the proxy.
#![allow(dead_code)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use serde_json::{json, Value};
use sitegrid_cache::{
    self as cache, ApiVersion, Cache, CacheConfig, ResourceKind, UpstreamObject, Writer,
};
use sitegrid_proxy::{
    gateway::{self, stack::boxed_request, Gateway, GatewayConfig},
    handlers::HandlerSettings,
    http::Body,
};
use tower::ServiceExt;

pub fn obj(v: Value) -> UpstreamObject {
    sitegrid_cache::testing::obj(&v)
}

pub fn node(name: &str, location: &str, rv: u64) -> UpstreamObject {
    obj(
        json!({"metadata":{"name":name,"resourceVersion":rv.to_string(),"creationTimestamp":"2026-11-21T15:12:22Z",
        "labels":{"location":location,"kubernetes.io/hostname":name}},
        "status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.20.2"}}}),
    )
}

/// Endpoints `ns/name` whose ready addresses are `addrs` (ip, node), at
/// upstream version `rv`: the sample's object with its addresses replaced
/// (labels and ports kept), or a new one labelled `app=<name>`.
pub fn endpoints(ns: &str, name: &str, addrs: &[(&str, &str)], rv: u64) -> UpstreamObject {
    let sample = sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .find(|o| {
            o["kind"] == "Endpoints"
                && o["metadata"]["namespace"] == ns
                && o["metadata"]["name"] == name
        });
    let mut o = sample.unwrap_or_else(|| {
        json!({"metadata":{"name":name,"namespace":ns,"labels":{"app":name}},
        "subsets":[{"addresses":[],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]})
    });
    // An address the sample has keeps its pod reference, as a real update would.
    let known = o["subsets"][0]["addresses"].clone();
    let addresses: Vec<Value> = addrs
        .iter()
        .map(|(ip, n)| {
            let mut a = known
                .as_array()
                .and_then(|all| all.iter().find(|a| a["ip"] == *ip).cloned())
                .unwrap_or_else(|| json!({"ip": ip}));
            a["nodeName"] = json!(n);
            a
        })
        .collect();
    o["metadata"]["resourceVersion"] = json!(rv.to_string());
    o["metadata"]["creationTimestamp"] = json!("2026-11-21T15:12:23Z");
    o["subsets"][0]["addresses"] = json!(addresses);
    obj(o)
}

pub use sitegrid_cache::testing::sync;

/// The two-site world as node `local` sees it: the sample's nodes, Services,
/// Endpoints and EndpointSlices (v1) listed by the writer, as after a sync.
pub fn two_sites(local: &str, config: CacheConfig) -> (Cache, Writer) {
    let (cache, slot) = cache::new(config);
    let mut p = slot.start(local, ApiVersion::V1);
    let world = sitegrid_fakeapi::sample::two_sites("v1");
    let mut rv = 0;
    for (kind, name) in [
        (ResourceKind::Nodes, "Node"),
        (ResourceKind::Services, "Service"),
        (ResourceKind::Endpoints, "Endpoints"),
        (ResourceKind::EndpointSlices, "EndpointSlice"),
    ] {
        let objects: Vec<UpstreamObject> = world
            .iter()
            .filter(|o| o["kind"] == name)
            .map(|o| {
                // What the API server adds when it stores an object.
                let mut o = o.clone();
                rv += 1;
                o["metadata"]["resourceVersion"] = json!(rv.to_string());
                o["metadata"]["creationTimestamp"] = json!("2026-11-21T15:12:23Z");
                obj(o)
            })
            .collect();
        sync(&mut p, kind, objects);
    }
    (cache, p)
}

/// The current endpoint IPs of an Endpoints object in a list or watch frame.
pub fn subset_ips(endpoints: &Value) -> Vec<String> {
    endpoints["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| a["ip"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The endpoint addresses of an EndpointSlice.
pub fn slice_ips(slice: &Value) -> Vec<String> {
    slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| a.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The item of a list whose name is `name`.
pub fn item<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["items"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["metadata"]["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// The EndpointSlice of Service `svc` in a list.
pub fn slice_of<'a>(list: &'a Value, svc: &str) -> &'a Value {
    list["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|i| i["metadata"]["labels"]["kubernetes.io/service-name"] == svc)
        })
        .unwrap_or_else(|| panic!("no slice of {svc} in {list}"))
}

/// The proxy's whole request stack over `cache`, with no upstream (passthrough paths get 404).
pub fn app(cache: Cache, settings: HandlerSettings) -> Gateway {
    gateway::build(GatewayConfig {
        settings,
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

/// The resourceVersion of a list (what a client watches from next).
pub async fn list_rv(app: &Gateway, uri: &str) -> String {
    let (code, list) = get_json(app, uri).await;
    assert_eq!(code, 200, "{uri}: {list}");
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("{uri}: no resourceVersion in {list}"))
        .to_owned()
}

/// A proxy started with `opts` against the API server at `upstream`, and
/// its URL.
pub async fn proxy(
    upstream: &str,
    opts: sitegrid_proxy::app::ProxyOptions,
) -> (sitegrid_proxy::app::RunningProxy, String) {
    let proxy = sitegrid_proxy::app::start(kube::Config::new(upstream.parse().unwrap()), opts)
        .await
        .unwrap();
    let url = format!("http://{}", proxy.local_addr);
    (proxy, url)
}

/// The EndpointSlice of `servicegrid-demo-svc` among protobuf `items`.
pub fn demo_slice(
    items: &[k8s_pb::api::discovery::v1::EndpointSlice],
) -> &k8s_pb::api::discovery::v1::EndpointSlice {
    items
        .iter()
        .find(|s| {
            s.metadata
                .as_ref()
                .unwrap()
                .labels
                .get("kubernetes.io/service-name")
                .map(String::as_str)
                == Some("servicegrid-demo-svc")
        })
        .unwrap()
}

/// For a test that runs the proxy's binary: the two-site world served over
/// plain HTTP on loopback, a new folder of the test's own (`name` and this
/// process's id), and in it a kubeconfig for that server.
pub async fn world_for_binary(
    name: &str,
) -> (
    sitegrid_fakeapi::ServerHandle,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let api = sitegrid_fakeapi::ApiServer::new(sitegrid_fakeapi::ApiServerConfig::default());
    api.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = std::env::temp_dir().join(format!("sitegrid-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = kubeconfig_file(&dir, &upstream.url());
    (upstream, dir, kubeconfig)
}

/// A kubeconfig file in `dir` for a plain-HTTP API server at `url`, without
/// credentials: what a test hands the proxy's binary.
pub fn kubeconfig_file(dir: &std::path::Path, url: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\ncurrent-context: c\n"
    ))
    .unwrap();
    path
}

/// The status line of `GET /healthz` on a plain HTTP/1.1 port, or `None` if
/// it cannot be connected to or does not answer within two seconds.
pub async fn healthz_status(addr: std::net::SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.ok()?;
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(2),
        conn.read_to_end(&mut answer),
    )
    .await
    .ok()?
    .ok()?;
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().map(str::to_owned)
}

/// The value of `series` (name and labels) in a `/metrics` text.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}
