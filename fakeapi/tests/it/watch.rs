//! WATCH over real HTTP: initial state, replay, 410, bookmarks, timeouts,
//! selector transitions, disconnects and lagging watchers.

use std::time::Duration;

use crate::common::{configmap, endpoints, start, start_default, summary};
use serde_json::json;
use sitegrid_fakeapi::ApiServerConfig;

fn s(t: &str, n: &str, rv: u64) -> (String, String, String) {
    (t.to_owned(), n.to_owned(), rv.to_string())
}

#[tokio::test]
async fn rv0_sends_current_objects_then_live_events() {
    let h = start_default().await;
    h.server
        .apply(endpoints("golden", "ep1", json!({}), &["10.0.0.1"]));
    h.server
        .apply(endpoints("other", "ep2", json!({}), &["10.0.0.2"]));
    let mut w = h
        .client
        .watch("/api/v1/namespaces/golden/endpoints?watch=1&resourceVersion=0")
        .await;
    let first = w.event().await;
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "Endpoints");
    assert_eq!(first["object"]["apiVersion"], "v1");
    assert_eq!(first["object"]["metadata"]["name"], "ep1");
    // The "type" key comes first on the wire (kube-rs relies on it).
    h.server
        .apply(endpoints("golden", "ep3", json!({}), &["10.0.0.3"]));
    let raw = w.next_line().await.unwrap();
    assert!(raw.starts_with(r#"{"type":"ADDED","object":{"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"ep3""#), "{raw}");
    // Events in other namespaces are not delivered.
    h.server
        .apply(endpoints("other", "ep4", json!({}), &["10.0.0.4"]));
    assert!(w.quiet_for(Duration::from_millis(200)).await);
}

#[tokio::test]
async fn watch_from_rv_replays_history_then_goes_live() {
    let h = start_default().await;
    let start_rv = h.server.resource_version();
    h.server
        .apply(endpoints("golden", "ep1", json!({}), &["10.0.0.1"]));
    let added = h.server.resource_version();
    h.server.apply(endpoints(
        "golden",
        "ep1",
        json!({}),
        &["10.0.0.1", "10.0.0.2"],
    ));
    let deleted = h.server.delete("endpoints", Some("golden"), "ep1").unwrap();
    let del_rv = h.server.resource_version();
    // DELETE returns the last stored state.
    assert_eq!(
        deleted["metadata"]["resourceVersion"],
        (added + 1).to_string()
    );
    let mut w = h
        .client
        .watch(&format!(
            "/api/v1/namespaces/golden/endpoints?watch=true&resourceVersion={start_rv}"
        ))
        .await;
    assert_eq!(summary(&w.event().await), s("ADDED", "ep1", added));
    assert_eq!(summary(&w.event().await), s("MODIFIED", "ep1", added + 1));
    let del = w.event().await;
    // DELETED carries the last state with the deletion's resourceVersion.
    assert_eq!(summary(&del), s("DELETED", "ep1", del_rv));
    assert_eq!(
        del["object"]["subsets"][0]["addresses"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    h.server
        .apply(endpoints("golden", "ep2", json!({}), &["10.0.0.9"]));
    assert_eq!(summary(&w.event().await), s("ADDED", "ep2", del_rv + 1));
    // Resuming from the middle replays only what came after.
    let mut w2 = h
        .client
        .watch(&format!(
            "/api/v1/namespaces/golden/endpoints?watch=true&resourceVersion={added}"
        ))
        .await;
    assert_eq!(summary(&w2.event().await).0, "MODIFIED");
}

#[tokio::test]
async fn too_old_rv_gets_a_410_error_frame_then_eof() {
    let h = start_default().await;
    h.server.apply(configmap("default", "a", json!({})));
    let old = h.server.resource_version();
    h.server.apply(configmap("default", "a", json!({"x":"1"})));
    h.server.compact();
    let floor = h.server.resource_version();
    let mut w = h
        .client
        .watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={old}"))
        .await;
    let line = w.next_line().await.unwrap();
    assert_eq!(
        line,
        format!(
            r#"{{"type":"ERROR","object":{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"too old resource version: {old} ({floor})","reason":"Expired","code":410}}}}"#
        )
    );
    assert!(
        w.next_line().await.is_none(),
        "stream ends after the ERROR frame"
    );
    // The current RV is still fine.
    let mut ok = h
        .client
        .watch(&format!(
            "/api/v1/configmaps?watch=1&resourceVersion={floor}"
        ))
        .await;
    h.server.apply(configmap("default", "b", json!({})));
    assert_eq!(summary(&ok.event().await).1, "b");
}

#[tokio::test]
async fn history_window_is_bounded() {
    let h = start(ApiServerConfig {
        history: 5,
        ..ApiServerConfig::default()
    })
    .await;
    let old = h.server.resource_version();
    for i in 0..10 {
        h.server
            .apply(configmap("default", &format!("c{i}"), json!({})));
    }
    let mut w = h
        .client
        .watch(&format!("/api/v1/configmaps?watch=1&resourceVersion={old}"))
        .await;
    assert_eq!(w.event().await["type"], "ERROR");
    let recent = h.server.resource_version() - 3;
    let mut w = h
        .client
        .watch(&format!(
            "/api/v1/configmaps?watch=1&resourceVersion={recent}"
        ))
        .await;
    assert_eq!(summary(&w.event().await), s("ADDED", "c7", recent + 1));
}

#[tokio::test]
async fn bookmarks_report_the_global_rv() {
    let h = start(ApiServerConfig {
        bookmark_interval: Duration::from_millis(50),
        ..ApiServerConfig::default()
    })
    .await;
    h.server
        .apply(endpoints("default", "web", json!({}), &["10.0.0.1"]));
    let rv = h.server.resource_version();
    let mut w = h.client.watch(&format!("/apis/discovery.k8s.io/v1/endpointslices?watch=1&resourceVersion={rv}&allowWatchBookmarks=true")).await;
    // Writes to other resources move the global rv; a bookmark tells the watcher.
    h.server.apply(configmap("default", "x", json!({})));
    let now = h.server.resource_version();
    let line = w.next_line().await.unwrap();
    assert_eq!(
        line,
        format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{{"resourceVersion":"{now}","creationTimestamp":null}}}}}}"#
        )
    );
    // Without allowWatchBookmarks, none.
    let mut quiet = h
        .client
        .watch(&format!("/api/v1/nodes?watch=1&resourceVersion={rv}"))
        .await;
    h.server.apply(configmap("default", "y", json!({})));
    assert!(quiet.quiet_for(Duration::from_millis(300)).await);
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream_cleanly() {
    let h = start_default().await;
    let mut w = h
        .client
        .watch("/api/v1/services?watch=1&timeoutSeconds=1")
        .await;
    assert!(w.next_line().await.is_none());
    assert!(h.server.open_watches().is_empty());
}

