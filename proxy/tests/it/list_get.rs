//! LIST and GET of the cached kinds, as kube-proxy, client-go and kubectl use them.

use crate::common::*;
use bytes::Bytes;
use http_body_util::BodyExt;
use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};
use sitegrid_cache::{CacheConfig, ResourceKind};
use sitegrid_proxy::handlers::HandlerSettings;

const KUBE_PROXY_LS: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

#[tokio::test]
async fn list_is_filtered_to_the_local_site_and_shaped_like_the_apiserver() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache.clone(), HandlerSettings::default());
    let (code, list) = get_json(&app, "/api/v1/endpoints?limit=500&resourceVersion=0").await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "EndpointsList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(
        list["metadata"],
        json!({"resourceVersion": cache.store(ResourceKind::Endpoints).last_rv().to_string()})
    );
    assert!(
        list["items"][0].get("kind").is_none(),
        "list items carry no kind"
    );
    // Beijing's pods only (bj-1 and bj-3), not guangzhou's.
    assert_eq!(
        subset_ips(item(&list, "servicegrid-demo-svc")),
        ["10.0.0.70", "10.0.1.72"]
    );
    // A Service without topologyKeys is not filtered.
    assert_eq!(
        subset_ips(item(&list, "plain-echo")),
        ["10.0.0.81", "10.0.1.33"]
    );
    // All-namespace lists are ordered by namespace/name, like etcd keys.
    assert_eq!(
        names(&list),
        [
            "echo-headless",
            "kubernetes",
            "plain-echo",
            "servicegrid-demo-svc",
            "kube-dns"
        ]
    );

    let (_, slices) = get_json(&app, "/apis/discovery.k8s.io/v1/endpointslices").await;
    assert_eq!(slices["kind"], "EndpointSliceList");
    assert_eq!(
        slice_ips(slice_of(&slices, "servicegrid-demo-svc")),
        ["10.0.0.70", "10.0.1.72"],
        "only beijing's endpoints"
    );
}

