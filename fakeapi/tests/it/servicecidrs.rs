//! ServiceCIDRs (`networking.k8s.io`, cluster-scoped) where a release serves
//! them: 1.31 in v1beta1 behind MultiCIDRServiceAllocator, 1.35 in v1. The
//! 404s where they are not served are in `releases.rs`. Also the real
//! kubectl 1.33 (`get servicecidrs`, bounded `--watch`) against 1.35.

use std::time::Duration;

use serde_json::{json, Value};
use sitegrid_fakeapi::{
    kubectl::Kubectl, sample::WORLD, ApiServerConfig, FeatureGates, KubernetesVersion,
};

use crate::common::{start_configured, start_release, summary, Harness, WAIT};

/// 1.31 with the gate on, 1.35: the served version of each.
async fn serving() -> Vec<(Harness, &'static str)> {
    let gated = ApiServerConfig {
        feature_gates: FeatureGates {
            multi_cidr_service_allocator: Some(true),
            ..FeatureGates::default()
        },
        ..ApiServerConfig::for_version(KubernetesVersion::V1_31)
    };
    vec![
        (start_configured(gated).await, "v1beta1"),
        (start_release(KubernetesVersion::V1_35).await, "v1"),
    ]
}

fn cidr(name: &str, version: &str, range: &str) -> Value {
    json!({"apiVersion": format!("networking.k8s.io/{version}"), "kind": "ServiceCIDR",
           "metadata": {"name": name}, "spec": {"cidrs": [range]}})
}

#[tokio::test]
async fn list_and_get_the_default_service_cidr() {
    for (h, version) in serving().await {
        let base = format!("/apis/networking.k8s.io/{version}/servicecidrs");
        let list = h
            .client
            .get(&format!("{base}?limit=500&resourceVersion=0"))
            .await
            .json();
        assert_eq!(list["kind"], "ServiceCIDRList");
        assert_eq!(list["apiVersion"], format!("networking.k8s.io/{version}"));
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{list}");
        let default = &items[0];
        assert_eq!(default["metadata"]["name"], "kubernetes");
        assert!(default["metadata"].get("namespace").is_none());
        assert_eq!(default["spec"]["cidrs"], json!([WORLD.service_cidr]));
        let ready = &default["status"]["conditions"][0];
        assert_eq!(
            (&ready["type"], &ready["status"]),
            (&json!("Ready"), &json!("True"))
        );
        let got = h.client.get(&format!("{base}/kubernetes")).await.json();
        assert_eq!(got["kind"], "ServiceCIDR");
        assert_eq!(got["spec"], default["spec"]);
        let missing = h.client.get(&format!("{base}/nope")).await;
        assert_eq!(missing.code(), 404);
        assert_eq!(
            missing.json()["message"],
            "servicecidrs.networking.k8s.io \"nope\" not found"
        );
        // The other networking version is not served.
        let other = if version == "v1" { "v1beta1" } else { "v1" };
        let path = format!("/apis/networking.k8s.io/{other}/servicecidrs");
        assert_eq!(h.client.get(&path).await.code(), 404);
    }
}

#[tokio::test]
async fn create_watch_and_delete_service_cidrs() {
    for (h, version) in serving().await {
        let base = format!("/apis/networking.k8s.io/{version}/servicecidrs");
        let rv = h.server.resource_version();
        let mut w = h
            .client
            .watch(&format!("{base}?watch=1&resourceVersion={rv}"))
            .await;
        let created = h
            .client
            .post(&base, &cidr("extra", version, "10.100.0.0/24"))
            .await;
        assert_eq!(
            created.code(),
            201,
            "{}",
            String::from_utf8_lossy(&created.body)
        );
        let ev = w.event().await;
        assert_eq!(summary(&ev).0, "ADDED");
        assert_eq!(ev["object"]["spec"]["cidrs"], json!(["10.100.0.0/24"]));
        assert_eq!(
            ev["object"]["apiVersion"],
            format!("networking.k8s.io/{version}")
        );
        let deleted = h.client.delete(&format!("{base}/extra")).await;
        assert_eq!(deleted.code(), 200);
        assert_eq!(summary(&w.event().await).0, "DELETED");
        // Only ServiceCIDRs of the served version are accepted.
        let other = if version == "v1" { "v1beta1" } else { "v1" };
        let wrong = h
            .client
            .post(&base, &cidr("x", other, "10.101.0.0/24"))
            .await;
        assert_eq!(wrong.code(), 400);
    }
}

/// Polls (bounded by [`WAIT`]) until `done` holds for the server.
async fn until(h: &Harness, what: &str, done: impl Fn(&Harness) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done(h) {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Watch events the server has written for servicecidrs, in any form.
fn cidr_watch_events(h: &Harness) -> u64 {
    h.server
        .egress()
        .resources
        .get("servicecidrs")
        .map_or(0, |e| {
            e.full.watch_events + e.metadata.watch_events + e.table.watch_events
        })
}

#[tokio::test]
async fn kubectl_1_33_gets_and_watches_service_cidrs_of_1_35() {
    let h = start_release(KubernetesVersion::V1_35).await;
    let kubectl = Kubectl::of_release(h.handle.url(), "1.33");
    let got = kubectl.ok_async(&["get", "servicecidrs"]).await;
    let header: Vec<&str> = got.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[0], "NAME", "{got}");
    assert!(got.lines().any(|l| l.starts_with("kubernetes ")), "{got}");
    let json: Value = serde_json::from_str(
        &kubectl
            .ok_async(&["get", "servicecidr", "kubernetes", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(json["apiVersion"], "networking.k8s.io/v1");
    assert_eq!(json["spec"]["cidrs"], json!([WORLD.service_cidr]));

    // --watch: the current one, then one created while it watches; the
    // server ends the watch, and with it kubectl.
    let watcher = kubectl.clone();
    let run = tokio::spawn(async move {
        watcher
            .run_async(&["get", "servicecidrs", "--watch"], "")
            .await
    });
    until(&h, "kubectl opens its watch", |h| {
        h.server.open_watches().contains_key("servicecidrs")
    })
    .await;
    let before = cidr_watch_events(&h);
    h.server.apply(cidr("extra", "v1", "10.100.0.0/24"));
    until(&h, "the ADDED event is written", |h| {
        cidr_watch_events(h) > before
    })
    .await;
    h.server.disconnect_watches();
    let printed = tokio::time::timeout(WAIT, run)
        .await
        .expect("kubectl ended")
        .unwrap();
    assert!(printed.success, "{}", printed.stderr);
    let names: Vec<&str> = printed
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, ["NAME", "kubernetes", "extra"], "{}", printed.stdout);
}
