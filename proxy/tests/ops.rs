//! Operator endpoints, called directly (no sockets): health and readiness,
//! metrics, the debug cache summary, and CPU profiles.

use std::{io::Read, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Method, Response};
use http_body_util::BodyExt;
use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};
use sitegrid_proxy::{
    cache::{Cache, CacheConfig, Projector},
    object::UpstreamObject,
    ops::{Metrics, Ops, WatcherInfo, WatcherRegistry},
    resource::{ApiVersion, ResourceKind},
    serve::response::Body,
};

fn node(name: &str, rv: u64) -> UpstreamObject {
    let v = json!({"metadata":{"name":name,"resourceVersion":rv.to_string(),
        "creationTimestamp":"2026-11-21T15:12:22Z","labels":{"location":"beijing"}}});
    UpstreamObject::from_json(&v.to_string()).unwrap()
}

fn sync(p: &mut Projector, kind: ResourceKind, objs: Vec<UpstreamObject>) {
    p.handle(kind, W::Init);
    for o in objs {
        p.handle(kind, W::InitApply(o));
    }
    p.handle(kind, W::InitDone);
}

/// An empty cache and the projector that fills it.
fn cache() -> (Arc<Cache>, Projector) {
    let cache = Arc::new(Cache::new(CacheConfig::default(), ApiVersion::V1));
    let p = Projector::new(cache.clone(), "bj-1");
    (cache, p)
}

fn ops(cache: Arc<Cache>, debug: bool) -> Ops {
    Ops {
        cache,
        metrics: Arc::new(Metrics::new()),
        debug,
        watchers: WatcherRegistry::new(),
    }
}

async fn get(ops: &Ops, path_and_query: &str) -> Option<Response<Body>> {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    ops.handle(&Method::GET, path, query).await
}

async fn body(resp: Response<Body>) -> Bytes {
    resp.into_body().collect().await.unwrap().to_bytes()
}

async fn text(ops: &Ops, path: &str) -> (u16, String) {
    let resp = get(ops, path).await.expect("an operator endpoint");
    let code = resp.status().as_u16();
    (code, String::from_utf8(body(resp).await.to_vec()).unwrap())
}

