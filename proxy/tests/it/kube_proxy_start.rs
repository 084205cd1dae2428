//! A model of kube-proxy's start against sitegrid-proxy: its informers'
//! requests in the order and form kube-proxy 1.35, 1.33 and 1.29 make them
//! (proxy/README.md, "What kube-proxy 1.29–1.35 asks"): protobuf Accept,
//! client-go 1.35's WatchList first (falling back to LIST + WATCH when it is
//! refused), the field-selected Node, Services without headless ones,
//! ServiceCIDRs. Each variant must reach "every informer synced" and then
//! follow changes: online, without credentials, after an offline restart of
//! the proxy, and against a 1.20-shaped API server without ServiceCIDRs.
//! Over real sockets against the in-memory API server.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use serde_json::{json, Value};
use sitegrid_fakeapi::kubectl::{release_binary, Kubectl};
use sitegrid_fakeapi::sample::WORLD;
use sitegrid_fakeapi::{ApiServer, ApiServerConfig, KubernetesVersion};
use sitegrid_proxy::app::ProxyOptions;

use crate::common::proxy;
use crate::kube_proxy_model::{KubeProxy, Release, Synced, LS, WAIT};

/// The API server playing `version` with the two-site world.
async fn cluster(version: KubernetesVersion) -> (ApiServer, sitegrid_fakeapi::ServerHandle) {
    let api = ApiServer::new(ApiServerConfig::for_version(version));
    api.load_two_sites();
    let handle = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    (api, handle)
}

fn options(dir: Option<&std::path::Path>) -> ProxyOptions {
    let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    if let Some(dir) = dir {
        opts.data_dir = Some(dir.to_owned());
        opts.snapshot_interval = Duration::from_millis(200);
    }
    opts
}

fn names(synced: &[Synced], informer: &str) -> Vec<String> {
    let s = synced.iter().find(|s| s.informer == informer).unwrap();
    s.names.iter().cloned().collect()
}

fn informer<'a>(synced: &'a mut [Synced], name: &str) -> &'a mut Synced {
    synced.iter_mut().find(|s| s.informer == name).unwrap()
}

/// What every variant syncs: bj-1's own Node, the Services with a cluster
/// IP, the site's slices, and (1.31+) the cluster's ServiceCIDR.
fn assert_synced(synced: &[Synced], release: Release) {
    assert_eq!(names(synced, "node"), ["bj-1"]);
    let services = names(synced, "services");
    assert!(
        services.contains(&"servicegrid-demo-svc".to_owned()),
        "{services:?}"
    );
    assert!(!names(synced, "endpointslices").is_empty());
    if release != Release::V1_29 {
        assert_eq!(names(synced, "servicecidrs"), ["kubernetes"]);
    }
}

/// The demo slice with one more beijing endpoint: a copy of one of its
/// beijing endpoints (whatever the version names its node with) at `ip`.
fn demo_slice_with(api: &ApiServer, ip: &str) -> Value {
    let mut slice = api
        .list("endpointslices")
        .into_iter()
        .find(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc")
        .unwrap();
    let mut extra = slice["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e.to_string().contains("\"bj-"))
        .expect("a beijing endpoint")
        .clone();
    extra["addresses"] = json!([ip]);
    extra.as_object_mut().unwrap().remove("targetRef");
    slice["endpoints"].as_array_mut().unwrap().push(extra);
    slice
}