#[tokio::test]
async fn v1beta1_endpointslices_are_served_converted() {
    let (cache, _p) = two_sites("gz-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (code, list) = get_json(
        &app,
        "/apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["apiVersion"], "discovery.k8s.io/v1beta1");
    let ep = &slice_of(&list, "servicegrid-demo-svc")["endpoints"][0];
    assert_eq!(ep["addresses"], json!(["10.0.0.139"]));
    assert_eq!(
        ep["topology"]["kubernetes.io/hostname"], "gz-2",
        "v1beta1 spells the node in topology"
    );
}

#[tokio::test]
async fn kube_proxy_label_selector_and_field_selectors() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (_, list) = get_json(
        &app,
        &format!("/api/v1/endpoints?{KUBE_PROXY_LS}&limit=500&resourceVersion=0"),
    )
    .await;
    assert_eq!(
        names(&list),
        [
            "kubernetes",
            "plain-echo",
            "servicegrid-demo-svc",
            "kube-dns"
        ],
        "the headless service's endpoints are excluded"
    );
    let (_, list) = get_json(
        &app,
        &format!("/apis/discovery.k8s.io/v1/endpointslices?{KUBE_PROXY_LS}"),
    )
    .await;
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] != "echo-headless"),
        "{list}"
    );
    let (_, list) = get_json(
        &app,
        "/api/v1/services?labelSelector=superedge.io%2Fgrid-selector%20in%20(servicegrid-demo,x)",
    )
    .await;
    assert_eq!(names(&list), ["servicegrid-demo-svc"]);
    let (_, list) = get_json(
        &app,
        "/api/v1/endpoints?fieldSelector=metadata.namespace%3Ddefault,metadata.name!%3Dservicegrid-demo-svc",
    )
    .await;
    assert_eq!(names(&list), ["echo-headless", "kubernetes", "plain-echo"]);
    let (_, list) = get_json(
        &app,
        "/api/v1/nodes?fieldSelector=metadata.name%3Dgz-1&limit=500&resourceVersion=0",
    )
    .await;
    assert_eq!(names(&list), ["gz-1"]);

    let (code, status) = get_json(&app, "/api/v1/services?labelSelector=a%20in%20(b").await;
    assert_eq!(code, 400);
    assert_eq!(
        status["message"],
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    // Services also select by spec.clusterIP and spec.type (kube-apiserver
    // 1.32 and later; see services_are_selected_by_cluster_ip_and_type…).
    let (code, status) = get_json(&app, "/api/v1/services?fieldSelector=spec.nodeName%3Dx").await;
    assert_eq!(code, 400);
    assert_eq!(status["message"], "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\", \"spec.clusterIP\", \"spec.type\"");
    let (code, status) = get_json(&app, "/api/v1/endpoints?fieldSelector=spec.clusterIP%3Dx").await;
    assert_eq!(code, 400);
    assert_eq!(status["message"], "\"spec.clusterIP\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"");
    let (code, status) = get_json(&app, "/api/v1/nodes?fieldSelector=status.phase%3DRunning").await;
    assert_eq!(code, 400);
    assert_eq!(status["message"], "field label not supported: status.phase");
}

#[tokio::test]
async fn pages_are_consistent_while_objects_change() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (_, page1) = get_json(&app, "/api/v1/endpoints?limit=2").await;
    assert_eq!(names(&page1), ["echo-headless", "kubernetes"]);
    assert_eq!(page1["metadata"]["remainingItemCount"], 3);
    let token = page1["metadata"]["continue"].as_str().unwrap().to_owned();
    // Between pages: plain-echo is deleted and a new object appears.
    p.handle(
        ResourceKind::Endpoints,
        W::Delete(endpoints("default", "plain-echo", &[], 40)),
    );
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints("default", "new", &[("10.0.3.1", "bj-1")], 41)),
    );
    let (_, page2) = get_json(&app, &format!("/api/v1/endpoints?limit=2&continue={token}")).await;
    assert_eq!(
        names(&page2),
        ["plain-echo", "servicegrid-demo-svc"],
        "page 2 shows the snapshot of page 1"
    );
    assert_eq!(
        page2["metadata"]["resourceVersion"],
        page1["metadata"]["resourceVersion"]
    );
    let token = page2["metadata"]["continue"].as_str().unwrap().to_owned();
    let (_, page3) = get_json(&app, &format!("/api/v1/endpoints?limit=2&continue={token}")).await;
    assert_eq!(names(&page3), ["kube-dns"]);
    assert!(page3["metadata"].get("continue").is_none());
    // A fresh list sees the new state.
    let (_, now) = get_json(&app, "/api/v1/endpoints").await;
    assert_eq!(
        names(&now),
        [
            "echo-headless",
            "kubernetes",
            "new",
            "servicegrid-demo-svc",
            "kube-dns"
        ]
    );
    // resourceVersion=0 ignores limit, as the apiserver's watch cache does.
    let (_, all) = get_json(&app, "/api/v1/endpoints?limit=1&resourceVersion=0").await;
    assert_eq!(names(&all).len(), 5);
}

