//! The releases the server plays (1.20, 1.31, 1.35): `/version`, discovery,
//! which resources exist, Service field selectors and the shapes of the
//! two-site world. Each expectation cites the source it comes from in a
//! comment; the WatchList protocol is in `watch_list.rs`, ServiceCIDRs in
//! `servicecidrs.rs`.

use serde_json::{json, Value};
use sitegrid_fakeapi::{
    sample::WORLD, ApiServer, ApiServerConfig, FeatureGates, KubernetesVersion,
};

use crate::common::{start, start_release, NOT_FOUND_RESOURCE};

use KubernetesVersion::{V1_20, V1_31, V1_35};

fn names(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn version_is_the_release() {
    for (version, git, minor) in [
        (V1_20, "v1.20.2", "20"),
        (V1_31, "v1.31.0", "31"),
        (V1_35, "v1.35.0", "35"),
    ] {
        let h = start(ApiServerConfig::for_version(version)).await;
        let v = h.client.get("/version").await.json();
        assert_eq!(
            (v["gitVersion"].as_str(), v["minor"].as_str()),
            (Some(git), Some(minor))
        );
        // version.Info has the emulation fields from apimachinery v0.33 on.
        assert_eq!(v.get("emulationMinor").is_some(), version == V1_35, "{v}");
    }
}

#[tokio::test]
async fn discovery_lists_what_each_release_serves() {
    let groups = |apis: &Value| -> Vec<String> {
        apis["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // 1.20 as before: no networking.k8s.io of ours; 1.31 without the gate likewise.
    for version in [V1_20, V1_31] {
        let h = start(ApiServerConfig::for_version(version)).await;
        let apis = h.client.get("/apis").await.json();
        assert!(
            !groups(&apis).contains(&"networking.k8s.io".to_owned()),
            "{version}"
        );
    }
    let h = start(ApiServerConfig::for_version(V1_35)).await;
    let apis = h.client.get("/apis").await.json();
    assert!(groups(&apis).contains(&"networking.k8s.io".to_owned()));
    let group = h.client.get("/apis/networking.k8s.io").await.json();
    assert_eq!(
        group["preferredVersion"],
        json!({"groupVersion": "networking.k8s.io/v1", "version": "v1"})
    );
    assert_eq!(group["versions"].as_array().unwrap().len(), 1);
    let v1 = h.client.get("/apis/networking.k8s.io/v1").await.json();
    let entry = |name: &str| {
        v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {v1}"))
    };
    let cidrs = entry("servicecidrs");
    assert_eq!(
        (&cidrs["kind"], &cidrs["namespaced"], &cidrs["singularName"]),
        (&json!("ServiceCIDR"), &json!(false), &json!("servicecidr"))
    );
    for verb in [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ] {
        assert!(
            cidrs["verbs"].as_array().unwrap().contains(&json!(verb)),
            "{verb}"
        );
    }
    assert_eq!(
        entry("servicecidrs/status")["verbs"],
        json!(["get", "patch", "update"])
    );
    // 1.35 serves EndpointSlices in v1 only.
    let es = h.client.get("/apis/discovery.k8s.io").await.json();
    assert_eq!(
        es["versions"],
        json!([{"groupVersion": "discovery.k8s.io/v1", "version": "v1"}])
    );
    assert_eq!(
        h.client.get("/apis/discovery.k8s.io/v1beta1").await.code(),
        404
    );
    let root = h.client.get("/").await.json();
    assert!(root["paths"]
        .as_array()
        .unwrap()
        .contains(&json!("/apis/networking.k8s.io/v1")));
}

#[tokio::test]
async fn servicecidrs_are_unknown_to_1_20_and_to_1_31_without_the_gate() {
    for version in [V1_20, V1_31] {
        let h = start_release(version).await;
        for path in [
            "/apis/networking.k8s.io/v1/servicecidrs",
            "/apis/networking.k8s.io/v1beta1/servicecidrs?limit=500&resourceVersion=0",
            "/apis/networking.k8s.io/v1/servicecidrs?watch=1&allowWatchBookmarks=true",
            "/apis/networking.k8s.io/v1/servicecidrs/kubernetes",
        ] {
            let r = h.client.get(path).await;
            assert_eq!(r.code(), 404, "{version} {path}");
            assert_eq!(
                std::str::from_utf8(&r.body).unwrap().trim_end(),
                NOT_FOUND_RESOURCE
            );
        }
    }
}

#[tokio::test]
async fn configurations_a_release_refuses() {
    let refused = |config: ApiServerConfig| ApiServer::try_new(config).unwrap_err().to_string();
    assert_eq!(
        refused(ApiServerConfig {
            feature_gates: FeatureGates {
                watch_list: Some(true),
                ..FeatureGates::default()
            },
            ..ApiServerConfig::default()
        }),
        "unrecognized feature gate: WatchList (it does not exist in Kubernetes 1.20)"
    );
    assert_eq!(
        refused(ApiServerConfig {
            feature_gates: FeatureGates {
                multi_cidr_service_allocator: Some(false),
                ..FeatureGates::default()
            },
            ..ApiServerConfig::for_version(V1_35)
        }),
        "cannot set feature gate MultiCIDRServiceAllocator to false, feature is locked to true"
    );
    assert!(refused(ApiServerConfig {
        endpointslice_version: "v1beta1",
        ..ApiServerConfig::for_version(V1_31)
    })
    .contains("v1beta1 was removed in 1.25"));
}

/// kube-proxy 1.32+'s Services request (the note §1.3 row 4).
const KUBE_PROXY_SERVICES: &str = "/api/v1/services?fieldSelector=spec.clusterIP%21%3DNone\
    &labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name\
    &limit=500&resourceVersion=0";

#[tokio::test]
async fn service_field_selectors_per_release() {
    // 1.20 has no field label conversion for Services (reference §8).
    let h = start_release(V1_20).await;
    let r = h.client.get(KUBE_PROXY_SERVICES).await;
    assert_eq!(r.code(), 400);
    assert_eq!(
        std::str::from_utf8(&r.body).unwrap().trim_end(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"\"spec.clusterIP\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"","reason":"BadRequest","code":400}"#
    );
    let every: Vec<String> = {
        let mut v: Vec<String> = WORLD.services.iter().map(|s| s.name.clone()).collect();
        v.push("kubernetes".into());
        v.sort();
        v
    };
    for version in [V1_31, V1_35] {
        let h = start_release(version).await;
        let r = h.client.get(KUBE_PROXY_SERVICES).await;
        assert_eq!(r.code(), 200, "{version}");
        let headless: Vec<&str> = WORLD
            .services
            .iter()
            .filter(|s| s.cluster_ip == "None")
            .map(|s| s.name.as_str())
            .collect();
        let expected: Vec<String> = every
            .iter()
            .filter(|n| !headless.contains(&n.as_str()))
            .cloned()
            .collect();
        assert_eq!(names(&r.json()), expected, "{version}");
        let only = h
            .client
            .get("/api/v1/services?fieldSelector=spec.clusterIP%3DNone")
            .await;
        assert_eq!(names(&only.json()), headless, "{version}");
        let typed = h
            .client
            .get("/api/v1/services?fieldSelector=spec.type%3DClusterIP")
            .await;
        assert_eq!(names(&typed.json()), every, "{version}");
        let r = h
            .client
            .get("/api/v1/services?fieldSelector=spec.selector%3Dx")
            .await;
        assert_eq!(r.code(), 400);
        assert_eq!(
            r.json()["message"],
            "field label not supported: spec.selector"
        );
        // Other kinds keep the generic conversion.
        let r = h
            .client
            .get("/apis/discovery.k8s.io/v1/endpointslices?fieldSelector=addressType%3DIPv4")
            .await;
        assert_eq!(
            r.json()["message"],
            "\"addressType\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
    }
}

#[tokio::test]
async fn a_services_watch_sees_only_what_its_field_selector_selects() {
    let h = start_release(V1_35).await;
    let rv = h.server.resource_version();
    let mut w = h
        .client
        .watch(&format!(
            "/api/v1/services?watch=1&resourceVersion={rv}&fieldSelector=spec.clusterIP%21%3DNone"
        ))
        .await;
    let svc = |name: &str, ip: &str| {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"clusterIP": ip, "ports": [{"port": 80}], "type": "ClusterIP"}})
    };
    h.server.apply(svc("headless-too", "None"));
    h.server.apply(svc("routed", "10.96.9.9"));
    let ev = w.event().await;
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("routed"))
    );
}