async fn json_of(ops: &Ops, path: &str) -> (u16, Value) {
    let (code, text) = text(ops, path).await;
    (code, serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn readyz_waits_for_every_resource_to_sync() {
    let (cache, mut p) = cache();
    let ops = ops(cache, false);
    assert_eq!(text(&ops, "/healthz").await, (200, "ok".into()));

    let (code, msg) = text(&ops, "/readyz").await;
    assert_eq!(code, 503);
    for kind in ResourceKind::ALL {
        assert!(msg.contains(kind.plural()), "{msg}");
    }

    sync(&mut p, ResourceKind::Nodes, vec![node("bj-1", 1)]);
    sync(&mut p, ResourceKind::Services, vec![]);
    let (code, msg) = text(&ops, "/readyz").await;
    assert_eq!(code, 503);
    assert!(
        msg.contains("endpoints") && msg.contains("endpointslices"),
        "{msg}"
    );
    assert!(!msg.contains("nodes") && !msg.contains("services"), "{msg}");

    sync(&mut p, ResourceKind::Endpoints, vec![]);
    sync(&mut p, ResourceKind::EndpointSlices, vec![]);
    assert_eq!(text(&ops, "/readyz").await, (200, "ok".into()));
}

#[tokio::test]
async fn metrics_show_what_was_recorded_and_the_cache() {
    let (cache, mut p) = cache();
    sync(
        &mut p,
        ResourceKind::Nodes,
        vec![node("bj-1", 1), node("bj-2", 2)],
    );
    let ops = ops(cache.clone(), false);
    let m = &ops.metrics;
    m.request("list", "services", 200, Some(Duration::from_millis(3)));
    m.request("list", "services", 200, Some(Duration::from_millis(1)));
    m.request("passthrough", "events", 201, Some(Duration::from_millis(9)));
    m.request("watch", "nodes", 200, None);
    let open = m.watch_opened("nodes");
    m.events_in("nodes", 2);
    m.events_out("nodes", 5);
    m.watcher_lagged("endpoints");
    m.upstream_reconnect("services");
    m.upstream_error("services");
    m.upstream_error("services");

    let resp = get(&ops, "/metrics").await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = String::from_utf8(body(resp).await.to_vec()).unwrap();
    for line in [
        r#"sitegrid_proxy_requests_total{verb="list",resource="services",code="200"} 2"#,
        r#"sitegrid_proxy_requests_total{verb="passthrough",resource="events",code="201"} 1"#,
        r#"sitegrid_proxy_requests_total{verb="watch",resource="nodes",code="200"} 1"#,
        r#"sitegrid_proxy_request_duration_seconds_count{verb="list"} 2"#,
        r#"sitegrid_proxy_watchers_open{resource="nodes"} 1"#,
        r#"sitegrid_proxy_watch_events_in_total{resource="nodes"} 2"#,
        r#"sitegrid_proxy_watch_events_out_total{resource="nodes"} 5"#,
        r#"sitegrid_proxy_watchers_ended_lagging_total{resource="endpoints"} 1"#,
        r#"sitegrid_proxy_upstream_reconnects_total{resource="services"} 1"#,
        r#"sitegrid_proxy_upstream_errors_total{resource="services"} 2"#,
        r#"sitegrid_proxy_cache_objects{resource="nodes"} 2"#,
        r#"sitegrid_proxy_cache_objects{resource="services"} 0"#,
        r#"sitegrid_proxy_cache_synced{resource="nodes"} 1"#,
        r#"sitegrid_proxy_cache_synced{resource="services"} 0"#,
        &format!(
            "sitegrid_proxy_cache_resource_version {}",
            cache.current_rv()
        ),
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
    // Watch durations are the client's choice: not in the histogram.
    assert!(!text.contains(r#"request_duration_seconds_count{verb="watch"}"#));
    assert!(text.ends_with("# EOF\n"));

    drop(open);
    let text =
        String::from_utf8(body(get(&ops, "/metrics").await.unwrap()).await.to_vec()).unwrap();
    assert!(text.contains("sitegrid_proxy_watchers_open{resource=\"nodes\"} 0\n"));
}

#[tokio::test]
async fn debug_cache_lists_resources_and_watchers_with_their_lag() {
    let (cache, mut p) = cache();
    sync(
        &mut p,
        ResourceKind::Nodes,
        vec![node("bj-1", 1), node("bj-2", 2)],
    );
    let ops = ops(cache.clone(), true);
    let nodes_rv = cache.store(ResourceKind::Nodes).last_rv();

    let handle = ops.watchers.register(WatcherInfo {
        resource: "nodes".into(),
        namespace: None,
        label_selector: Some("location=beijing".into()),
        field_selector: None,
    });
    let (code, v) = json_of(&ops, "/debug/cache").await;
    assert_eq!(code, 200);
    assert_eq!(v["currentResourceVersion"], cache.current_rv().to_string());
    assert_eq!(v["startResourceVersion"], cache.start_rv.to_string());
    assert_eq!(v["synced"], false);
    let nodes = &v["resources"].as_array().unwrap()[ResourceKind::Nodes.index()];
    assert_eq!(nodes["resource"], "nodes");
    assert_eq!(nodes["objects"], 2);
    assert_eq!(nodes["synced"], true);
    assert_eq!(nodes["lastResourceVersion"], nodes_rv.to_string());
    let w = &v["watchers"][0];
    assert_eq!(w["resource"], "nodes");
    assert_eq!(w["labelSelector"], "location=beijing");
    assert_eq!(w["fieldSelector"], Value::Null);
    // Nothing dealt with yet: no lag to speak of.
    assert_eq!(w["lag"], Value::Null);

    // One event behind, then caught up.
    handle.set_sent(nodes_rv - 1);
    let (_, v) = json_of(&ops, "/debug/cache").await;
    assert_eq!(v["watchers"][0]["lag"], 1);
    assert_eq!(
        v["watchers"][0]["lastSentResourceVersion"],
        (nodes_rv - 1).to_string()
    );
    handle.set_sent(nodes_rv);
    let (_, v) = json_of(&ops, "/debug/cache").await;
    assert_eq!(v["watchers"][0]["lag"], 0);

    drop(handle);
    let (_, v) = json_of(&ops, "/debug/cache").await;
    assert_eq!(v["watchers"], json!([]));
}

#[tokio::test]
async fn debug_endpoints_fall_through_when_debug_is_off() {
    let (cache, _p) = cache();
    let off = ops(cache.clone(), false);
    for path in ["/debug/cache", "/debug/pprof/profile", "/debug/pprof/heap"] {
        assert!(get(&off, path).await.is_none(), "{path}");
    }
    // Not ours either way: the caller routes it.
    assert!(get(&off, "/api/v1/nodes").await.is_none());
    let on = ops(cache, true);
    assert!(get(&on, "/api/v1/nodes").await.is_none());
    let (code, v) = json_of(&on, "/debug/nothing").await;
    assert_eq!((code, v["kind"].as_str()), (404, Some("Status")));
}

#[tokio::test]
async fn only_get_is_allowed() {
    let (cache, _p) = cache();
    let ops = ops(cache, true);
    for path in ["/healthz", "/metrics", "/debug/cache"] {
        let resp = ops.handle(&Method::POST, path, None).await.unwrap();
        assert_eq!(resp.status(), 405, "{path}");
        let v: Value = serde_json::from_slice(&body(resp).await).unwrap();
        assert_eq!(v["reason"], "MethodNotAllowed");
    }
    assert!(ops
        .handle(&Method::POST, "/api/v1/nodes", None)
        .await
        .is_none());
}

#[tokio::test]
async fn heap_profile_says_why_it_is_missing() {
    let (cache, _p) = cache();
    let ops = ops(cache, true);
    let (code, v) = json_of(&ops, "/debug/pprof/heap").await;
    assert_eq!(code, 501);
    assert_eq!(v["kind"], "Status");
    assert!(v["message"].as_str().unwrap().contains("allocator"));
}

/// Real time: a CPU profile samples the process for the wall-clock seconds asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_profile_is_a_gzipped_pprof_protobuf() {
    use pprof::protos::Message;

    let (cache, _p) = cache();
    let ops = Arc::new(ops(cache, true));

    let (code, v) = json_of(&ops, "/debug/pprof/profile?seconds=abc").await;
    assert_eq!((code, v["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _) = json_of(&ops, "/debug/pprof/profile?seconds=301").await;
    assert_eq!(code, 400);

    // Something to sample.
    let busy = std::thread::spawn(|| {
        let end = std::time::Instant::now() + Duration::from_millis(1200);
        let mut x = 0u64;
        // Pure arithmetic between clock reads: samples landing in the vDSO
        // clock are dropped by the profiler's blocklist.
        while std::time::Instant::now() < end {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        x
    });
    let first = tokio::spawn({
        let ops = ops.clone();
        async move { get(&ops, "/debug/pprof/profile?seconds=1").await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The sampler is process-wide: a second profile at the same time is refused.
    let (code, v) = json_of(&ops, "/debug/pprof/profile?seconds=1").await;
    assert_eq!((code, v["reason"].as_str()), (409, Some("Conflict")));

    let resp = first.await.unwrap();
    busy.join().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/octet-stream");
    let gz = body(resp).await;
    assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
    if let Ok(path) = std::env::var("SITEGRID_PPROF_OUT") {
        // For checking by hand: `go tool pprof -top $SITEGRID_PPROF_OUT`.
        std::fs::write(path, &gz).unwrap();
    }

    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .unwrap();
    let profile = pprof::protos::Profile::decode(&raw[..]).unwrap();
    let strings = &profile.string_table;
    assert_eq!(
        strings[0], "",
        "string table starts empty, as pprof requires"
    );
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|t| (&*strings[t.ty as usize], &*strings[t.unit as usize]))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert!(profile.duration_nanos >= 1_000_000_000);
    assert!(!profile.sample.is_empty(), "a busy second yields samples");
    // Leaf frames are the sampled code, not the profiler's own unwinder.
    let leaf_names: Vec<&str> = profile
        .sample
        .iter()
        .filter_map(|s| s.location_id.first())
        .filter_map(|id| profile.location.iter().find(|l| l.id == *id))
        .filter_map(|l| l.line.first())
        .filter_map(|line| profile.function.iter().find(|f| f.id == line.function_id))
        .map(|f| &*strings[f.name as usize])
        .collect();
    assert!(!leaf_names.is_empty());
    assert!(
        leaf_names.iter().all(|n| !n.starts_with("backtrace::")),
        "{leaf_names:?}"
    );

    // The sampler is off again: another profile may start.
    let resp = get(&ops, "/debug/pprof/profile?seconds=1").await.unwrap();
    assert_eq!(resp.status(), 200);
}
