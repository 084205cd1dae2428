//! The proxy over real sockets against the in-memory API server, with the
//! real `kubectl` (client-go) as a List/Watch client.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::{json, Value};
use sitegrid_fakeapi::{kubectl::Kubectl, sample, ApiServer, ApiServerConfig, ServerHandle};
use sitegrid_proxy::app::{start, ProxyOptions, RunningProxy};

struct Env {
    api: ApiServer,
    _upstream: ServerHandle,
    proxy: RunningProxy,
    url: String,
}

async fn env(node: &str, slice_version: &'static str) -> Env {
    let api = ApiServer::new(ApiServerConfig {
        endpointslice_version: slice_version,
        ..ApiServerConfig::default()
    });
    api.load(sample::two_sites(slice_version));
    let (upstream, proxy) = serve_and_sync(
        &api,
        ProxyOptions::new(node, "127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let url = format!("http://{}", proxy.local_addr);
    Env {
        api,
        _upstream: upstream,
        proxy,
        url,
    }
}

/// Serves `api` on loopback and starts a proxy with `opts` against it;
/// returns once the proxy has synced every kind it wants.
async fn serve_and_sync(api: &ApiServer, opts: ProxyOptions) -> (ServerHandle, RunningProxy) {
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let proxy = start(kube::Config::new(upstream.url().parse().unwrap()), opts)
        .await
        .unwrap();
    for _ in 0..500 {
        if proxy.cache.readiness().is_ready() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        proxy.cache.readiness().is_ready(),
        "proxy synced from the upstream"
    );
    (upstream, proxy)
}

fn slice_addresses(list: &Value) -> Vec<String> {
    let mut ips: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("servicegrid-demo-svc")
        })
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    ips.sort();
    ips
}

