//! The WatchList protocol (`sendInitialEvents`) per release, as client-go's
//! reflector uses it (the note §3.2, §3.4): 1.35 serves it, 1.31 refuses it
//! unless its gate is on, 1.20 refuses it as this server always did. The
//! rules are apimachinery's `ValidateListOptions` and
//! `SetListOptionsDefaults` and the watch cache's (apiserver v0.35.0).

use serde_json::{json, Value};
use sitegrid_fakeapi::{ApiServerConfig, FeatureGates, KubernetesVersion};

use crate::common::{start_configured, start_release, summary, Watch};

use KubernetesVersion::{V1_20, V1_31, V1_35};

/// kube-proxy 1.35's first EndpointSlice request (the note §1.4 row 3).
const KUBE_PROXY_SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices?allowWatchBookmarks=true\
    &labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name\
    &resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeout=7m31s&timeoutSeconds=451&watch=true";

/// The events up to and including the first BOOKMARK.
async fn until_bookmark(w: &mut Watch) -> (Vec<Value>, Value) {
    let mut added = Vec::new();
    loop {
        let ev = w.event().await;
        if ev["type"] == "BOOKMARK" {
            return (added, ev);
        }
        assert_eq!(ev["type"], "ADDED", "{ev}");
        added.push(ev);
    }
}

fn invalid(body: &Value) -> Vec<String> {
    assert_eq!(body["code"], 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn release_1_35_streams_the_state_then_the_end_bookmark_then_changes() {
    let h = start_release(V1_35).await;
    let list = h
        .client
        .get("/apis/discovery.k8s.io/v1/endpointslices?labelSelector=%21service.kubernetes.io%2Fheadless")
        .await
        .json();
    let mut w = h.client.watch(KUBE_PROXY_SLICES).await;
    let (added, bookmark) = until_bookmark(&mut w).await;
    let mut got: Vec<&str> = added
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    got.sort();
    let mut want: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    want.sort();
    assert_eq!(got, want, "the initial events are the selected objects");
    // The end mark: the list's resourceVersion, the annotation, and (1.35,
    // apimachinery's omitzero) no null creationTimestamp.
    assert_eq!(
        bookmark["object"],
        json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
               "metadata": {"resourceVersion": list["metadata"]["resourceVersion"],
                            "annotations": {"k8s.io/initial-events-end": "true"}}})
    );
    // The same stream goes on with the changes.
    let mut slice = added[0]["object"].clone();
    slice["endpoints"][0]["conditions"]["ready"] = json!(false);
    h.server.apply(slice);
    let ev = w.event().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(
        ev["object"]["metadata"]["name"],
        added[0]["object"]["metadata"]["name"]
    );
}

#[tokio::test]
async fn watch_list_resource_versions() {
    let h = start_release(V1_35).await;
    let base = "/apis/networking.k8s.io/v1/servicecidrs?watch=1&allowWatchBookmarks=true\
                &sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
    let now = h.server.resource_version();
    // "", "0" and an RV the server has reached: the current state.
    for rv in [
        "",
        "&resourceVersion=",
        "&resourceVersion=0",
        "&resourceVersion=1",
        &format!("&resourceVersion={now}"),
    ] {
        let mut w = h.client.watch(&format!("{base}{rv}")).await;
        let (added, bookmark) = until_bookmark(&mut w).await;
        assert_eq!(added.len(), 1, "{rv}");
        assert_eq!(
            bookmark["object"]["metadata"]["resourceVersion"],
            now.to_string(),
            "{rv}"
        );
    }
    // An RV the server has not reached: the watch cache's 504, in the stream.
    let mut w = h
        .client
        .watch(&format!("{base}&resourceVersion={}", now + 10))
        .await;
    let ev = w.event().await;
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 504);
    assert_eq!(
        ev["object"]["message"],
        format!(
            "Timeout: Too large resource version: {}, current: {now}",
            now + 10
        )
    );
    assert!(w.next().await.is_none());
}

