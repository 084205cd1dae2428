//! Offline restarts (`--data-dir`): a proxy restarted while the API server
//! is unreachable serves what it served before — the same lists, versions
//! and resume log — and, once the API server is back, sends watchers only
//! what changed meanwhile. Over real sockets against the in-memory API server.

use std::{path::PathBuf, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::{json, Value};
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};
use sitegrid_proxy::app::ProxyOptions;

use crate::common::{metric, proxy, summary};

/// Lists of every cached kind, and gets of one object of each.
const READS: [&str; 8] = [
    "/api/v1/services",
    "/api/v1/endpoints",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/api/v1/nodes?fieldSelector=metadata.name%3Dbj-1",
    "/api/v1/namespaces/default/services/plain-echo",
    "/api/v1/namespaces/default/endpoints/servicegrid-demo-svc",
    "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dservicegrid-demo-svc",
    "/api/v1/nodes/bj-1",
];

fn data_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sitegrid-offline-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn options(node: &str, dir: &std::path::Path) -> ProxyOptions {
    let mut opts = ProxyOptions::new(node, "127.0.0.1:0".parse().unwrap());
    opts.data_dir = Some(dir.to_owned());
    opts.snapshot_interval = Duration::from_secs(1);
    // Endpoints and EndpointSlices both synced from the start.
    opts.cache.on_demand = false;
    opts
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn get(url: &str) -> (u16, Bytes) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let resp = client.get(url.parse().unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.into_body().collect().await.unwrap().to_bytes())
}

