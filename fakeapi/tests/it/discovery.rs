//! Discovery documents, as kubectl and client-go read them.

use crate::common::{start, start_default};
use serde_json::{json, Value};
use sitegrid_fakeapi::ApiServerConfig;

fn resource<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {list}"))
}

#[tokio::test]
async fn core_and_group_discovery() {
    let h = start_default().await;
    let api = h.client.get("/api").await.json();
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let v1 = h.client.get("/api/v1").await.json();
    assert_eq!(v1["kind"], "APIResourceList");
    assert_eq!(v1["groupVersion"], "v1");
    for (name, short, namespaced, kind) in [
        ("services", "svc", true, "Service"),
        ("endpoints", "ep", true, "Endpoints"),
        ("nodes", "no", false, "Node"),
        ("pods", "po", true, "Pod"),
        ("configmaps", "cm", true, "ConfigMap"),
        ("namespaces", "ns", false, "Namespace"),
        ("events", "ev", true, "Event"),
    ] {
        let r = resource(&v1, name);
        assert_eq!(r["shortNames"], json!([short]), "{name}");
        assert_eq!(r["namespaced"], namespaced, "{name}");
        assert_eq!(r["kind"], kind);
        let verbs: Vec<&str> = r["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for verb in [
            "get", "list", "watch", "create", "update", "patch", "delete",
        ] {
            assert!(verbs.contains(&verb), "{name} {verb}");
        }
    }
    assert_eq!(resource(&v1, "services")["singularName"], "service");
    let apis = h.client.get("/apis").await.json();
    assert_eq!(apis["kind"], "APIGroupList");
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        [
            "discovery.k8s.io",
            "events.k8s.io",
            "apps",
            "superedge.io",
            "storage.k8s.io",
            "node.k8s.io",
            "coordination.k8s.io",
            "site.superedge.io"
        ]
    );
    assert_eq!(
        apis["groups"][0]["preferredVersion"],
        json!({"groupVersion":"discovery.k8s.io/v1","version":"v1"})
    );
    let group = h.client.get("/apis/discovery.k8s.io").await.json();
    assert_eq!(group["kind"], "APIGroup");
    let es = h.client.get("/apis/discovery.k8s.io/v1").await.json();
    assert_eq!(es["groupVersion"], "discovery.k8s.io/v1");
    assert_eq!(resource(&es, "endpointslices")["kind"], "EndpointSlice");
    let ev = h.client.get("/apis/events.k8s.io/v1").await.json();
    assert_eq!(resource(&ev, "events")["namespaced"], true);
    let version = h.client.get("/version").await.json();
    assert!(version["gitVersion"]
        .as_str()
        .unwrap()
        .starts_with("v1.20."));
    // What sitegrid-dnsd reads: StatefulSets and the grids, as their CRDs serve them.
    let apps = h.client.get("/apis/apps/v1").await.json();
    assert_eq!(
        resource(&apps, "statefulsets")["shortNames"],
        json!(["sts"])
    );
    let grids = h.client.get("/apis/superedge.io/v1").await.json();
    assert_eq!(
        resource(&grids, "statefulsetgrids")["kind"],
        "StatefulSetGrid"
    );
    assert_eq!(resource(&grids, "servicegrids")["namespaced"], true);
    assert_eq!(
        resource(&grids, "deploymentgrids")["shortNames"],
        json!(["dg"])
    );
    // What `kubectl sitegrid sites` reads: site-manager's cluster-scoped kinds.
    let sites = h
        .client
        .get("/apis/site.superedge.io/v1alpha2")
        .await
        .json();
    assert_eq!(resource(&sites, "nodeunits")["namespaced"], false);
    assert_eq!(resource(&sites, "nodegroups")["kind"], "NodeGroup");
    assert_eq!(h.client.get("/apis/batch/v1").await.code(), 404);
    assert_eq!(h.client.get("/healthz").await.body, "ok");
}

#[tokio::test]
async fn aggregated_discovery_requests_get_plain_json() {
    let h = start_default().await;
    let req = hyper::Request::builder()
        .uri(format!("{}/apis", h.handle.url()))
        .header("accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    // Not the aggregated type: clients fall back to per-group discovery.
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["kind"], "APIGroupList");
}

#[tokio::test]
async fn only_the_configured_endpointslice_version_is_served() {
    let h = start(ApiServerConfig {
        endpointslice_version: "v1beta1",
        ..ApiServerConfig::default()
    })
    .await;
    h.server
        .load(sitegrid_fakeapi::sample::two_sites("v1beta1"));
    let apis = h.client.get("/apis").await.json();
    assert_eq!(
        apis["groups"][0]["versions"],
        json!([{"groupVersion":"discovery.k8s.io/v1beta1","version":"v1beta1"}])
    );
    assert_eq!(h.client.get("/apis/discovery.k8s.io/v1").await.code(), 404);
    let gone = h
        .client
        .get("/apis/discovery.k8s.io/v1/endpointslices")
        .await;
    assert_eq!(gone.code(), 404);
    assert_eq!(
        gone.json()["message"],
        "the server could not find the requested resource"
    );
    let list = h
        .client
        .get("/apis/discovery.k8s.io/v1beta1/endpointslices")
        .await
        .json();
    assert_eq!(list["kind"], "EndpointSliceList");
    assert_eq!(list["apiVersion"], "discovery.k8s.io/v1beta1");
    let demo = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc")
        .unwrap();
    let hosts: Vec<&str> = demo["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["topology"]["kubernetes.io/hostname"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["bj-1", "bj-3", "gz-2", "gz-3"]);
    // A v1 object written in-process is converted to the served version.
    let v1 = json!({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"x","namespace":"default"},
        "addressType":"IPv4","endpoints":[{"addresses":["10.0.0.5"],"nodeName":"gz-1","zone":"guangzhou"}],"ports":[]});
    let stored = h.server.apply(v1);
    assert_eq!(stored["apiVersion"], "discovery.k8s.io/v1beta1");
    assert_eq!(
        stored["endpoints"][0]["topology"]["kubernetes.io/hostname"],
        "gz-1"
    );
}

#[tokio::test]
async fn a_cluster_without_the_crds_serves_neither_grids_nor_sites() {
    let h = start(ApiServerConfig {
        crds: false,
        ..ApiServerConfig::default()
    })
    .await;
    let apis = h.client.get("/apis").await.json();
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        [
            "discovery.k8s.io",
            "events.k8s.io",
            "apps",
            "storage.k8s.io",
            "node.k8s.io",
            "coordination.k8s.io"
        ]
    );
    for path in [
        "/apis/superedge.io/v1",
        "/apis/superedge.io/v1/namespaces/default/deploymentgrids",
        "/apis/site.superedge.io/v1alpha2/nodeunits",
    ] {
        assert_eq!(h.client.get(path).await.code(), 404, "{path}");
    }
    assert_eq!(h.client.get("/api/v1/nodes").await.code(), 200);
}