/// Changes on the API server reach the informers, through the site filter
/// and the field selectors.
async fn follows_changes(api: &ApiServer, synced: &mut [Synced], release: Release) {
    api.apply(demo_slice_with(api, "10.0.0.77"));
    let e = informer(synced, "endpointslices").next_change().await;
    assert_eq!(e.kind, "MODIFIED");
    assert!(
        e.raw.windows(9).any(|w| w == b"10.0.0.77"),
        "the new beijing endpoint"
    );

    // A headless Service stays out of 1.33+'s Services informer; a plain one
    // comes in.
    let service = |name: &str, cluster_ip: &str| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": cluster_ip, "ports": [{"port": 80}]}})
    };
    if release != Release::V1_29 {
        api.apply(service("headless", "None"));
    }
    api.apply(service("plain", "10.96.0.99"));
    let e = informer(synced, "services").next_change().await;
    assert_eq!((e.kind.as_str(), e.name.as_str()), ("ADDED", "plain"));

    if release != Release::V1_29 {
        api.apply(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": "extra"}, "spec": {"cidrs": ["10.100.0.0/24"]}}),
        );
        let e = informer(synced, "servicecidrs").next_change().await;
        assert_eq!((e.kind.as_str(), e.name.as_str()), ("ADDED", "extra"));
    }

    let mut node = api.get("nodes", None, "bj-1").unwrap();
    node["metadata"]["labels"]["model"] = json!("changed");
    api.apply(node);
    let e = informer(synced, "node").next_change().await;
    assert_eq!((e.kind.as_str(), e.name.as_str()), ("MODIFIED", "bj-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_proxy_1_35_starts_and_follows_online_with_and_without_credentials() {
    let (api, upstream) = cluster(KubernetesVersion::V1_35).await;
    let (_proxy, url) = proxy(&upstream.url(), options(None)).await;
    for token in [Some("a-node-token"), None] {
        let kp = KubeProxy::new(&url, token);
        let mut synced = kp.start(Release::V1_35, "bj-1").await;
        assert_synced(&synced, Release::V1_35);
        // WatchList was answered: no informer fell back to LIST.
        assert!(synced.iter().all(|s| s.watch_list));
        if token.is_none() {
            follows_changes(&api, &mut synced, Release::V1_35).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_proxy_1_33_lists_and_watches_a_1_35_cluster() {
    let (api, upstream) = cluster(KubernetesVersion::V1_35).await;
    let (_proxy, url) = proxy(&upstream.url(), options(None)).await;
    let mut synced = KubeProxy::new(&url, None)
        .start(Release::V1_33, "bj-1")
        .await;
    assert_synced(&synced, Release::V1_33);
    follows_changes(&api, &mut synced, Release::V1_33).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_proxy_1_35_restarts_with_its_proxy_while_the_cluster_is_unreachable() {
    let dir = std::env::temp_dir().join(format!("sitegrid-kp135-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (_api, upstream) = cluster(KubernetesVersion::V1_35).await;
    let upstream_url = upstream.url();
    let (first, url) = proxy(&upstream_url, options(Some(&dir))).await;
    // Online: kube-proxy syncs everything, ServiceCIDRs included (synced on
    // its first request), and the proxy persists it.
    let synced = KubeProxy::new(&url, None)
        .start(Release::V1_35, "bj-1")
        .await;
    assert_synced(&synced, Release::V1_35);
    drop(synced);
    first.shutdown().await;
    upstream.shutdown().await;

    // The cloud is gone; the proxy restarts from its snapshot, then
    // kube-proxy restarts: every informer syncs, the same objects.
    let (_second, url) = proxy(&upstream_url, options(Some(&dir))).await;
    let again = KubeProxy::new(&url, None)
        .start(Release::V1_35, "bj-1")
        .await;
    assert_synced(&again, Release::V1_35);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_a_1_20_cluster_the_older_informers_sync_and_service_cidrs_are_not_found() {
    let (api, upstream) = cluster(KubernetesVersion::V1_20).await;
    let (_proxy, url) = proxy(&upstream.url(), options(None)).await;
    let kp = KubeProxy::new(&url, None);
    let mut synced = kp.start(Release::V1_29, "bj-1").await;
    assert_synced(&synced, Release::V1_29);
    follows_changes(&api, &mut synced, Release::V1_29).await;
    // What kube-apiserver 1.20 answers for a resource it does not serve.
    let resp = kp
        .get(&format!(
            "/apis/networking.k8s.io/v1/servicecidrs?{LS}&limit=500&resourceVersion=0"
        ))
        .await;
    assert_eq!(resp.status(), 404);
}

/// Fail fast: with the API server unreachable and nothing persisted, a
/// first request for a kind never synced is answered at once — 503, a
/// `Retry-After`, and a Status saying why — not after the sync wait
/// (kubectl retrying on 503 would otherwise hang for minutes). The wait is
/// set to an hour here: a request that waited would never be answered
/// within the test's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_cluster_unreachable_a_kind_never_synced_is_503_at_once() {
    let nothing = sitegrid_fakeapi::testing::free_port().unwrap();
    let mut opts = options(None);
    opts.handlers.sync_wait = Duration::from_secs(3600);
    let (proxy, url) = proxy(&format!("http://127.0.0.1:{nothing}"), opts).await;
    let kp = KubeProxy::new(&url, None);
    // The proxy has tried (and failed) to reach the API server.
    for _ in 0..500 {
        if proxy.cache.readiness().failing().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for path in [
        "/apis/discovery.k8s.io/v1/endpointslices?limit=500&resourceVersion=0",
        "/apis/networking.k8s.io/v1/servicecidrs?limit=500&resourceVersion=0",
        "/api/v1/services?limit=500&resourceVersion=0",
    ] {
        let req = hyper::Request::get(format!("{url}{path}"))
            .header("accept", "application/json")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(60), kp.client.request(req))
            .await
            .unwrap_or_else(|_| panic!("{path}: answered without waiting for a sync"))
            .unwrap();
        assert_eq!(resp.status(), 503, "{path}");
        assert_eq!(resp.headers()["retry-after"], "5", "{path}");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let status: Value = serde_json::from_slice(&body).unwrap();
        let message = status["message"].as_str().unwrap();
        assert!(
            message.contains("has not synced") && message.contains("failing"),
            "{path}: {message}"
        );
    }
}

/// kubectl 1.33 (real client-go) reads ServiceCIDRs through the proxy on a
/// 1.35 cluster: a Table, the object, and a watch that prints one created
/// while it watches, under the header it printed first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_gets_and_watches_service_cidrs_through_the_proxy() {
    use std::io::{BufRead, BufReader};

    let (api, upstream) = cluster(KubernetesVersion::V1_35).await;
    let (_proxy, url) = proxy(&upstream.url(), options(None)).await;
    let kubectl = Kubectl::of_release(url.clone(), "1.33");
    let table = kubectl.ok_async(&["get", "servicecidrs"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "CIDRS", "AGE"], "{table}");
    assert_eq!(
        rows[1][..2],
        ["kubernetes", WORLD.service_cidr.as_str()],
        "{table}"
    );
    let json: Value = serde_json::from_str(
        &kubectl
            .ok_async(&["get", "servicecidr", "kubernetes", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(json["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(json["spec"]["cidrs"], json!([WORLD.service_cidr]));

    let home = std::env::temp_dir().join(format!("sitegrid-kubectl-watch-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let mut child = std::process::Command::new(release_binary("1.33").unwrap())
        .args(["--server", &url, "get", "servicecidrs", "--watch"])
        .env("HOME", &home)
        .env("KUBECONFIG", home.join("kubeconfig"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut printed = Vec::new();
    // The current one first, then one created while it watches.
    for created in [None, None, Some("extra")] {
        if let Some(name) = created {
            api.apply(
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                "metadata": {"name": name}, "spec": {"cidrs": ["10.100.0.0/24"]}}),
            );
        }
        let line = tokio::time::timeout(WAIT, rx.recv()).await;
        printed.push(line.ok().flatten().unwrap_or_default());
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&home);
    let names: Vec<&str> = printed
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["NAME", "kubernetes", "extra"], "{printed:?}");
    assert!(printed[2].contains("10.100.0.0/24"), "{printed:?}");
}