#[tokio::test]
async fn selector_transitions_are_deleted_and_added() {
    let h = start_default().await;
    h.server.apply(endpoints(
        "golden",
        "ep1",
        json!({"app":"gold"}),
        &["10.0.0.1"],
    ));
    let rv = h.server.resource_version();
    let mut w = h.client.watch(&format!("/api/v1/namespaces/golden/endpoints?watch=1&resourceVersion={rv}&labelSelector=app%3Dgold")).await;
    h.server.apply(endpoints(
        "golden",
        "ep1",
        json!({"app":"other"}),
        &["10.0.0.7"],
    ));
    let gone = w.event().await;
    assert_eq!(summary(&gone), s("DELETED", "ep1", rv + 1));
    // The old content (still matching) with the new RV.
    assert_eq!(gone["object"]["metadata"]["labels"]["app"], "gold");
    assert_eq!(
        gone["object"]["subsets"][0]["addresses"][0]["ip"],
        "10.0.0.1"
    );
    h.server.apply(endpoints(
        "golden",
        "ep1",
        json!({"app":"other"}),
        &["10.0.0.8"],
    ));
    h.server.apply(endpoints(
        "golden",
        "ep1",
        json!({"app":"gold"}),
        &["10.0.0.9"],
    ));
    let back = w.event().await;
    assert_eq!(summary(&back), s("ADDED", "ep1", rv + 3));
    assert_eq!(
        back["object"]["subsets"][0]["addresses"][0]["ip"],
        "10.0.0.9"
    );
    // Field selectors filter too, and bad selectors are a 400 before any stream.
    let mut by_name = h
        .client
        .watch("/api/v1/endpoints?watch=1&fieldSelector=metadata.name%3Dep2")
        .await;
    h.server.apply(endpoints(
        "golden",
        "ep1",
        json!({"app":"gold"}),
        &["10.0.0.10"],
    ));
    h.server
        .apply(endpoints("golden", "ep2", json!({}), &["10.0.0.11"]));
    assert_eq!(summary(&by_name.event().await).1, "ep2");
    let bad = h
        .client
        .get("/api/v1/endpoints?watch=1&labelSelector=!!a")
        .await;
    assert_eq!(bad.code(), 400);
    assert_eq!(
        bad.json()["message"],
        "unable to parse requirement: found '!', expected: identifier"
    );
}

