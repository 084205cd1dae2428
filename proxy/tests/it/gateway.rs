//! The gateway around the cache: passthrough to the upstream (streaming both
//! ways), edge autonomy when the upstream is gone, body limits, load
//! shedding, and watches ending cleanly on shutdown.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::{json, Value};
use sitegrid_cache::CacheConfig;
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig, ServerHandle};
use sitegrid_proxy::{
    app::{start, ProxyOptions, RunningProxy},
    gateway::{self, stack::boxed_request, GatewayConfig, Limits},
    passthrough::AnonymousPassthrough,
};
use tower::ServiceExt;

async fn env() -> (ApiServer, ServerHandle, RunningProxy, String) {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let config = kube::Config::new(upstream.url().parse().unwrap());
    let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    opts.max_body = 64 * 1024;
    opts.grace = Duration::from_secs(5);
    // These tests are about forwarding; who a request runs as upstream is
    // the subject of the `passthrough_runs_as_*` tests below.
    opts.anonymous_passthrough = AnonymousPassthrough::All;
    let proxy = start(config, opts).await.unwrap();
    while !proxy.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let url = format!("http://{}", proxy.local_addr);
    (api, upstream, proxy, url)
}

async fn send(method: Method, url: &str, content_type: &str, body: Value) -> (u16, Value) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_and_reads_of_other_kinds_pass_through_with_their_status_codes() {
    let (api, _up, _proxy, url) = env().await;
    // kube-proxy's start-up event.
    let event = json!({"apiVersion":"v1","kind":"Event","metadata":{"name":"kp.1","namespace":"default"},
        "involvedObject":{"kind":"Node","name":"bj-1"},"reason":"Starting","message":"Starting kube-proxy."});
    let (code, created) = send(
        Method::POST,
        &format!("{url}/api/v1/namespaces/default/events"),
        "application/json",
        event.clone(),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(created["message"], "Starting kube-proxy.");
    assert!(
        api.get("events", Some("default"), "kp.1").is_some(),
        "the event reached the API server"
    );
    let (code, dup) = send(
        Method::POST,
        &format!("{url}/api/v1/namespaces/default/events"),
        "application/json",
        event,
    )
    .await;
    assert_eq!((code, dup["reason"].as_str()), (409, Some("AlreadyExists")));
    // Node status PATCH (what a kubelet-side agent would send).
    let (code, node) = send(
        Method::PATCH,
        &format!("{url}/api/v1/nodes/bj-1/status"),
        "application/merge-patch+json",
        json!({"status":{"conditions":[{"type":"Ready","status":"False"}]}}),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(node["status"]["conditions"][0]["status"], "False");
    // Discovery and other kinds.
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    for (path, field) in [
        ("/version", "gitVersion"),
        ("/api", "versions"),
        ("/apis", "groups"),
    ] {
        let resp = client
            .get(format!("{url}{path}").parse().unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let v: Value =
            serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert!(v.get(field).is_some(), "{path}: {v}");
    }
    let (code, missing) = send(
        Method::GET,
        &format!("{url}/api/v1/namespaces/default/configmaps/nope"),
        "application/json",
        json!({}),
    )
    .await;
    assert_eq!((code, missing["reason"].as_str()), (404, Some("NotFound")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_of_an_uncached_kind_streams_through() {
    let (api, _up, _proxy, url) = env().await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let resp = client
        .get(
            format!(
                "{url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}",
                api.resource_version()
            )
            .parse()
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    api.apply(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"live","namespace":"default"},"data":{"a":"1"}}));
    let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("streamed, not buffered")
        .unwrap()
        .unwrap();
    let line: Value = serde_json::from_slice(
        frame
            .data_ref()
            .unwrap()
            .split(|b| *b == b'\n')
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            line["type"].as_str(),
            line["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("live"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_upstream_gone_cached_kinds_are_served_and_passthrough_is_503() {
    let (_api, upstream, _proxy, url) = env().await;
    upstream.shutdown().await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let resp = client
        .get(format!("{url}/api/v1/endpoints").parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        200,
        "kube-proxy keeps its endpoints while the cloud is away"
    );
    let list: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert!(!list["items"].as_array().unwrap().is_empty());
    let (code, status) = send(
        Method::GET,
        &format!("{url}/api/v1/namespaces/default/configmaps"),
        "application/json",
        json!({}),
    )
    .await;
    assert_eq!(code, 503);
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("ServiceUnavailable"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_get_413_whether_declared_or_streamed() {
    let (api, _up, _proxy, url) = env().await;
    let big = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"default"},"data":{"a":"x".repeat(100 * 1024)}});
    let (code, status) = send(
        Method::POST,
        &format!("{url}/api/v1/namespaces/default/configmaps"),
        "application/json",
        big.clone(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    // The same body chunked, with no Content-Length.
    let chunks: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = big
        .to_string()
        .into_bytes()
        .chunks(8192)
        .map(|c| Ok(http_body::Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let client = Client::builder(TokioExecutor::new()).build_http();
    let req = Request::post(format!("{url}/api/v1/namespaces/default/configmaps"))
        .header("content-type", "application/json")
        .body(StreamBody::new(futures::stream::iter(chunks)))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.status(), 413);
    assert!(
        api.get("configmaps", Some("default"), "big").is_none(),
        "nothing was created"
    );
}

#[tokio::test]
async fn lists_beyond_the_concurrency_limit_are_shed_with_429() {
    let (cache, _p) = crate::common::two_sites("bj-1", CacheConfig::default());
    // No list may run at all: every one is shed, while watches are not limited.
    let gw = gateway::build(GatewayConfig {
        limits: Limits {
            cached_inflight: 0,
            passthrough_inflight: 0,
            ..Limits::default()
        },
        ..GatewayConfig::new(cache)
    });
    let req = |uri: &str| boxed_request(Request::get(uri).body(Empty::<Bytes>::new()).unwrap());
    let resp = gw.clone().oneshot(req("/api/v1/endpoints")).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["reason"], "TooManyRequests");
    let resp = gw
        .oneshot(req("/api/v1/endpoints?watch=1&timeoutSeconds=1"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn watches_beyond_max_watches_get_429_until_one_ends() {
    let (cache, _p) = crate::common::two_sites("bj-1", CacheConfig::default());
    let gw = gateway::build(GatewayConfig {
        limits: Limits {
            watches: 2,
            ..Limits::default()
        },
        ..GatewayConfig::new(cache)
    });
    let req = |uri: &str| boxed_request(Request::get(uri).body(Empty::<Bytes>::new()).unwrap());
    let watch = "/api/v1/endpoints?watch=1&resourceVersion=0";
    let first = gw.clone().oneshot(req(watch)).await.unwrap();
    let second = gw
        .clone()
        .oneshot(req("/api/v1/services?watch=1"))
        .await
        .unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = gw.clone().oneshot(req(watch)).await.unwrap();
    assert_eq!(third.status(), 429);
    assert_eq!(third.headers()["retry-after"], "1");
    let body: Value =
        serde_json::from_slice(&third.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["reason"], "TooManyRequests");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("too many watches"),
        "{body}"
    );
    // Lists are not watches: still answered.
    let list = gw.clone().oneshot(req("/api/v1/endpoints")).await.unwrap();
    assert_eq!(list.status(), 200);
    // A client that goes away gives its slot back.
    drop(first);
    let again = gw.clone().oneshot(req(watch)).await.unwrap();
    assert_eq!(again.status(), 200);
    // A watch that ends by itself too.
    drop(second);
    let short = gw
        .clone()
        .oneshot(req("/api/v1/services?watch=1&timeoutSeconds=1"))
        .await
        .unwrap();
    assert_eq!(short.status(), 200);
    short.into_body().collect().await.unwrap();
    let after = gw.oneshot(req(watch)).await.unwrap();
    assert_eq!(after.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_watches_cleanly() {
    let (_api, _up, proxy, url) = env().await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let resp = client
        .get(
            format!("{url}/api/v1/endpoints?watch=1&resourceVersion=0")
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    let mut body = resp.into_body();
    let started = tokio::time::Instant::now();
    let stopper = tokio::spawn(proxy.shutdown());
    // Read to the end: the initial ADDED frames, then a clean end of stream (no error).
    loop {
        match tokio::time::timeout(Duration::from_secs(4), body.frame())
            .await
            .expect("the watch ends before the grace period")
        {
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("the stream broke instead of ending: {e}"),
            None => break,
        }
    }
    stopper.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_endpoints_on_the_serving_port_and_on_their_own() {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let get = |url: String| {
        let client = client.clone();
        async move {
            let resp = client.get(url.parse().unwrap()).await.unwrap();
            let code = resp.status().as_u16();
            (
                code,
                String::from_utf8(
                    resp.into_body()
                        .collect()
                        .await
                        .unwrap()
                        .to_bytes()
                        .to_vec(),
                )
                .unwrap(),
            )
        }
    };
    // On the serving port, with --debug.
    let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    opts.debug = true;
    let proxy = start(kube::Config::new(upstream.url().parse().unwrap()), opts)
        .await
        .unwrap();
    let url = format!("http://{}", proxy.local_addr);
    let mut ready = (0, String::new());
    for _ in 0..200 {
        ready = get(format!("{url}/readyz")).await;
        if ready.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(ready, (200, "ok".to_string()));
    assert_eq!(get(format!("{url}/api/v1/endpoints")).await.0, 200);
    let watch = client
        .get(
            format!("{url}/api/v1/services?watch=1&labelSelector=a%3Db")
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    // kube-proxy's Accept: answered in protobuf, and counted so.
    let pb = client
        .request(
            http::Request::get(format!("{url}/api/v1/endpoints"))
                .header("accept", "application/vnd.kubernetes.protobuf, */*")
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        pb.headers()["content-type"],
        "application/vnd.kubernetes.protobuf"
    );
    let (code, metrics) = get(format!("{url}/metrics")).await;
    assert_eq!(code, 200);
    for line in [
        r#"sitegrid_proxy_requests_total{verb="list",resource="endpoints",code="200"} 2"#,
        r#"sitegrid_proxy_cached_responses_total{verb="list",resource="endpoints",content_type="application/json"} 1"#,
        r#"sitegrid_proxy_cached_responses_total{verb="list",resource="endpoints",content_type="application/vnd.kubernetes.protobuf"} 1"#,
        r#"sitegrid_proxy_cached_responses_total{verb="watch",resource="services",content_type="application/json"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line} in {metrics}"
        );
    }
    assert!(
        metrics.contains(r#"sitegrid_proxy_watchers_open{resource="services"} 1"#),
        "{metrics}"
    );
    let (code, debug) = get(format!("{url}/debug/cache")).await;
    assert_eq!(code, 200);
    let debug: Value = serde_json::from_str(&debug).unwrap();
    assert!(
        debug.to_string().contains("a=b"),
        "the open watch and its selector are listed: {debug}"
    );
    drop(watch);
    proxy.shutdown().await;

    // On their own port: the serving port then passes /healthz to the API server.
    let ops_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    opts.metrics_bind_address = Some(ops_port);
    let proxy = start(kube::Config::new(upstream.url().parse().unwrap()), opts)
        .await
        .unwrap();
    let (code, body) = get(format!("http://{ops_port}/metrics")).await;
    assert_eq!(code, 200);
    assert!(body.contains("sitegrid_proxy_cache_objects"), "{body}");
    assert_eq!(
        get(format!("http://{ops_port}/api/v1/nodes")).await.0,
        404,
        "only operator endpoints there"
    );
    let before = api
        .requests()
        .iter()
        .filter(|r| r.path == "/healthz")
        .count();
    assert_eq!(
        get(format!("http://{}/healthz", proxy.local_addr)).await.0,
        200
    );
    assert_eq!(
        api.requests()
            .iter()
            .filter(|r| r.path == "/healthz")
            .count(),
        before + 1,
        "answered by the API server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_while_the_api_server_is_away_serves_health_and_catches_up() {
    let upstream_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut opts = ProxyOptions::new("gz-1", "127.0.0.1:0".parse().unwrap());
    opts.handlers.sync_wait = Duration::from_millis(200);
    let proxy = start(
        kube::Config::new(format!("http://{upstream_addr}").parse().unwrap()),
        opts,
    )
    .await
    .unwrap();
    let url = format!("http://{}", proxy.local_addr);
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let status = |path: &'static str| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            client
                .get(format!("{url}{path}").parse().unwrap())
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        status("/healthz").await,
        200,
        "alive without the API server"
    );
    assert_eq!(status("/readyz").await, 503);
    assert_eq!(
        status("/api/v1/endpoints").await,
        503,
        "no half state is served"
    );
    // The API server comes up: the proxy discovers it, syncs and serves.
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let _upstream = api.serve(upstream_addr).await.unwrap();
    let mut ready = 0;
    for _ in 0..300 {
        ready = status("/readyz").await;
        if ready == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ready, 200);
    assert_eq!(status("/api/v1/endpoints").await, 200);
}

/// A proxy for bj-1 with its own token (as from its ServiceAccount) and
/// the default `--anonymous-passthrough=kube-proxy`.
async fn env_with_identity() -> (ApiServer, ServerHandle, RunningProxy, String) {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut config = kube::Config::new(upstream.url().parse().unwrap());
    config.auth_info.token = Some("proxy-token".to_owned().into());
    let opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    let proxy = start(config, opts).await.unwrap();
    while !proxy.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let url = format!("http://{}", proxy.local_addr);
    (api, upstream, proxy, url)
}

/// Sends `method path` with `headers` and no body; the status code and JSON body.
async fn request(method: Method, url: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = client
        .request(req.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The credentials the API server received on requests for `path`.
fn sent_as(api: &ApiServer, path: &str) -> Vec<Vec<(String, String)>> {
    api.requests()
        .into_iter()
        .filter(|r| r.path == path)
        .map(|r| r.credentials)
        .collect()
}

fn pair(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_runs_as_the_proxy_only_for_what_kube_proxy_needs() {
    let (api, _up, _proxy, url) = env_with_identity().await;
    // kube-proxy's own requests: its Node, discovery, its start-up Event.
    let (code, node) = request(
        Method::GET,
        &format!("{url}/api/v1/nodes/bj-1?resourceVersion=0"),
        &[],
    )
    .await;
    assert_eq!(
        (code, node["metadata"]["name"].as_str()),
        (200, Some("bj-1"))
    );
    assert_eq!(
        request(Method::GET, &format!("{url}/apis"), &[]).await.0,
        200
    );
    let event = json!({"apiVersion":"v1","kind":"Event","metadata":{"name":"kp.2","namespace":"default"},
        "involvedObject":{"kind":"Node","name":"bj-1"},"reason":"Starting","message":"Starting kube-proxy."});
    let (code, _) = send(
        Method::POST,
        &format!("{url}/api/v1/namespaces/default/events"),
        "application/json",
        event,
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        sent_as(&api, "/api/v1/namespaces/default/events"),
        [vec![pair("authorization", "Bearer proxy-token")]]
    );
    // Anything else without credentials: 403 naming the flag, and the API
    // server never hears of it — with or without an Impersonate header.
    for (path, headers) in [
        ("/api/v1/namespaces/default/configmaps", vec![]),
        ("/api/v1/nodes/gz-1/status", vec![]),
        (
            "/api/v1/namespaces/default/configmaps",
            vec![("impersonate-user", "system:admin")],
        ),
    ] {
        let (code, status) = request(Method::GET, &format!("{url}{path}"), &headers).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (403, Some("Forbidden")),
            "{path}"
        );
        let message = status["message"].as_str().unwrap_or_default();
        assert!(message.contains("--anonymous-passthrough=all"), "{message}");
        assert!(
            sent_as(&api, path).is_empty(),
            "{path} reached the API server"
        );
    }
    let (code, _) = request(
        Method::DELETE,
        &format!("{url}/api/v1/namespaces/default/services/plain-echo"),
        &[],
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        api.get("services", Some("default"), "plain-echo").is_some(),
        "the Service is still there"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_runs_as_the_caller_when_it_brings_its_own_token() {
    let (api, _up, _proxy, url) = env_with_identity().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, list) = request(
        Method::GET,
        &format!("{url}{path}"),
        &[("authorization", "Bearer alice-token")],
    )
    .await;
    assert_eq!((code, list["kind"].as_str()), (200, Some("ConfigMapList")));
    // The caller's token alone: not the proxy's. Its own Impersonate header
    // travels with it (the API server checks the caller's right to it).
    let (code, _) = request(
        Method::GET,
        &format!("{url}{path}"),
        &[
            ("authorization", "Bearer alice-token"),
            ("impersonate-user", "bob"),
        ],
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        sent_as(&api, path),
        [
            vec![pair("authorization", "Bearer alice-token")],
            vec![
                pair("authorization", "Bearer alice-token"),
                pair("impersonate-user", "bob")
            ],
        ]
    );
}

/// `timeoutSeconds` as large as an int64 (kube-apiserver accepts it): the
/// watch starts and ends as the client asks, no deadline overflows.
#[tokio::test]
async fn a_watch_with_the_largest_timeout_is_served() {
    let (cache, _p) = crate::common::two_sites("bj-1", CacheConfig::default());
    let gw = gateway::build(GatewayConfig::new(cache));
    let req = |uri: &str| boxed_request(Request::get(uri).body(Empty::<Bytes>::new()).unwrap());
    let resp = gw
        .oneshot(req(
            "/api/v1/endpoints?watch=1&resourceVersion=0&timeoutSeconds=9223372036854775807",
        ))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    // The initial events arrive: the stream runs.
    let first = body.frame().await.expect("a frame").expect("not an error");
    assert!(first.into_data().is_ok_and(|d| !d.is_empty()));
}