#[tokio::test]
async fn a_paged_list_is_read_to_its_end_after_the_log_moved_on() {
    // A log of one event: after the changes below it no longer reaches the
    // first page's version. The next pages still read the first page's
    // objects, as kube-apiserver's do within its five minutes of history
    // (a node proxy relisting from a site proxy under churn would otherwise
    // get 410 on every continue, and start over for as long as it lasts).
    let config = CacheConfig {
        log_capacity: 1,
        ..CacheConfig::default()
    };
    let (cache, mut p) = two_sites("bj-1", config);
    let app = app(cache, HandlerSettings::default());
    let (_, page1) = get_json(&app, "/api/v1/endpoints?limit=2").await;
    assert_eq!(names(&page1), ["echo-headless", "kubernetes"]);
    let token = page1["metadata"]["continue"].as_str().unwrap().to_owned();
    for i in 0..4 {
        p.handle(
            ResourceKind::Endpoints,
            W::Apply(endpoints(
                "default",
                &format!("new-{i}"),
                &[("10.0.3.1", "bj-1")],
                50 + i,
            )),
        );
    }
    p.handle(
        ResourceKind::Endpoints,
        W::Delete(endpoints("default", "plain-echo", &[], 60)),
    );
    let (code, page2) =
        get_json(&app, &format!("/api/v1/endpoints?limit=2&continue={token}")).await;
    assert_eq!(code, 200, "{page2}");
    assert_eq!(names(&page2), ["plain-echo", "servicegrid-demo-svc"]);
    assert_eq!(
        page2["metadata"]["resourceVersion"],
        page1["metadata"]["resourceVersion"]
    );
    let token = page2["metadata"]["continue"].as_str().unwrap().to_owned();
    let (code, page3) =
        get_json(&app, &format!("/api/v1/endpoints?limit=2&continue={token}")).await;
    assert_eq!(code, 200, "{page3}");
    assert_eq!(names(&page3), ["kube-dns"]);
    // A list at exactly that version is another read: the log decides, 410.
    let rv = page1["metadata"]["resourceVersion"].as_str().unwrap();
    let (code, _) = get_json(
        &app,
        &format!("/api/v1/endpoints?resourceVersion={rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(code, 410);
}

#[tokio::test]
async fn bad_continue_and_version_arguments_are_rejected_like_the_apiserver() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (code, s) = get_json(
        &app,
        "/api/v1/namespaces/default/endpoints?limit=1&continue=bogus",
    )
    .await;
    assert_eq!((code, s["message"].as_str().unwrap()), (400, "invalid continue token: continue key is not valid: illegal base64 data at input byte 4"));
    let (_, page1) = get_json(&app, "/api/v1/endpoints?limit=1").await;
    let token = page1["metadata"]["continue"].as_str().unwrap();
    let (code, s) = get_json(
        &app,
        &format!("/api/v1/endpoints?limit=1&continue={token}&resourceVersion=5"),
    )
    .await;
    assert_eq!(
        (code, s["message"].as_str().unwrap()),
        (
            400,
            "specifying resource version is not allowed when using continue"
        )
    );
    let (code, s) = get_json(&app, "/api/v1/endpoints?resourceVersion=abc").await;
    assert_eq!(code, 500);
    assert_eq!(s["message"], "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax");
    let (code, s) = get_json(&app, "/api/v1/endpoints?resourceVersionMatch=Exact").await;
    assert_eq!(code, 422);
    assert_eq!(s["message"], "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
    let (code, s) = get_json(
        &app,
        "/api/v1/endpoints?resourceVersion=1&resourceVersionMatch=Exact",
    )
    .await;
    assert_eq!(
        (code, s["reason"].as_str().unwrap()),
        (410, "Expired"),
        "a version from before this process"
    );
}

#[tokio::test]
async fn exact_list_shows_the_past_state() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/namespaces/default/endpoints").await;
    p.handle(
        ResourceKind::Endpoints,
        W::Delete(endpoints("default", "plain-echo", &[], 40)),
    );
    let (code, past) = get_json(
        &app,
        &format!(
            "/api/v1/namespaces/default/endpoints?resourceVersion={rv}&resourceVersionMatch=Exact"
        ),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        names(&past),
        [
            "echo-headless",
            "kubernetes",
            "plain-echo",
            "servicegrid-demo-svc"
        ]
    );
    assert_eq!(past["metadata"]["resourceVersion"], rv.as_str());
}

#[tokio::test(start_paused = true)]
async fn a_future_resource_version_times_out_with_504() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache.clone(), HandlerSettings::default());
    let future = cache.current_rv() + 1000;
    let (code, s) = get_json(&app, &format!("/api/v1/services?resourceVersion={future}")).await;
    assert_eq!(code, 504);
    assert_eq!(
        s["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

#[tokio::test]
async fn get_returns_the_object_or_the_apiservers_404() {
    let (cache, _p) = two_sites("gz-2", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (code, ep) = get_json(
        &app,
        "/api/v1/namespaces/default/endpoints/servicegrid-demo-svc",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        (ep["kind"].as_str(), ep["apiVersion"].as_str()),
        (Some("Endpoints"), Some("v1"))
    );
    assert_eq!(subset_ips(&ep), ["10.0.0.139", "10.0.1.8"]);
    let nodes: Vec<&str> = ep["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["gz-2", "gz-3"], "guangzhou's pods");
    let (code, node) = get_json(&app, "/api/v1/nodes/gz-2").await;
    assert_eq!(
        (code, node["metadata"]["name"].as_str()),
        (200, Some("gz-2"))
    );

    let resp = call(&app, "/api/v1/namespaces/default/services/nope", None).await;
    assert_eq!(resp.status(), 404);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        std::str::from_utf8(&body).unwrap(),
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"services \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"services\"},\"code\":404}\n"
    );
    let (code, s) = get_json(
        &app,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/nope",
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(
        s["message"],
        "endpointslices.discovery.k8s.io \"nope\" not found"
    );
    // Paths that are not cached kinds: no upstream in this test, so 404 NotFound.
    let (code, _) = get_json(&app, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn kubectl_gets_tables_with_the_apiservers_columns() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let resp = call(&app, "/api/v1/namespaces/default/endpoints", Some(accept)).await;
    assert_eq!(resp.headers()["content-type"], "application/json");
    let t: serde_json::Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<_> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(cols, [json!("Name"), json!("Endpoints"), json!("Age")]);
    let demo = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "servicegrid-demo-svc")
        .unwrap();
    assert_eq!(demo["cells"][1], "10.0.0.70:8080,10.0.1.72:8080");
    assert_eq!(demo["object"]["kind"], "PartialObjectMetadata");

    let resp = call(&app, "/api/v1/nodes?includeObject=Bogus", Some(accept)).await;
    assert_eq!(resp.status(), 400);
    let resp = call(&app, "/api/v1/nodes", Some("text/html")).await;
    assert_eq!(resp.status(), 406);
}

#[tokio::test(start_paused = true)]
async fn requests_before_the_first_sync_wait_then_get_503() {
    let (cache, _slot) = sitegrid_cache::new(CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (code, s) = get_json(&app, "/api/v1/services").await;
    assert_eq!(code, 503);
    assert_eq!(s["reason"], "ServiceUnavailable");
}

/// Metadata informers (`as=PartialObjectMetadata`, what kube-rs's
/// metadata watcher and client-go's metadata client send) get what
/// kube-apiserver's response transform makes, instead of 406.
#[tokio::test]
async fn metadata_only_lists_gets_and_watches_as_kube_apiserver_transforms_them() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    const ONE: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let body = |resp: http::Response<sitegrid_proxy::http::Body>| async move {
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice::<Value>(&bytes).unwrap())
    };
    let (_, full) = get_json(&app, "/api/v1/namespaces/default/services").await;
    let (code, list) =
        body(call(&app, "/api/v1/namespaces/default/services", Some(LIST)).await).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(list["metadata"], full["metadata"]);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), full["items"].as_array().unwrap().len());
    for (meta, whole) in items.iter().zip(full["items"].as_array().unwrap()) {
        assert_eq!(
            meta,
            &json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": whole["metadata"]})
        );
    }
    let (code, one) = body(
        call(
            &app,
            "/api/v1/namespaces/default/services/plain-echo",
            Some(ONE),
        )
        .await,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "plain-echo");
    assert!(one.get("spec").is_none());
    // A list asked for as one object, and the reverse: kube-apiserver's 406s.
    let (code, s) = body(call(&app, "/api/v1/nodes", Some(ONE)).await).await;
    assert_eq!(code, 406);
    assert_eq!(
        s["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.NodeList)"
    );
    let (code, s) = body(call(&app, "/api/v1/nodes/bj-1", Some(LIST)).await).await;
    assert_eq!(code, 406);
    assert_eq!(
        s["message"],
        "you requested PartialObjectMetadataList, but the requested object is not a list (*core.Node)"
    );
    // A watch: each event's object, and bookmarks, are PartialObjectMetadata.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let uri = format!("/api/v1/nodes?watch=1&resourceVersion={rv}");
    let mut stream = call(&app, &uri, Some(ONE)).await.into_body();
    let mut bj2 = sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .find(|o| o["kind"] == "Node" && o["metadata"]["name"] == "bj-2")
        .unwrap();
    bj2["metadata"]["labels"]["rack"] = json!("r9");
    bj2["metadata"]["resourceVersion"] = json!("900");
    p.handle(
        ResourceKind::Nodes,
        W::Apply(sitegrid_cache::UpstreamObject::from_json(&bj2.to_string()).unwrap()),
    );
    let f = frames(&mut stream, 1).await;
    assert_eq!(f[0]["type"], "MODIFIED");
    assert_eq!(f[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(f[0]["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(f[0]["object"]["metadata"]["labels"]["rack"], "r9");
    assert!(f[0]["object"].get("status").is_none());
}

/// `--cache-compression=false` keeps encodings as they are: every list, in
/// JSON and in protobuf, and a label-selected one, is the same as with
/// compression, but for the versions each cache numbers itself.
#[tokio::test]
async fn without_cache_compression_the_same_objects_are_served() {
    let served = |compress: bool| async move {
        let (cache, _p) = two_sites(
            "bj-1",
            CacheConfig {
                compress,
                ..CacheConfig::default()
            },
        );
        let app = app(cache, HandlerSettings::default());
        let mut out = Vec::new();
        for uri in [
            "/api/v1/services",
            "/api/v1/endpoints",
            "/apis/discovery.k8s.io/v1/endpointslices",
            "/api/v1/nodes?fieldSelector=metadata.name%3Dbj-1",
            "/apis/discovery.k8s.io/v1/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dservicegrid-demo-svc",
        ] {
            for accept in [None, Some("application/vnd.kubernetes.protobuf")] {
                let resp = call(&app, uri, accept).await;
                assert_eq!(resp.status(), 200, "{uri}");
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                out.push((uri, accept, body));
            }
        }
        out
    };
    let (packed, plain) = (served(true).await, served(false).await);
    assert_eq!(packed.len(), plain.len());
    for ((uri, accept, a), (_, _, b)) in packed.iter().zip(&plain) {
        assert!(!a.is_empty(), "{uri} {accept:?}");
        // Both caches start their versions at the same clock reading or
        // later: compare the objects without them.
        if accept.is_none() {
            let strip = |bytes: &[u8]| {
                let mut v: Value = serde_json::from_slice(bytes).unwrap();
                v["metadata"] = json!({});
                for item in v["items"].as_array_mut().unwrap() {
                    item["metadata"]["resourceVersion"] = json!("");
                }
                v
            };
            assert_eq!(strip(a), strip(b), "{uri}");
        } else {
            assert_eq!(a.len(), b.len(), "{uri} in protobuf");
        }
    }
}

/// kube-proxy 1.32 and later list and watch Services with
/// `fieldSelector=spec.clusterIP!=None` (headless Services program no
/// rules); `spec.type` is selectable too, as in kube-apiserver.
#[tokio::test]
async fn services_are_selected_by_cluster_ip_and_type_as_kube_proxy_asks() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (code, all) = get_json(&app, "/api/v1/services").await;
    assert_eq!(code, 200);
    let uri = format!("/api/v1/services?fieldSelector=spec.clusterIP%21%3DNone&{KUBE_PROXY_LS}&limit=500&resourceVersion=0");
    let (code, kube_proxy) = get_json(&app, &uri).await;
    assert_eq!(code, 200, "{kube_proxy}");
    let headless: Vec<String> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["spec"]["clusterIP"] == "None")
        .map(|s| s["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        headless,
        ["echo-headless"],
        "the sample has one headless Service"
    );
    let mut want = names(&all);
    want.retain(|n| !headless.contains(n));
    assert_eq!(names(&kube_proxy), want);
    // Equality on the other field, and on the cluster IP itself.
    let (_, by_type) = get_json(&app, "/api/v1/services?fieldSelector=spec.type%3DClusterIP").await;
    assert_eq!(
        names(&by_type).len(),
        all["items"].as_array().unwrap().len()
    );
    let (_, one) = get_json(
        &app,
        "/api/v1/services?fieldSelector=spec.clusterIP%3D10.96.33.231",
    )
    .await;
    assert_eq!(names(&one), ["servicegrid-demo-svc"]);
    // A field Services do not have is refused, as kube-apiserver does.
    let (code, refused) = get_json(&app, "/api/v1/services?fieldSelector=spec.nodeName%3Dx").await;
    assert_eq!(code, 400, "{refused}");
}

/// A counter of the cache's metrics as `/metrics` shows it.
fn cache_metric(cache: &sitegrid_cache::Cache, series: &str) -> u64 {
    let mut registry = prometheus_client::registry::Registry::with_prefix("sitegrid_proxy");
    cache.register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    metric(&text, series) as u64
}

/// The body of a LIST as it was sent.
async fn list_bytes(
    app: &sitegrid_proxy::gateway::Gateway,
    uri: &str,
    accept: Option<&str>,
) -> Bytes {
    let resp = call(app, uri, accept).await;
    assert_eq!(resp.status(), 200, "{uri}");
    resp.into_body().collect().await.unwrap().to_bytes()
}

#[tokio::test]
async fn lists_asked_together_are_made_once_and_none_outlives_its_version() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache.clone(), HandlerSettings::default());
    let made = r#"sitegrid_proxy_lists_encoded_total{resource="endpoints"}"#;
    let shared = r#"sitegrid_proxy_lists_shared_total{resource="endpoints"}"#;
    // Twenty clients relisting at once, as a site's kube-proxies do when
    // their proxy restarts: the first list sent as it is made, the second
    // made whole for the 18 others, every client the same bytes.
    let lists = futures::future::join_all((0..20).map(|_| {
        let app = app.clone();
        async move { list_bytes(&app, "/api/v1/endpoints?resourceVersion=0", None).await }
    }))
    .await;
    assert!(lists.iter().all(|l| *l == lists[0]));
    assert_eq!(names(&serde_json::from_slice(&lists[0]).unwrap()).len(), 5);
    assert_eq!(
        (cache_metric(&cache, made), cache_metric(&cache, shared)),
        (2, 18)
    );
    // Another question is another list: protobuf, a namespace, a selector.
    for (uri, accept) in [
        (
            "/api/v1/endpoints",
            Some("application/vnd.kubernetes.protobuf"),
        ),
        ("/api/v1/namespaces/default/endpoints", None),
        ("/api/v1/endpoints?labelSelector=app%3Dnone", None),
    ] {
        let body = list_bytes(&app, uri, accept).await;
        assert_ne!(body, lists[0], "{uri} {accept:?}");
    }
    assert_eq!(cache_metric(&cache, made), 5);
    assert_eq!(
        cache_metric(
            &cache,
            r#"sitegrid_proxy_cache_list_bytes{resource="endpoints"}"#
        ),
        lists[0].len() as u64
    );
    // A change: the next list shows it, at its version.
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints("default", "new", &[("10.0.3.1", "bj-1")], 41)),
    );
    let rv = cache.store(ResourceKind::Endpoints).last_rv().to_string();
    let sent = list_bytes(&app, "/api/v1/endpoints", None).await;
    let now: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(now["metadata"]["resourceVersion"], rv);
    assert!(names(&now).contains(&"new".to_owned()));
    assert_eq!(list_bytes(&app, "/api/v1/endpoints", None).await, sent);
    assert_eq!(cache_metric(&cache, made), 7);
    assert_eq!(
        cache_metric(
            &cache,
            r#"sitegrid_proxy_cache_list_bytes{resource="endpoints"}"#
        ),
        sent.len() as u64,
        "only the list of the new version is kept"
    );
}

#[tokio::test]
async fn a_list_not_older_than_a_coming_version_waits_for_it_past_the_kept_one() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache.clone(), HandlerSettings::default());
    // Asked twice: the list of this version is kept.
    for _ in 0..2 {
        let (_, before) = get_json(&app, "/api/v1/endpoints").await;
        assert!(!names(&before).contains(&"new".to_owned()));
    }
    let next = cache.current_rv() + 1;
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { get_json(&app, &format!("/api/v1/endpoints?resourceVersion={next}")).await }
    });
    tokio::task::yield_now().await;
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints("default", "new", &[("10.0.3.1", "bj-1")], 41)),
    );
    let (code, after) = waiting.await.unwrap();
    assert_eq!(code, 200);
    assert_eq!(after["metadata"]["resourceVersion"], next.to_string());
    assert!(names(&after).contains(&"new".to_owned()));
}