async fn http_get(url: &str, http2: bool) -> (u16, Value) {
    let client = Client::builder(TokioExecutor::new())
        .http2_only(http2)
        .build_http::<Empty<Bytes>>();
    let resp = client.get(url.parse().unwrap()).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_only_the_local_sites_endpoints() {
    let e = env("bj-1", "v1").await;
    let out = Kubectl::new(e.url.clone())
        .ok_async(&["get", "endpointslices", "-A", "-o", "json"])
        .await;
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        slice_addresses(&list),
        ["10.0.0.70", "10.0.1.72"],
        "beijing's pods only"
    );
    // The API server itself still has all four.
    let direct = Kubectl::new(e._upstream.url())
        .ok_async(&["get", "endpointslices", "-A", "-o", "json"])
        .await;
    assert_eq!(
        slice_addresses(&serde_json::from_str(&direct).unwrap()).len(),
        4
    );

    let eps = Kubectl::new(e.url.clone())
        .ok_async(&["get", "endpoints", "servicegrid-demo-svc"])
        .await;
    let mut lines = eps.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["NAME", "ENDPOINTS", "AGE"]
    );
    let row: Vec<_> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row[0], "servicegrid-demo-svc");
    let mut shown: Vec<&str> = row[1].split(',').collect();
    shown.sort();
    assert_eq!(shown, ["10.0.0.70:8080", "10.0.1.72:8080"]);

    let svc = Kubectl::new(e.url.clone())
        .ok_async(&["get", "svc", "-A"])
        .await;
    assert!(svc.lines().next().unwrap().contains("CLUSTER-IP"), "{svc}");
    assert!(
        svc.contains("servicegrid-demo-svc") && svc.contains("10.96.33.231"),
        "{svc}"
    );
    // Its own Node is served from the cache (other nodes go upstream, with
    // the caller's credentials: the cache keeps only their labels).
    let node = Kubectl::new(e.url.clone())
        .ok_async(&["get", "node", "bj-1", "-o", "wide"])
        .await;
    assert!(
        node.lines().next().unwrap().contains("INTERNAL-IP"),
        "{node}"
    );
    assert_eq!(
        node.lines().filter(|l| l.contains(" Ready ")).count(),
        1,
        "{node}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_raw_watch_replays_what_happened_after_a_version() {
    let e = env("gz-2", "v1").await;
    let out = Kubectl::new(e.url.clone())
        .ok_async(&["get", "--raw", "/api/v1/namespaces/default/endpoints"])
        .await;
    let rv = serde_json::from_str::<Value>(&out).unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    // A new guangzhou pod joins the echo Service upstream.
    let mut ep = e
        .api
        .get("endpoints", Some("default"), "servicegrid-demo-svc")
        .unwrap();
    ep["subsets"][0]["addresses"]
        .as_array_mut()
        .unwrap()
        .push(json!({"ip":"10.0.2.2","nodeName":"gz-1"}));
    e.api.apply(ep);
    let before = rv.parse::<u64>().unwrap();
    for _ in 0..200 {
        if e.proxy.cache.current_rv() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let path = format!(
        "/api/v1/namespaces/default/endpoints?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    );
    let out = Kubectl::new(e.url.clone())
        .ok_async(&["get", "--raw", &path])
        .await;
    let frames: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 1, "{out}");
    assert_eq!(frames[0]["type"], "MODIFIED");
    let ips: Vec<_> = frames[0]["object"]["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        ips.contains(&"10.0.2.2".to_owned()) && !ips.iter().any(|ip| ip == "10.0.0.70"),
        "{ips:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_share_one_upstream_watch_per_kind_over_http1_and_h2c() {
    let e = env("bj-2", "v1").await;
    let mut streams = Vec::new();
    for i in 0..20 {
        let client = Client::builder(TokioExecutor::new())
            .http2_only(i % 2 == 0)
            .build_http::<Empty<Bytes>>();
        let resp = client
            .get(
                format!("{}/api/v1/endpoints?watch=1&resourceVersion=0", e.url)
                    .parse()
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        streams.push(resp);
    }
    let (code, list) = http_get(
        &format!("{}/apis/discovery.k8s.io/v1beta1/endpointslices", e.url),
        true,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["apiVersion"], "discovery.k8s.io/v1beta1");
    let watches = e.api.open_watches();
    for kind in ["services", "endpoints", "endpointslices"] {
        assert_eq!(
            watches.get(kind),
            Some(&1),
            "one upstream watch of {kind}: {watches:?}"
        );
    }
    // Nodes: this node by name, and the nodes of its site by label (the
    // ServiceGrid's key), never the whole cluster.
    assert_eq!(watches.get("nodes"), Some(&2), "{watches:?}");
    let node_reads: Vec<String> = e
        .api
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/nodes")
        .map(|r| r.query.clone())
        .collect();
    assert!(
        node_reads
            .iter()
            .all(|q| q.contains("fieldSelector=metadata.name%3Dbj-2")
                || q.contains("labelSelector=location+in+%28beijing%29")),
        "{node_reads:?}"
    );
    let lists = e
        .api
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/endpoints") && !r.query.contains("watch"))
        .count();
    assert_eq!(lists, 1, "one upstream list of endpoints");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_upstream_watches_and_410_relists_lose_nothing_and_add_nothing() {
    let e = env("bj-1", "v1").await;
    let (_, list) = http_get(
        &format!("{}/api/v1/namespaces/default/endpoints", e.url),
        false,
    )
    .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let resp = client
        .get(
            format!(
                "{}/api/v1/namespaces/default/endpoints?watch=1&resourceVersion={rv}",
                e.url
            )
            .parse()
            .unwrap(),
        )
        .await
        .unwrap();
    let mut body = resp.into_body();
    let set_plain = |ips: &[&str]| {
        let mut ep = e
            .api
            .get("endpoints", Some("default"), "plain-echo")
            .unwrap();
        ep["subsets"][0]["addresses"] = Value::Array(
            ips.iter()
                .map(|ip| json!({"ip": ip, "nodeName": "bj-2"}))
                .collect(),
        );
        e.api.apply(ep);
    };
    let mut seen: Vec<Value> = Vec::new();
    let mut buf = Vec::new();
    let mut read_until = async |needle: &str, seen: &mut Vec<Value>| {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !seen.iter().any(|f| f.to_string().contains(needle)) {
            let frame = tokio::time::timeout_at(deadline, body.frame())
                .await
                .expect("events arrive")
                .unwrap()
                .unwrap();
            buf.extend_from_slice(&frame.into_data().unwrap());
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                seen.push(serde_json::from_slice(&line).unwrap());
            }
        }
    };
    // 1. The upstream connection drops; a change happens meanwhile: the
    //    reflector resumes from its last version and the change arrives.
    e.api.disconnect_watches();
    set_plain(&["10.1.0.1"]);
    read_until("10.1.0.1", &mut seen).await;
    // 2. The global version moves on (a Service write), history is compacted,
    //    and the connection drops: the endpoints reflector resumes from a
    //    version that is now too old, gets 410 and relists; two changes
    //    happen meanwhile.
    let mut svc = e
        .api
        .get("services", Some("default"), "plain-echo")
        .unwrap();
    svc["metadata"]["labels"]["touched"] = json!("yes");
    e.api.apply(svc);
    e.api.compact();
    e.api.disconnect_watches();
    set_plain(&["10.1.0.2"]);
    set_plain(&["10.1.0.3"]);
    read_until("10.1.0.3", &mut seen).await;
    let names: Vec<&str> = seen
        .iter()
        .map(|f| f["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| *n == "plain-echo"),
        "unchanged objects produce no events across the relist: {names:?}"
    );
    let types: Vec<&str> = seen.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert!(types.iter().all(|t| *t == "MODIFIED"), "{types:?}");
    // The relist may merge the last two changes; the final state is what counts.
    assert!(seen.last().unwrap().to_string().contains("10.1.0.3"));
    let relists = e
        .api
        .requests()
        .iter()
        .filter(|r| r.path == "/api/v1/endpoints" && !r.query.contains("watch"))
        .count();
    assert_eq!(relists, 2, "the initial list and one relist after the 410");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_1_20_upstream_serving_only_v1beta1_slices() {
    let e = env("gz-1", "v1beta1").await;
    for version in ["v1", "v1beta1"] {
        let (code, list) = http_get(
            &format!("{}/apis/discovery.k8s.io/{version}/endpointslices", e.url),
            false,
        )
        .await;
        assert_eq!(code, 200, "{version}");
        assert_eq!(list["apiVersion"], format!("discovery.k8s.io/{version}"));
        assert_eq!(
            slice_addresses(&list),
            ["10.0.0.139", "10.0.1.8"],
            "{version}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_from_before_a_restart_get_410_never_a_wrong_replay() {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let client = || kube::Config::new(upstream.url().parse().unwrap());
    let first = start(
        client(),
        ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    while !first.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, list) = http_get(
        &format!("http://{}/api/v1/endpoints", first.local_addr),
        false,
    )
    .await;
    let old_rv: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    first.shutdown().await;

    let second = start(
        client(),
        ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    while !second.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let url = format!("http://{}", second.local_addr);
    let (_, list) = http_get(&format!("{url}/api/v1/endpoints"), false).await;
    let new_rv: u64 = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        new_rv > old_rv,
        "versions keep increasing across restarts: {old_rv} then {new_rv}"
    );
    let (code, frame) = http_get(
        &format!("{url}/api/v1/endpoints?watch=1&resourceVersion={old_rv}"),
        false,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        (frame["type"].as_str(), frame["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );
    let (code, _) = http_get(
        &format!("{url}/api/v1/endpoints?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
        false,
    )
    .await;
    assert_eq!(code, 410);
}

/// client-go's WatchList (on by default from 1.35, a feature toggle before):
/// kubectl's informer opens `watch=true&sendInitialEvents=true&
/// resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true` instead of a
/// LIST, and must get its initial state and the end bookmark from the proxy
/// (else client-go logs that it falls back to LIST/WATCH).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_client_go_watch_list_on_gets_its_state_as_a_stream() {
    let env = env("bj-1", "v1").await;
    let kubectl = Kubectl::new(&env.url).with_env("KUBE_FEATURE_WatchListClient", "true");
    // client-go reads the toggle from 1.30 (and kubectl's jsonpath wait is
    // 1.23+): with an older kubectl (Debian's 1.20, say) there is no
    // WatchList client to try; the plain list/watch tests above cover it.
    let version: Value =
        serde_json::from_str(&kubectl.ok(&["version", "--client", "-o", "json"])).unwrap();
    let minor: u32 = version["clientVersion"]["minor"]
        .as_str()
        .unwrap_or("0")
        .trim_end_matches('+')
        .parse()
        .unwrap_or(0);
    if minor < 30 {
        eprintln!("kubectl 1.{minor} predates client-go's WatchListClient: not tried");
        return;
    }
    let out = kubectl
        .run_async(
            &[
                "wait",
                "--for=jsonpath={.metadata.labels.location}=beijing",
                "node/bj-1",
                "--timeout=20s",
                "-v=6",
            ],
            "",
        )
        .await;
    assert!(out.success, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.stdout.trim(), "node/bj-1 condition met");
    let streamed = out.stderr.lines().any(|l| {
        l.contains("sendInitialEvents=true")
            && l.contains("resourceVersionMatch=NotOlderThan")
            && l.contains("200 OK")
    });
    assert!(
        streamed,
        "no WatchList request answered 200:\n{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("falling back"),
        "client-go fell back to LIST/WATCH:\n{}",
        out.stderr
    );
}

/// On demand (the binary's default): the proxy lists and watches Services and
/// Nodes from the start and each endpoint kind from the first request for it;
/// kube-proxy reads one of the two, so the other never costs the API server
/// or the node anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_kinds_are_synced_from_the_first_request_for_them() {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    opts.cache.on_demand = true;
    let proxy = start(kube::Config::new(upstream.url().parse().unwrap()), opts)
        .await
        .unwrap();
    let url = format!("http://{}", proxy.local_addr);
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut ready = 0;
    for _ in 0..200 {
        let resp = client
            .get(format!("{url}/readyz").parse().unwrap())
            .await
            .unwrap();
        ready = resp.status().as_u16();
        if ready == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ready, 200, "ready with Services and Nodes synced");
    let upstream_reads = |resource: &str| {
        api.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with(resource))
            .count()
    };
    assert_eq!(upstream_reads("/endpoints"), 0);
    assert_eq!(upstream_reads("/endpointslices"), 0);

    // kube-proxy's first request: answered once its kind synced, and only it is watched.
    let (code, list) = http_get(
        &format!("{url}/apis/discovery.k8s.io/v1/endpointslices"),
        false,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        slice_addresses(&list),
        ["10.0.0.70", "10.0.1.72"],
        "the first answer is already site-filtered"
    );
    assert!(upstream_reads("/endpointslices") > 0);
    assert_eq!(upstream_reads("/endpoints"), 0);
    // After its list, the slices' watch opens; Endpoints are never watched.
    let mut watched = Vec::new();
    for _ in 0..100 {
        watched = api.open_watches().keys().cloned().collect::<Vec<_>>();
        if watched.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(watched, ["endpointslices", "nodes", "services"]);
}

/// The endpoint kinds are listed once Services and Nodes have synced: their
/// views cannot be made before, and a list of Services held while thousands
/// of EndpointSlices arrive left their space scattered between the slices'
/// for good (about 0.7 MB with 10,000 endpoints, in one start of three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_kinds_are_listed_after_services_and_nodes_have_synced() {
    let api = ApiServer::new(ApiServerConfig::default());
    // Enough Services for several pages of the proxy's upstream lists.
    api.load(sample::synthetic(4, 2, 100, 3, "v1"));
    let mut opts = ProxyOptions::new("site-0-node-0", "127.0.0.1:0".parse().unwrap());
    opts.cache.on_demand = false;
    let (_upstream, _proxy) = serve_and_sync(&api, opts).await;
    let requests = api.requests();
    let lists = |resource: &str| -> Vec<usize> {
        requests
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.method == "GET" && r.path.ends_with(resource) && !r.query.contains("watch=")
            })
            .map(|(i, _)| i)
            .collect()
    };
    let (services, nodes) = (lists("/services"), lists("/nodes"));
    assert!(
        services.len() > 1,
        "the Services came in pages: {services:?}"
    );
    // The last page of Services, and the first list of Nodes (the site's
    // nodes are listed by label once the Services name the key).
    let topology_synced = services.last().max(nodes.first()).copied().unwrap();
    for kind in ["/endpoints", "/endpointslices"] {
        let first = lists(kind).first().copied();
        assert!(
            first.is_some_and(|at| at > topology_synced),
            "{kind} listed at {first:?}, the topology inputs synced at {topology_synced}"
        );
    }
}

/// Issue 16: the proxy watches this node by name and the nodes of its site
/// by label; another node's status write (kubelet's heartbeat) changes
/// nothing it serves, while nodes changing site move their endpoints in or
/// out of its views.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_heartbeats_go_no_further_and_nodes_changing_site_move_their_endpoints() {
    use sitegrid_cache::{EventType, ResourceKind};
    let e = env("bj-1", "v1").await;
    let demo = format!(
        "{}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        e.url
    );
    let (_, before) = http_get(&demo, false).await;
    assert_eq!(slice_addresses(&before), ["10.0.0.70", "10.0.1.72"]);
    let cache = &e.proxy.cache;
    // The one key the Services name, at bj-1's value (also on /debug/cache).
    assert_eq!(
        serde_json::to_value(cache.node_scopes()).unwrap(),
        json!({"location": ["beijing"]})
    );
    let (nodes_from, slices_from) = (
        cache.store(ResourceKind::Nodes).last_rv(),
        cache.store(ResourceKind::EndpointSlices).last_rv(),
    );
    let gz_ip = |node: &str| {
        let slices = e.api.list("endpointslices");
        slices
            .iter()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .find(|ep| ep["nodeName"] == node)
            .map(|ep| ep["addresses"][0].as_str().unwrap().to_owned())
            .unwrap()
    };
    let gz2 = gz_ip("gz-2");
    // bj-2's kubelet reports its status: a new resourceVersion, the same labels.
    let mut bj2 = e.api.get("nodes", None, "bj-2").unwrap();
    bj2["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
        "lastHeartbeatTime": "2026-11-23T23:00:00Z", "reason": "KubeletReady"}]);
    e.api.apply(bj2);
    // bj-3 moves to guangzhou, gz-2 to beijing.
    for (node, site) in [("bj-3", "guangzhou"), ("gz-2", "beijing")] {
        let mut n = e.api.get("nodes", None, node).unwrap();
        n["metadata"]["labels"]["location"] = json!(site);
        e.api.apply(n);
    }
    let mut want = vec!["10.0.0.70".to_owned(), gz2];
    want.sort();
    let mut now = Vec::new();
    for _ in 0..250 {
        let (_, list) = http_get(&demo, false).await;
        now = slice_addresses(&list);
        if now == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(now, want, "bj-3's endpoint left the view, gz-2's came in");
    // What the proxy's watchers were sent: the slice MODIFIED, and of
    // Nodes only the two that changed site — nothing for bj-2's status write.
    let slices = cache
        .store(ResourceKind::EndpointSlices)
        .subscribe(Some(slices_from))
        .unwrap();
    assert!(!slices.replay.is_empty());
    assert!(slices
        .replay
        .iter()
        .all(|ev| ev.event_type == EventType::Modified));
    let nodes = cache
        .store(ResourceKind::Nodes)
        .subscribe(Some(nodes_from))
        .unwrap();
    let mut heard: Vec<(String, EventType)> = nodes
        .replay
        .iter()
        .map(|ev| (ev.object.name().to_owned(), ev.event_type))
        .collect();
    heard.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        heard,
        [
            ("bj-3".to_owned(), EventType::Deleted),
            ("gz-2".to_owned(), EventType::Added)
        ],
        "bj-3 left the site's scope, gz-2 joined it; bj-2's heartbeat stayed upstream"
    );
}

/// Issue 16: per-site chaining. A node proxy whose upstream is its site's
/// proxy serves what a node proxy on the API server serves, before and after
/// nodes change site; the site proxy answers the node proxy's node scope
/// from its cache (metadata only), so another node's status write reaches
/// no node proxy at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_proxy_behind_its_site_proxy_serves_what_a_direct_one_does() {
    use sitegrid_apimachinery::selector::LabelSelector;
    use sitegrid_cache::{Cache, ResourceKind};
    use sitegrid_proxy::passthrough::AnonymousPassthrough;
    async fn ready(cache: &Cache) {
        for _ in 0..250 {
            if cache.readiness().is_ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("a proxy did not sync");
    }
    let e = env("bj-1", "v1").await;
    let mut site_opts = ProxyOptions::new("site-proxy", "127.0.0.1:0".parse().unwrap());
    site_opts.site = Some(LabelSelector::parse("location=beijing").unwrap());
    // The node proxy reads its own Node through the site proxy without credentials here.
    site_opts.anonymous_passthrough = AnonymousPassthrough::All;
    let site = start(
        kube::Config::new(e._upstream.url().parse().unwrap()),
        site_opts,
    )
    .await
    .unwrap();
    ready(&site.cache).await;
    let site_url = format!("http://{}", site.local_addr);
    let chained = start(
        kube::Config::new(site_url.parse().unwrap()),
        ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    ready(&chained.cache).await;
    let chained_url = format!("http://{}", chained.local_addr);
    // Both links in protobuf, as shipped: the site proxy answers the node
    // proxy in it (the headless Service's `headless: ""` label included), and
    // the in-memory API server answers the site proxy in it, as
    // kube-apiserver does.
    for kind in [ResourceKind::Services, ResourceKind::EndpointSlices] {
        assert!(
            chained.cache.metrics().reads_protobuf(kind),
            "{kind} from the site proxy"
        );
        assert!(
            site.cache.metrics().reads_protobuf(kind),
            "{kind} from the API server"
        );
    }
    // Only the two endpoint kinds' items matter, without versions.
    let items = |list: &Value| -> Vec<Value> {
        let mut items = list["items"].as_array().cloned().unwrap_or_default();
        for i in items.iter_mut() {
            i["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
        }
        items
    };
    // What both answer once they agree and differ from `before` (the answer
    // before a change: agreeing on it would be agreeing before either saw it).
    let same_answers = |before: Vec<Value>| {
        let (e, chained_url, items) = (&e, &chained_url, &items);
        async move {
            let mut last = (Vec::new(), Vec::new());
            for _ in 0..250 {
                let mut all = (Vec::new(), Vec::new());
                for path in [
                    "/api/v1/endpoints",
                    "/apis/discovery.k8s.io/v1/endpointslices",
                ] {
                    all.0
                        .extend(items(&http_get(&format!("{}{path}", e.url), false).await.1));
                    all.1.extend(items(
                        &http_get(&format!("{chained_url}{path}"), false).await.1,
                    ));
                }
                if all.0 == all.1 && all.0 != before {
                    return all.0;
                }
                last = all;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!(
                "direct and chained never agreed on a new answer:\n{:#?}\nvs\n{:#?}",
                last.0, last.1
            );
        }
    };
    let first = same_answers(Vec::new()).await;
    assert!(!first.is_empty());
    let (_, list) = http_get(
        &format!("{chained_url}/apis/discovery.k8s.io/v1/endpointslices"),
        false,
    )
    .await;
    assert_eq!(slice_addresses(&list), ["10.0.0.70", "10.0.1.72"]);
    // The node proxy's scope watch was answered by the site proxy, and the
    // site proxy's own selector (location=beijing) holds that scope: the API
    // server has the direct proxy's scope watch and the site's own, no more.
    let node_watches = |selector: &str| {
        e.api
            .requests()
            .iter()
            .filter(|r| {
                r.path == "/api/v1/nodes"
                    && r.query.contains("watch=true")
                    && r.query.contains(selector)
            })
            .count()
    };
    assert_eq!(node_watches("labelSelector=location+in+%28beijing%29"), 1);
    assert_eq!(node_watches("labelSelector=location%3Dbeijing"), 1);
    let nodes_from = chained.cache.store(ResourceKind::Nodes).last_rv();
    // bj-2 reports its status; bj-3 moves to guangzhou, gz-2 to beijing.
    let mut bj2 = e.api.get("nodes", None, "bj-2").unwrap();
    bj2["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
        "lastHeartbeatTime": "2026-11-23T23:30:00Z", "reason": "KubeletReady"}]);
    e.api.apply(bj2);
    for (node, site) in [("bj-3", "guangzhou"), ("gz-2", "beijing")] {
        let mut n = e.api.get("nodes", None, node).unwrap();
        n["metadata"]["labels"]["location"] = json!(site);
        e.api.apply(n);
    }
    // Both proxies have the last move before their answers are compared:
    // agreeing after bj-3's move alone would be agreeing too early.
    for cache in [&e.proxy.cache, &chained.cache] {
        let moved = || {
            cache
                .store(ResourceKind::Nodes)
                .get("gz-2")
                .is_some_and(|v| {
                    v.labels(cache.codec())
                        .iter()
                        .any(|l| l == ("location", "beijing"))
                })
        };
        for _ in 0..250 {
            if moved() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(moved(), "gz-2's move did not reach a proxy");
    }
    // The moves change what bj-1 routes to: both come to the same new answer.
    same_answers(first).await;
    let (_, list) = http_get(
        &format!("{chained_url}/apis/discovery.k8s.io/v1/endpointslices"),
        false,
    )
    .await;
    assert_eq!(slice_addresses(&list).len(), 2);
    assert!(
        !slice_addresses(&list).contains(&"10.0.1.72".to_owned()),
        "bj-3 left"
    );
    let heard: Vec<String> = chained
        .cache
        .store(ResourceKind::Nodes)
        .subscribe(Some(nodes_from))
        .unwrap()
        .replay
        .iter()
        .map(|ev| ev.object.name().to_owned())
        .collect();
    assert!(
        !heard.contains(&"bj-2".to_owned()),
        "bj-2's status write reached the node proxy: {heard:?}"
    );
    chained.shutdown().await;
    site.shutdown().await;
}

/// Issue 16: list/watch semantics through two proxies. The site proxy
/// restarts (new versions, no history); the node proxy's resume is refused,
/// it relists, and its own watchers see only what really changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_proxy_restart_costs_the_node_proxys_watchers_nothing() {
    use sitegrid_apimachinery::selector::LabelSelector;
    use sitegrid_cache::Cache;
    use sitegrid_proxy::passthrough::AnonymousPassthrough;
    async fn ready(cache: &Cache) {
        for _ in 0..250 {
            if cache.readiness().is_ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("a proxy did not sync");
    }
    let e = env("bj-1", "v1").await;
    let upstream = || kube::Config::new(e._upstream.url().parse().unwrap());
    let site_opts = |addr: std::net::SocketAddr| {
        let mut o = ProxyOptions::new("site-proxy", addr);
        o.site = Some(LabelSelector::parse("location=beijing").unwrap());
        o.anonymous_passthrough = AnonymousPassthrough::All;
        // Passed-through streams (the node proxy's own Node) end at once.
        o.grace = Duration::ZERO;
        o
    };
    let site = start(upstream(), site_opts("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    ready(&site.cache).await;
    let site_addr = site.local_addr;
    let node = start(
        kube::Config::new(format!("http://{site_addr}").parse().unwrap()),
        ProxyOptions::new("bj-2", "127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    ready(&node.cache).await;
    let slices = format!(
        "http://{}/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        node.local_addr
    );
    let (_, list) = http_get(&slices, false).await;
    assert_eq!(slice_addresses(&list), ["10.0.0.70", "10.0.1.72"]);
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let watch = client
        .get(
            format!("{slices}?watch=1&resourceVersion={rv}")
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    let mut body = watch.into_body();

    site.shutdown().await;
    let site = start(upstream(), site_opts(site_addr)).await.unwrap();
    ready(&site.cache).await;
    let mut gz2 = e.api.get("nodes", None, "gz-2").unwrap();
    gz2["metadata"]["labels"]["location"] = json!("beijing");
    e.api.apply(gz2);

    // The first event the node proxy's watcher gets is the slice gaining
    // gz-2's pod: nothing from the restart, the 410 or the relist.
    let mut buf = Vec::new();
    let frame: Value = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                return serde_json::from_slice(&buf[..pos]).unwrap();
            }
            let chunk = body.frame().await.unwrap().unwrap();
            if let Ok(data) = chunk.into_data() {
                buf.extend_from_slice(&data);
            }
        }
    })
    .await
    .expect("no event after the site proxy's restart");
    assert_eq!(frame["type"], "MODIFIED", "{frame}");
    let mut ips: Vec<&str> = frame["object"]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ep| ep["addresses"][0].as_str().unwrap())
        .collect();
    ips.sort();
    assert_eq!(ips.len(), 3, "{frame}");
    assert!(ips.contains(&"10.0.0.70") && ips.contains(&"10.0.1.72"));
    node.shutdown().await;
    site.shutdown().await;
}
