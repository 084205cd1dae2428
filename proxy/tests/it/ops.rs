//! Operator endpoints, called directly (no sockets): health and readiness,
//! metrics, the debug cache summary, and CPU profiles.

use std::{io::Read, time::Duration};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Empty};
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use sitegrid_cache::{
    self as cache, ApiVersion, Cache, CacheConfig, ResourceKind, UpstreamErrorReason, WatcherInfo,
    Writer,
};
use sitegrid_proxy::{
    gateway::{
        self,
        metrics::{RequestMetrics, RequestResource, RequestVerb},
        stack::boxed_request,
        Gateway, GatewayConfig,
    },
    http::Body,
    ops::Ops,
};
use sitegrid_runtime::ops::Operator;

use crate::common::{node, sync};
use tower::ServiceExt;

/// An empty cache and the writer that fills it.
fn cache() -> (Cache, Writer) {
    let (cache, slot) = cache::new(CacheConfig::default());
    (cache, slot.start("bj-1", ApiVersion::V1))
}

/// The proxy's stack with its operator endpoints on the serving port (no
/// upstream: what is not ours is a 404), and the request metrics it records.
struct Proxy {
    gateway: Gateway,
    metrics: RequestMetrics,
}

fn ops(cache: Cache, debug: bool) -> Proxy {
    let mut registry = Registry::with_prefix("sitegrid_proxy");
    cache.register_metrics(&mut registry);
    let metrics = RequestMetrics::register(&mut registry);
    let ready = cache.clone();
    let operator = Operator::new(
        registry,
        std::sync::Arc::new(move || {
            let pending = ready.readiness().pending();
            match pending.is_empty() {
                true => Ok(None),
                false => Err(format!(
                    "waiting for the first sync of {}",
                    pending
                        .iter()
                        .map(|k| k.plural())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }),
    );
    let gateway = gateway::build(GatewayConfig {
        ops: Some(Ops {
            operator,
            cache: cache.clone(),
            debug,
        }),
        metrics: metrics.clone(),
        ..GatewayConfig::new(cache)
    });
    Proxy { gateway, metrics }
}

async fn request(proxy: &Proxy, method: Method, path_and_query: &str) -> Response<Body> {
    let req = Request::builder()
        .method(method)
        .uri(path_and_query)
        .body(Empty::<Bytes>::new())
        .unwrap();
    proxy
        .gateway
        .clone()
        .oneshot(boxed_request(req))
        .await
        .unwrap()
}

async fn get(proxy: &Proxy, path_and_query: &str) -> Response<Body> {
    request(proxy, Method::GET, path_and_query).await
}

async fn body(resp: Response<Body>) -> Bytes {
    resp.into_body().collect().await.unwrap().to_bytes()
}

async fn text(proxy: &Proxy, path: &str) -> (u16, String) {
    let resp = get(proxy, path).await;
    let code = resp.status().as_u16();
    (code, String::from_utf8(body(resp).await.to_vec()).unwrap())
}

async fn json_of(proxy: &Proxy, path: &str) -> (u16, Value) {
    let (code, text) = text(proxy, path).await;
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
        // ServiceCIDRs only count once a client asked for them.
        let pending = !ResourceKind::ONLY_ON_DEMAND.contains(&kind);
        assert_eq!(msg.contains(kind.plural()), pending, "{kind}: {msg}");
    }

    sync(
        &mut p,
        ResourceKind::Nodes,
        vec![node("bj-1", "beijing", 1)],
    );
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
        vec![node("bj-1", "beijing", 1), node("bj-2", "beijing", 2)],
    );
    let ops = ops(cache.clone(), false);
    let m = &ops.metrics;
    let services = RequestResource::Cached(ResourceKind::Services);
    m.record(
        RequestVerb::List,
        services.clone(),
        200,
        Some(Duration::from_millis(3)),
    );
    m.record(
        RequestVerb::List,
        services,
        200,
        Some(Duration::from_millis(1)),
    );
    let events = RequestResource::Named("events".into());
    m.record(
        RequestVerb::Passthrough,
        events,
        201,
        Some(Duration::from_millis(9)),
    );
    let nodes = RequestResource::Cached(ResourceKind::Nodes);
    m.record(RequestVerb::Watch, nodes, 200, None);
    let open = cache.watchers().register(WatcherInfo {
        resource: ResourceKind::Nodes,
        namespace: None,
        label_selector: None,
        field_selector: None,
    });
    // (the writer counted the two nodes it applied as events in)
    let c = cache.metrics();
    c.events_out(ResourceKind::Nodes, 5);
    c.watcher_lagged(ResourceKind::Endpoints);
    c.upstream_reconnect(ResourceKind::Services);
    c.upstream_error(ResourceKind::Services, UpstreamErrorReason::ServerError);
    c.upstream_error(ResourceKind::Services, UpstreamErrorReason::ServerError);

    let resp = get(&ops, "/metrics").await;
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
        r#"sitegrid_proxy_upstream_errors_total{resource="services",reason="server_error"} 2"#,
        r#"sitegrid_proxy_upstream_errors_total{resource="services",reason="throttled"} 0"#,
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
    let text = String::from_utf8(body(get(&ops, "/metrics").await).await.to_vec()).unwrap();
    assert!(text.contains("sitegrid_proxy_watchers_open{resource=\"nodes\"} 0\n"));
}

#[tokio::test]
async fn debug_cache_lists_resources_and_watchers_with_their_lag() {
    let (cache, mut p) = cache();
    sync(
        &mut p,
        ResourceKind::Nodes,
        vec![node("bj-1", "beijing", 1), node("bj-2", "beijing", 2)],
    );
    let ops = ops(cache.clone(), true);
    let nodes_rv = cache.store(ResourceKind::Nodes).last_rv();

    let handle = cache.watchers().register(WatcherInfo {
        resource: ResourceKind::Nodes,
        namespace: None,
        label_selector: Some("location=beijing".into()),
        field_selector: None,
    });
    let (code, v) = json_of(&ops, "/debug/cache").await;
    assert_eq!(code, 200);
    assert_eq!(v["currentResourceVersion"], cache.current_rv().to_string());
    assert_eq!(v["startResourceVersion"], cache.start_rv().to_string());
    assert_eq!(v["synced"], false);
    let nodes = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "nodes")
        .unwrap();
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

/// Whether the stack passed the request on (to the API server; here there is
/// none, so the passthrough branch answers its 404) rather than answering it.
async fn passed_on(resp: Response<Body>) -> bool {
    let code = resp.status();
    let v: Value = serde_json::from_slice(&body(resp).await).unwrap();
    code == 404 && v["message"] == "the server could not find the requested resource"
}

#[tokio::test]
async fn debug_endpoints_fall_through_when_debug_is_off() {
    let (cache, _p) = cache();
    let off = ops(cache.clone(), false);
    for path in ["/debug/cache", "/debug/pprof/profile", "/debug/pprof/heap"] {
        assert!(passed_on(get(&off, path).await).await, "{path}");
    }
    // Not ours either way: routed past the operator endpoints.
    assert!(passed_on(get(&off, "/api/v1/configmaps").await).await);
    let on = ops(cache, true);
    assert!(passed_on(get(&on, "/api/v1/configmaps").await).await);
    let (code, v) = json_of(&on, "/debug/nothing").await;
    assert_eq!((code, v["kind"].as_str()), (404, Some("Status")));
    assert!(!passed_on(get(&on, "/debug/nothing").await).await);
}

#[tokio::test]
async fn only_get_is_allowed() {
    let (cache, _p) = cache();
    let ops = ops(cache, true);
    for path in ["/healthz", "/livez", "/metrics", "/debug/cache"] {
        let resp = request(&ops, Method::POST, path).await;
        assert_eq!(resp.status(), 405, "{path}");
        let v: Value = serde_json::from_slice(&body(resp).await).unwrap();
        assert_eq!(v["reason"], "MethodNotAllowed");
    }
    assert!(passed_on(request(&ops, Method::POST, "/api/v1/nodes").await).await);
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
    let ops = std::sync::Arc::new(ops(cache, true));

    let (code, v) = json_of(&ops, "/debug/pprof/profile?seconds=abc").await;
    assert_eq!((code, v["reason"].as_str()), (400, Some("BadRequest")));
    let (code, _) = json_of(&ops, "/debug/pprof/profile?seconds=301").await;
    assert_eq!(code, 400);

    // Something to sample, until both profiles are done (not for a fixed
    // time: on a loaded machine the profile may start late).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut x = 0u64;
            // Pure arithmetic between clock reads: samples landing in the vDSO
            // clock are dropped by the profiler's blocklist.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..100_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            x
        }
    });
    // The sampler is process-wide: of two profiles at the same time, one is refused.
    let (a, b) = tokio::join!(
        get(&ops, "/debug/pprof/profile?seconds=1"),
        get(&ops, "/debug/pprof/profile?seconds=1")
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();
    let (resp, refused) = if a.status() == 200 { (a, b) } else { (b, a) };
    let refused: Value = serde_json::from_slice(&body(refused).await).unwrap();
    assert_eq!(refused["reason"], "Conflict");
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
    let resp = get(&ops, "/debug/pprof/profile?seconds=1").await;
    assert_eq!(resp.status(), 200);
}