#[tokio::test]
async fn disconnect_ends_streams_and_counts_track_open_watches() {
    let h = start_default().await;
    let mut a = h.client.watch("/api/v1/services?watch=1").await;
    let mut b = h
        .client
        .watch("/api/v1/watch/namespaces/default/services")
        .await;
    let mut c = h
        .client
        .watch("/apis/discovery.k8s.io/v1/endpointslices?watch=1")
        .await;
    let counts = h.server.open_watches();
    assert_eq!(counts.get("services"), Some(&2));
    assert_eq!(counts.get("endpointslices"), Some(&1));
    h.server.disconnect_watches();
    assert!(a.next_line().await.is_none());
    assert!(b.next_line().await.is_none());
    assert!(c.next_line().await.is_none());
    // Streams are dropped server-side once ended.
    for _ in 0..50 {
        if h.server.open_watches().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(h.server.open_watches().is_empty());
    // A client that hangs up also closes its watch.
    let d = h.client.watch("/api/v1/nodes?watch=1").await;
    assert_eq!(h.server.open_watches().get("nodes"), Some(&1));
    drop(d);
    for _ in 0..50 {
        if h.server.open_watches().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(h.server.open_watches().is_empty());
}

#[tokio::test]
async fn a_watcher_that_does_not_read_never_blocks_writers() {
    let h = start_default().await;
    let mut stuck = h.client.watch("/api/v1/configmaps?watch=1").await;
    let big = "x".repeat(4096);
    let writes = tokio::task::spawn_blocking({
        let server = h.server.clone();
        move || {
            for i in 0..5000 {
                server.apply(configmap(
                    "default",
                    &format!("c{}", i % 50),
                    json!({"v": i.to_string(), "pad": big}),
                ));
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), writes)
        .await
        .expect("writes finish")
        .unwrap();
    // The lagging stream is ended (after what was already buffered), never silently gapped.
    let mut last = 0u64;
    while let Some(ev) = stuck.next().await {
        let rv: u64 = ev["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(ev["type"], if rv <= 51 { "ADDED" } else { "MODIFIED" });
        assert!(last == 0 || rv == last + 1, "no gap: {last} -> {rv}");
        last = rv;
    }
    assert!(
        last < h.server.resource_version(),
        "the stream was cut short"
    );
}

#[tokio::test]
async fn future_rv_watch_stays_silent_until_the_counter_passes_it() {
    let h = start_default().await;
    let future = h.server.resource_version() + 2;
    let mut w = h
        .client
        .watch(&format!(
            "/api/v1/configmaps?watch=1&resourceVersion={future}"
        ))
        .await;
    h.server.apply(configmap("default", "a", json!({})));
    h.server.apply(configmap("default", "b", json!({})));
    assert!(
        w.quiet_for(Duration::from_millis(200)).await,
        "events at or below the start RV are filtered"
    );
    h.server.apply(configmap("default", "c", json!({})));
    assert_eq!(summary(&w.event().await), s("ADDED", "c", future + 1));
}