fn find<'a>(items: &'a [Value], name: &str) -> &'a Value {
    items
        .iter()
        .find(|i| {
            i["metadata"]["name"] == name
                || i["metadata"]["labels"]["kubernetes.io/service-name"] == name
        })
        .unwrap_or_else(|| panic!("{name}"))
}

async fn items(h: &crate::common::Harness, path: &str) -> Vec<Value> {
    h.client.get(path).await.json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn the_world_carries_the_fields_of_its_release() {
    let h = start_release(V1_35).await;
    let services = items(&h, "/api/v1/services").await;
    let plain = &find(&services, "plain-echo")["spec"];
    // Dual-stack and internalTrafficPolicy defaulting; the world's trafficDistribution.
    assert_eq!(plain["clusterIPs"], json!(["10.96.120.15"]));
    assert_eq!(plain["ipFamilies"], json!(["IPv4"]));
    assert_eq!(plain["ipFamilyPolicy"], "SingleStack");
    assert_eq!(plain["internalTrafficPolicy"], "Cluster");
    assert_eq!(plain["trafficDistribution"], "PreferClose");
    assert_eq!(
        find(&services, "kube-dns")["spec"]["trafficDistribution"],
        "PreferSameNode"
    );
    assert_eq!(
        find(&services, "echo-headless")["spec"]["clusterIPs"],
        json!(["None"])
    );
    let slices = items(&h, "/apis/discovery.k8s.io/v1/endpointslices").await;
    for ep in find(&slices, "plain-echo")["endpoints"].as_array().unwrap() {
        assert_eq!(
            ep["conditions"],
            json!({"ready": true, "serving": true, "terminating": false})
        );
        assert_eq!(ep["hints"], json!({"forZones": [{"name": ep["zone"]}]}));
    }
    let dns = &find(&slices, "kube-dns")["endpoints"][0];
    assert_eq!(dns["hints"]["forNodes"], json!([{"name": "gz-2"}]));
    assert_eq!(dns["hints"]["forZones"], json!([{"name": "guangzhou"}]));

    // 1.31: trafficDistribution exists, PreferSameNode does not (forNodes: 1.33+).
    let h = start_release(V1_31).await;
    let services = items(&h, "/api/v1/services").await;
    assert_eq!(
        find(&services, "plain-echo")["spec"]["trafficDistribution"],
        "PreferClose"
    );
    assert!(find(&services, "kube-dns")["spec"]
        .get("trafficDistribution")
        .is_none());
    let slices = items(&h, "/apis/discovery.k8s.io/v1/endpointslices").await;
    assert!(find(&slices, "kube-dns")["endpoints"][0]
        .get("hints")
        .is_none());
    assert!(find(&slices, "plain-echo")["endpoints"][0]["hints"]["forZones"].is_array());

    // 1.20 stays as it was: none of the newer fields.
    let h = start_release(V1_20).await;
    let services = items(&h, "/api/v1/services").await;
    for svc in &services {
        for field in [
            "ipFamilies",
            "ipFamilyPolicy",
            "internalTrafficPolicy",
            "trafficDistribution",
        ] {
            assert!(svc["spec"].get(field).is_none(), "{field} in {svc}");
        }
    }
    let slices = items(&h, "/apis/discovery.k8s.io/v1/endpointslices").await;
    assert!(slices.iter().all(|s| s["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e.get("hints").is_none())));
}