#[tokio::test]
async fn watch_list_without_bookmarks_gets_no_end_mark() {
    // The watch cache marks the end only for watchers that allow bookmarks
    // (cacher.go isListWatchRequest); the options are not refused.
    let h = start_release(V1_35).await;
    let mut w = h
        .client
        .watch("/apis/networking.k8s.io/v1/servicecidrs?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
        .await;
    assert_eq!(w.event().await["type"], "ADDED");
    assert!(w.quiet_for(std::time::Duration::from_millis(300)).await);
}

#[tokio::test]
async fn release_1_35_defaults_a_legacy_watch_to_a_watch_list() {
    // SetListOptionsDefaults: a watch from "" or "0" that says nothing of
    // initial events is a watch-list, so bookmark-allowing clients get the end mark.
    let h = start_release(V1_35).await;
    let mut w = h
        .client
        .watch("/api/v1/nodes?watch=1&resourceVersion=0&allowWatchBookmarks=true")
        .await;
    let (added, bookmark) = until_bookmark(&mut w).await;
    assert_eq!(added.len(), 6);
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // 1.20 and 1.31: the synthetic ADDED only, nothing marks their end.
    for version in [V1_20, V1_31] {
        let h = start_release(version).await;
        let mut w = h
            .client
            .watch("/api/v1/nodes?watch=1&resourceVersion=0&allowWatchBookmarks=true")
            .await;
        for _ in 0..6 {
            assert_eq!(w.event().await["type"], "ADDED");
        }
        assert!(
            w.quiet_for(std::time::Duration::from_millis(300)).await,
            "{version}"
        );
    }
}

#[tokio::test]
async fn send_initial_events_false_starts_from_now_or_from_the_version() {
    let h = start_release(V1_35).await;
    let base = "/api/v1/namespaces/default/services?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan";
    let mut now = h.client.watch(base).await;
    let rv = h.server.resource_version();
    let mut cm_like = h
        .server
        .get("services", Some("default"), "plain-echo")
        .unwrap();
    cm_like["metadata"]["labels"] = json!({"touched": "yes"});
    h.server.apply(cm_like);
    assert_eq!(
        summary(&now.event().await),
        ("MODIFIED".into(), "plain-echo".into(), (rv + 1).to_string())
    );
    let mut from = h
        .client
        .watch(&format!("{base}&resourceVersion={rv}"))
        .await;
    assert_eq!(from.event().await["type"], "MODIFIED");
}

#[tokio::test]
async fn what_kube_apiserver_refuses() {
    let h = start_release(V1_35).await;
    let path = |q: &str| format!("/api/v1/services?{q}");
    let r = h.client.get(&path("watch=1&sendInitialEvents=true")).await;
    assert_eq!(r.code(), 422);
    assert_eq!(
        r.json()["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    let r = h
        .client
        .get(&path(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5",
        ))
        .await;
    assert_eq!(
        invalid(&r.json()),
        [
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            "resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\""
        ]
    );
    let r = h
        .client
        .get(&path(
            "watch=1&resourceVersion=5&resourceVersionMatch=NotOlderThan",
        ))
        .await;
    assert_eq!(
        invalid(&r.json()),
        ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"]
    );
    let r = h
        .client
        .get(&path(
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        ))
        .await;
    assert_eq!(
        invalid(&r.json()),
        ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]
    );
    // The 422 comes before the selectors are looked at, as in ListResource.
    let r = h
        .client
        .get(&path(
            "watch=1&sendInitialEvents=true&fieldSelector=spec.bad%3D1",
        ))
        .await;
    assert_eq!(r.code(), 422);
}

const WATCH_LIST: &str = "/api/v1/services?watch=1&allowWatchBookmarks=true\
                          &sendInitialEvents=true&resourceVersionMatch=NotOlderThan";

#[tokio::test]
async fn release_1_31_refuses_unless_its_gate_is_on() {
    let gate_off = "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
    let h = start_release(V1_31).await;
    assert_eq!(invalid(&h.client.get(WATCH_LIST).await.json()), [gate_off]);
    let off = ApiServerConfig {
        feature_gates: FeatureGates {
            watch_list: Some(false),
            ..FeatureGates::default()
        },
        ..ApiServerConfig::for_version(V1_35)
    };
    let h = start_configured(off).await;
    assert_eq!(invalid(&h.client.get(WATCH_LIST).await.json()), [gate_off]);
    // Switched on, 1.31 serves it; its bookmark still writes the null time.
    let on = ApiServerConfig {
        feature_gates: FeatureGates {
            watch_list: Some(true),
            ..FeatureGates::default()
        },
        ..ApiServerConfig::for_version(V1_31)
    };
    let h = start_configured(on).await;
    let mut w = h.client.watch(WATCH_LIST).await;
    let (added, bookmark) = until_bookmark(&mut w).await;
    assert_eq!(added.len(), 5);
    assert_eq!(
        bookmark["object"]["metadata"],
        json!({"resourceVersion": h.server.resource_version().to_string(), "creationTimestamp": null,
               "annotations": {"k8s.io/initial-events-end": "true"}})
    );
}

#[tokio::test]
async fn release_1_20_refuses_as_before() {
    let h = start_release(V1_20).await;
    let r = h.client.get(WATCH_LIST).await;
    assert_eq!(r.code(), 400);
    assert_eq!(
        std::str::from_utf8(&r.body).unwrap().trim_end(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"sendInitialEvents is not supported by this server","reason":"BadRequest","code":400}"#
    );
}
