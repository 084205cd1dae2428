//! The whole site follows a rebooted node's pods: behind beijing's site
//! proxy, bj-1's kubelet reports its pod's new address while the API
//! server is unreachable, and bj-2's proxy, which reads the site proxy, is
//! served it too — until the API server is back.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{json, Value};
use sitegrid_proxy::app::{start, ProxyOptions, RunningProxy};

use crate::node_cache::{kubelet_starts, send, slice_of, until_slice, web_service, World, STATUS};

/// bj-2's proxy, plain HTTP, reading beijing's site proxy as node proxies
/// there do.
async fn other_node(w: &World) -> (RunningProxy, kube::Client) {
    let config = w.pki.site_config(w.site.as_ref().unwrap());
    let mut opts = ProxyOptions::new("bj-2", "127.0.0.1:0".parse().unwrap());
    opts.grace = Duration::from_millis(200);
    let proxy = start(config, opts).await.unwrap();
    let client = kube::Client::try_from(kube::Config::new(
        format!("http://{}", proxy.local_addr).parse().unwrap(),
    ))
    .unwrap();
    (proxy, client)
}

/// A report of `node`'s pods: (uid, address, ready).
fn report(node: &str, pods: &[(&str, &str, bool)]) -> Value {
    let pods: Vec<Value> = pods
        .iter()
        .map(|(uid, ip, ready)| {
            json!({"namespace": "shop", "name": uid, "uid": uid, "node": node,
                   "ips": [ip], "ready": ready, "running": true})
        })
        .collect();
    json!({ "pods": pods })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_a_nodes_pod_status_reaches_the_other_nodes_of_its_site_through_the_site_proxy() {
    let mut w = World::behind_a_site_proxy("site-reports").await;
    web_service(&w);
    kubelet_starts(&w).await;
    let (bj2, on_bj2) = other_node(&w).await;
    let before = until_slice(&on_bj2, &[("10.0.1.5", true), ("10.0.1.6", true)]).await;

    // The WAN is cut: the API server is gone for bj-1's kubelet and for
    // the site proxy alike.
    w.go_offline().await;
    let site_offline =
        |r: &str| r.contains("the site's nodes' offline reports of their pods are served");
    let site_ops = w.on_site_proxy(Some("node-proxy"));
    for _ in 0..200 {
        let (_, body) = send(&site_ops, Method::GET, "/readyz", None).await;
        if site_offline(&String::from_utf8_lossy(&body)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // bj-1 rebooted: its kubelet reports web at a new address, ready.
    let patch = json!({"metadata": {"uid": "uid-web"},
        "status": {"podIP": "10.0.1.50", "podIPs": [{"ip": "10.0.1.50"}],
                   "conditions": [{"type": "Ready", "status": "True"}]}});
    let (status, body) = send(&w.kubelet(), Method::PATCH, STATUS, Some(patch)).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    // bj-2, which reads only the site proxy, is served the new address.
    let moved = until_slice(&on_bj2, &[("10.0.1.50", true), ("10.0.1.6", true)]).await;
    assert!(moved > before, "{moved} after {before}");

    // A node's reports come from its own kubelet's certificate only.
    const BJ1: &str = "/sitegrid/v1/nodes/bj-1/localpods";
    for who in [Some("kubelet-bj-2"), Some("admin"), Some("node-proxy")] {
        let (status, _) = send(
            &w.on_site_proxy(who),
            Method::PUT,
            BJ1,
            Some(report("bj-1", &[("uid-web", "10.0.1.66", true)])),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{who:?}");
    }
    // And move only that node's endpoints: bj-2's kubelet reports its own
    // pod web-b (taken) and claims bj-1's web (not applied).
    let (status, body) = send(
        &w.on_site_proxy(Some("kubelet-bj-2")),
        Method::PUT,
        "/sitegrid/v1/nodes/bj-2/localpods",
        Some(report(
            "bj-1",
            &[
                ("uid-web-b", "10.0.1.60", false),
                ("uid-web", "10.0.1.66", true),
            ],
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    until_slice(&on_bj2, &[("10.0.1.50", true), ("10.0.1.60", false)]).await;
    let (status, _) = send(
        &w.on_site_proxy(Some("kubelet-bj-2")),
        Method::PUT,
        "/sitegrid/v1/nodes/bj-2/localpods",
        Some(json!({"pods": "not a list"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // The API server is back: its view wins, at newer versions.
    let (_, offline_rv) = slice_of(&on_bj2).await;
    w.come_back().await;
    let back = until_slice(&on_bj2, &[("10.0.1.5", true), ("10.0.1.6", true)]).await;
    assert!(back > offline_rv, "{back} after {offline_rv}");
    // Online, the site proxy takes no reports: the API server's view is served.
    let (status, _) = send(
        &w.on_site_proxy(Some("kubelet-bj-2")),
        Method::PUT,
        "/sitegrid/v1/nodes/bj-2/localpods",
        Some(report("bj-2", &[("uid-web-b", "10.0.1.61", true)])),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (eps, _) = slice_of(&on_bj2).await;
    assert_eq!(
        eps,
        [("10.0.1.5".to_owned(), true), ("10.0.1.6".to_owned(), true)]
    );
    bj2.shutdown().await;
}
