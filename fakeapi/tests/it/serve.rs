//! The listener: h2c, HTTP/1.1, request log, shutdown.

use std::time::Duration;

use crate::common::{start_default, Http};
use serde_json::json;

#[tokio::test]
async fn h2c_and_http1_both_work() {
    let h = start_default().await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let h2 = Http::new(h.handle.url(), true);
    let r = h2.get("/api/v1/nodes").await;
    assert_eq!(r.code(), 200);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 6);
    let mut w = h2
        .watch("/api/v1/namespaces/default/services?watch=1&resourceVersion=0")
        .await;
    let mut names = Vec::new();
    for _ in 0..4 {
        names.push(
            w.event().await["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    names.sort();
    assert_eq!(
        names,
        [
            "echo-headless",
            "kubernetes",
            "plain-echo",
            "servicegrid-demo-svc"
        ]
    );
    let r1 = h
        .client
        .get("/api/v1/namespaces/default/services/servicegrid-demo-svc")
        .await
        .json();
    assert_eq!(
        r1["metadata"]["annotations"]["topologyKeys"],
        "[\"location\"]"
    );
}

#[tokio::test]
async fn requests_are_recorded() {
    let h = start_default().await;
    h.client
        .get("/api/v1/services?limit=500&resourceVersion=0")
        .await;
    let w = h
        .client
        .watch("/api/v1/services?watch=1&allowWatchBookmarks=true")
        .await;
    drop(w);
    let reqs = h.server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].path, "/api/v1/services");
    assert_eq!(reqs[0].query, "limit=500&resourceVersion=0");
    assert_eq!(
        reqs.iter().filter(|r| r.query.contains("watch=1")).count(),
        1
    );
}

#[tokio::test]
async fn shutdown_closes_open_connections() {
    let h = start_default().await;
    h.server
        .apply(json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}));
    let mut w = h.client.watch("/api/v1/namespaces?watch=1").await;
    assert_eq!(w.event().await["type"], "ADDED");
    let url = h.handle.url();
    tokio::time::timeout(Duration::from_secs(5), h.handle.shutdown())
        .await
        .expect("shutdown completes");
    assert!(
        w.next_line().await.is_none(),
        "the watch sees the upstream go away"
    );
    let req = hyper::Request::get(format!("{url}/version"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    assert!(
        client.request(req).await.is_err(),
        "nothing listens any more"
    );
}

#[tokio::test]
async fn dropping_the_handle_stops_the_server() {
    let h = start_default().await;
    let url = h.handle.url();
    let mut w = h.client.watch("/api/v1/nodes?watch=1").await;
    drop(h.handle);
    assert!(w.next_line().await.is_none());
    let req = hyper::Request::get(format!("{url}/version"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let mut refused = false;
    for _ in 0..50 {
        if client.request(req.clone()).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused);
}