async fn get_json(url: &str) -> Value {
    let (code, body) = get(url).await;
    assert_eq!(code, 200, "{url}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// The answers to [`READS`], byte for byte.
async fn reads(url: &str) -> Vec<Bytes> {
    let mut out = Vec::new();
    for path in READS {
        let (code, body) = get(&format!("{url}{path}")).await;
        assert_eq!(code, 200, "{path}");
        out.push(body);
    }
    out
}

/// A watch's frames as they arrive.
struct Watch {
    body: hyper::body::Incoming,
    buf: Vec<u8>,
    seen: Vec<Value>,
}

impl Watch {
    async fn open(url: &str) -> Watch {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let resp = client.get(url.parse().unwrap()).await.unwrap();
        assert_eq!(resp.status(), 200);
        Watch {
            body: resp.into_body(),
            buf: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Reads frames until one contains `needle`; all frames read so far.
    async fn until(&mut self, needle: &str) -> &[Value] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !self.seen.iter().any(|f| f.to_string().contains(needle)) {
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .unwrap_or_else(|_| panic!("no frame with {needle}; got {:?}", self.seen))
                .expect("the watch stays open")
                .unwrap();
            self.buf.extend_from_slice(&frame.into_data().unwrap());
            while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                self.seen.push(serde_json::from_slice(&line).unwrap());
            }
        }
        &self.seen
    }
}

/// `plain-echo`'s Endpoints with `ips` on node bj-2.
fn plain_echo(api: &ApiServer, ips: &[&str]) {
    let mut ep = api.get("endpoints", Some("default"), "plain-echo").unwrap();
    ep["subsets"][0]["addresses"] = Value::Array(
        ips.iter()
            .map(|ip| json!({"ip": ip, "nodeName": "bj-2"}))
            .collect(),
    );
    api.apply(ep);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_the_api_server_is_down_serves_the_snapshot_then_only_differences() {
    let dir = data_dir("restart");
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = upstream.local_addr();
    let upstream_url = upstream.url();

    // 1. A proxy syncs, writes its snapshot, and a change is watched.
    let (first, url) = proxy(&upstream_url, options("bj-1", &dir)).await;
    until("the first sync", || first.cache.readiness().is_ready()).await;
    until("the first snapshot", || {
        first.cache.persisted().writes() >= 1
    })
    .await;
    let eps = get_json(&format!("{url}/api/v1/endpoints")).await;
    let before_change = eps["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    plain_echo(&api, &["10.1.0.1"]);
    let mut w = Watch::open(&format!(
        "{url}/api/v1/endpoints?watch=1&resourceVersion={before_change}"
    ))
    .await;
    w.until("10.1.0.1").await;
    let before = reads(&url).await;
    // A graceful stop writes what changed since the last snapshot.
    first.shutdown().await;
    upstream.shutdown().await;

    // 2. Restarted with the API server down: the same lists, byte for byte.
    let (second, url) = proxy(&upstream_url, options("bj-1", &dir)).await;
    assert_eq!(
        reads(&url).await,
        before,
        "the snapshot's lists and objects, versions included"
    );
    let (code, ready) = get(&format!("{url}/readyz")).await;
    let ready = String::from_utf8_lossy(&ready).into_owned();
    assert_eq!(code, 200, "{ready}");
    assert!(
        ready.starts_with("ok, degraded: serving a snapshot from "),
        "{ready}"
    );
    let metrics = String::from_utf8_lossy(&get(&format!("{url}/metrics")).await.1).into_owned();
    assert!(
        metric(
            &metrics,
            "sitegrid_proxy_snapshot_serving_since_timestamp_seconds"
        ) > 0.0
    );
    // A watch resumed from before the change is replayed it; an older version gets 410.
    let mut resumed = Watch::open(&format!(
        "{url}/api/v1/endpoints?watch=1&resourceVersion={before_change}"
    ))
    .await;
    let replayed = summary(resumed.until("10.1.0.1").await);
    assert_eq!(replayed, [("MODIFIED".to_owned(), "plain-echo".to_owned())]);
    let old: u64 = before_change.parse::<u64>().unwrap() - 1;
    let (_, gone) = get(&format!(
        "{url}/api/v1/endpoints?watch=1&resourceVersion={old}"
    ))
    .await;
    let gone: Value = serde_json::from_slice(&gone).unwrap();
    assert_eq!(
        (gone["type"].as_str(), gone["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );

    // 3. Meanwhile upstream: plain-echo changes again and a Service goes.
    let eps = get_json(&format!("{url}/api/v1/endpoints")).await;
    let now = eps["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut watch = Watch::open(&format!(
        "{url}/api/v1/endpoints?watch=1&resourceVersion={now}"
    ))
    .await;
    let svcs = get_json(&format!("{url}/api/v1/services")).await;
    let svc_rv = svcs["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut svc_watch = Watch::open(&format!(
        "{url}/api/v1/services?watch=1&resourceVersion={svc_rv}"
    ))
    .await;
    plain_echo(&api, &["10.1.0.2"]);
    api.delete("services", Some("default"), "plain-echo");

    // 4. The API server comes back on the same address: watchers get the
    //    differences and nothing else, no 410.
    let _back = api.serve(addr).await.unwrap();
    until("the sync with the API server", || {
        second.cache.readiness().degraded().is_none()
    })
    .await;
    assert_eq!(
        summary(watch.until("10.1.0.2").await),
        [("MODIFIED".to_owned(), "plain-echo".to_owned())]
    );
    assert_eq!(
        summary(svc_watch.until("DELETED").await),
        [("DELETED".to_owned(), "plain-echo".to_owned())]
    );
    // One more change: it arrives right after, so nothing else came between.
    plain_echo(&api, &["10.1.0.3"]);
    assert_eq!(summary(watch.until("10.1.0.3").await).len(), 2);
    let (code, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!(
        (code, String::from_utf8_lossy(&ready).as_ref()),
        (200, "ok")
    );
    let metrics = String::from_utf8_lossy(&get(&format!("{url}/metrics")).await.1).into_owned();
    assert_eq!(
        metric(
            &metrics,
            "sitegrid_proxy_watches_too_old_total{resource=\"endpoints\"}"
        ),
        1.0,
        "only the deliberate one"
    );
    assert_eq!(
        metric(
            &metrics,
            "sitegrid_proxy_watchers_ended_lagging_total{resource=\"endpoints\"}"
        ),
        0.0
    );
    assert_eq!(
        metric(
            &metrics,
            "sitegrid_proxy_snapshot_serving_since_timestamp_seconds"
        ),
        0.0
    );
    until("a snapshot of the new state", || {
        second.cache.persisted().writes() >= 1
    })
    .await;
    second.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_api_server_up_a_restart_syncs_and_versions_keep_increasing() {
    let dir = data_dir("online");
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let (first, url) = proxy(&upstream.url(), options("bj-1", &dir)).await;
    until("the first sync", || first.cache.readiness().is_ready()).await;
    let eps = get_json(&format!("{url}/api/v1/endpoints")).await;
    let old_rv: u64 = eps["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    first.shutdown().await;
    plain_echo(&api, &["10.1.0.9"]);

    let (second, url) = proxy(&upstream.url(), options("bj-1", &dir)).await;
    until("the sync", || {
        second.cache.readiness().is_ready() && second.cache.readiness().degraded().is_none()
    })
    .await;
    let eps = get_json(&format!("{url}/api/v1/endpoints")).await;
    let rv: u64 = eps["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv > old_rv, "{old_rv} then {rv}");
    assert!(
        eps.to_string().contains("10.1.0.9"),
        "the API server's state, not the snapshot's"
    );
    let (_, ready) = get(&format!("{url}/readyz")).await;
    assert_eq!(String::from_utf8_lossy(&ready), "ok");
    second.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_or_foreign_snapshots_are_ignored_and_replaced() {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    // A good snapshot for bj-1, to damage.
    let dir = data_dir("damaged");
    let (p, _) = proxy(&upstream.url(), options("bj-1", &dir)).await;
    until("a snapshot", || p.cache.persisted().writes() >= 1).await;
    p.shutdown().await;
    let good = std::fs::read(dir.join("snapshot")).unwrap();
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 1;
    let mut other_version = good.clone();
    other_version[8] = 0;
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("truncated", good[..good.len() / 3].to_vec(), "bj-1"),
        ("garbage", b"\x00\xffnot a snapshot at all".to_vec(), "bj-1"),
        ("flipped", flipped, "bj-1"),
        ("older format", other_version, "bj-1"),
        ("another node", good.clone(), "gz-1"),
    ];
    for (what, bytes, node) in cases {
        std::fs::write(dir.join("snapshot"), &bytes).unwrap();
        let (p, url) = proxy(&upstream.url(), options(node, &dir)).await;
        assert!(
            p.cache.readiness().restored_from().is_none(),
            "{what}: not restored"
        );
        until("the sync", || p.cache.readiness().is_ready()).await;
        let eps = get_json(&format!("{url}/api/v1/endpoints")).await;
        assert!(!eps["items"].as_array().unwrap().is_empty(), "{what}");
        until("a new snapshot", || p.cache.persisted().writes() >= 1).await;
        p.shutdown().await;
        let now = std::fs::read(dir.join("snapshot")).unwrap();
        assert_ne!(now, bytes, "{what}: replaced");
        assert!(
            sitegrid_cache::persist::load(&now, node, Default::default()).is_ok(),
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    // A data directory that cannot be created: the proxy serves without a snapshot.
    let file = data_dir("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let (p, url) = proxy(&upstream.url(), options("bj-1", &file.join("sub"))).await;
    until("the sync", || p.cache.readiness().is_ready()).await;
    assert_eq!(get(&format!("{url}/api/v1/nodes/bj-1")).await.0, 200);
    p.shutdown().await;
    let _ = std::fs::remove_file(&file);
}
