//! WATCH semantics: initial state, resume, 410, bookmarks, timeouts,
//! selector transitions, relabel → MODIFIED, and the lag policy.

use std::time::Duration;

use crate::common::*;
use kube::runtime::watcher::Event as W;
use serde_json::json;
use sitegrid_cache::{CacheConfig, ResourceKind};
use sitegrid_proxy::handlers::{HandlerSettings, WatchSettings};

fn fast_bookmarks() -> HandlerSettings {
    HandlerSettings {
        watch: WatchSettings {
            bookmark_interval: Duration::from_secs(5),
        },
        ..HandlerSettings::default()
    }
}

/// `default/plain-echo` upstream now has one address, `ip` on bj-1, at version `rv`.
fn plain_echo_at(p: &mut sitegrid_cache::Writer, ip: &str, rv: u64) {
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints("default", "plain-echo", &[(ip, "bj-1")], rv)),
    );
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn watch_from_zero_starts_with_added_then_follows_live_changes() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let resp = call(
        &app,
        "/api/v1/namespaces/default/endpoints?watch=1&resourceVersion=0",
        None,
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let mut body = resp.into_body();
    let initial = frames(&mut body, 4).await;
    assert_eq!(
        summary(&initial),
        pairs(&[
            ("ADDED", "echo-headless"),
            ("ADDED", "kubernetes"),
            ("ADDED", "plain-echo"),
            ("ADDED", "servicegrid-demo-svc")
        ])
    );
    assert_eq!(
        initial[0]["object"]["kind"], "Endpoints",
        "event objects carry kind"
    );
    // A pod in guangzhou goes away: bj-1's view of the Service does not change, so no event.
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints(
            "default",
            "servicegrid-demo-svc",
            &[
                ("10.0.0.70", "bj-1"),
                ("10.0.1.72", "bj-3"),
                ("10.0.0.139", "gz-2"),
            ],
            50,
        )),
    );
    // A beijing pod goes away: MODIFIED.
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints(
            "default",
            "servicegrid-demo-svc",
            &[("10.0.0.70", "bj-1"), ("10.0.0.139", "gz-2")],
            51,
        )),
    );
    let live = frames(&mut body, 1).await;
    assert_eq!(
        summary(&live),
        pairs(&[("MODIFIED", "servicegrid-demo-svc")])
    );
    assert_eq!(subset_ips(&live[0]["object"]), ["10.0.0.70"]);
}

#[tokio::test]
async fn watch_resumes_from_a_resource_version_without_loss() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/endpoints").await;
    // Changes while no watch is open (a client reconnecting).
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints("default", "new", &[("10.0.9.1", "bj-2")], 60)),
    );
    p.handle(
        ResourceKind::Endpoints,
        W::Delete(endpoints("kube-system", "kube-dns", &[], 61)),
    );
    let resp = call(
        &app,
        &format!("/api/v1/endpoints?watch=1&resourceVersion={rv}"),
        None,
    )
    .await;
    let mut body = resp.into_body();
    let replay = frames(&mut body, 2).await;
    assert_eq!(
        summary(&replay),
        pairs(&[("ADDED", "new"), ("DELETED", "kube-dns")])
    );
    let rvs: Vec<u64> = replay
        .iter()
        .map(|f| {
            f["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(
        rvs[0] > rv.parse().unwrap() && rvs[1] > rvs[0],
        "versions strictly increase: {rvs:?}"
    );
    // Resuming from the first replayed event replays only the second.
    let resp = call(
        &app,
        &format!("/api/v1/endpoints?watch=1&resourceVersion={}", rvs[0]),
        None,
    )
    .await;
    assert_eq!(
        summary(&frames(&mut resp.into_body(), 1).await),
        pairs(&[("DELETED", "kube-dns")])
    );
}

#[tokio::test]
async fn the_resume_log_is_bounded_in_bytes_and_keeps_the_newest_events() {
    let budget = 16 << 10;
    let (cache, mut p) = two_sites(
        "bj-1",
        CacheConfig {
            log_capacity: 10_000,
            log_bytes: budget,
            ..CacheConfig::default()
        },
    );
    let app = app(cache.clone(), HandlerSettings::default());
    let (_, list) = get_json(&app, "/api/v1/endpoints").await;
    let first = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut recent = String::new();
    for i in 0..200u64 {
        if i == 195 {
            let (_, list) = get_json(&app, "/api/v1/endpoints").await;
            recent = list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned();
        }
        let ip = format!("10.0.1.{}", i % 250);
        plain_echo_at(&mut p, &ip, 1000 + i);
    }
    let sizes = cache.store(ResourceKind::Endpoints).sizes();
    assert!(sizes.log_bytes <= budget, "{sizes:?}");
    assert!(sizes.log_events > 5 && sizes.log_events < 200, "{sizes:?}");
    // The newest events are still there to resume from; the oldest are gone (410).
    let f = frames(
        &mut call(
            &app,
            &format!("/api/v1/endpoints?watch=1&resourceVersion={recent}"),
            None,
        )
        .await
        .into_body(),
        5,
    )
    .await;
    assert_eq!(summary(&f), pairs(&[("MODIFIED", "plain-echo"); 5]));
    let f = frames(
        &mut call(
            &app,
            &format!("/api/v1/endpoints?watch=1&resourceVersion={first}"),
            None,
        )
        .await
        .into_body(),
        2,
    )
    .await;
    assert_eq!((f.len(), &f[0]["object"]["code"]), (1, &json!(410)));
}

#[tokio::test]
async fn a_version_the_log_no_longer_holds_gets_a_410_error_event() {
    let (cache, mut p) = two_sites(
        "bj-1",
        CacheConfig {
            log_capacity: 2,
            watcher_buffer: 100,
            ..CacheConfig::default()
        },
    );
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/endpoints").await;
    for i in 0..3 {
        p.handle(
            ResourceKind::Endpoints,
            W::Apply(endpoints(
                "default",
                "plain-echo",
                &[("10.0.1.1", "bj-1")],
                70 + i,
            )),
        );
        p.handle(
            ResourceKind::Endpoints,
            W::Apply(endpoints(
                "default",
                "plain-echo",
                &[("10.0.1.2", "bj-1")],
                80 + i,
            )),
        );
    }
    let resp = call(
        &app,
        &format!("/api/v1/endpoints?watch=1&resourceVersion={rv}"),
        None,
    )
    .await;
    assert_eq!(resp.status(), 200, "the 410 travels inside the stream");
    let mut body = resp.into_body();
    let f = frames(&mut body, 2).await;
    assert_eq!(f.len(), 1, "one ERROR frame, then the stream ends");
    assert_eq!(f[0]["type"], "ERROR");
    assert_eq!(f[0]["object"]["code"], 410);
    assert_eq!(f[0]["object"]["reason"], "Expired");
    assert!(f[0]["object"]["message"]
        .as_str()
        .unwrap()
        .starts_with(&format!("too old resource version: {rv} (")));
    // A version from before this process started (a restart) is too old as well.
    let resp = call(&app, "/api/v1/services?watch=1&resourceVersion=12345", None).await;
    assert_eq!(
        frames(&mut resp.into_body(), 1).await[0]["object"]["code"],
        410
    );
}

#[tokio::test(start_paused = true)]
async fn bookmarks_arrive_when_the_resource_moved_and_timeout_ends_the_stream() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, fast_bookmarks());
    let rv = list_rv(&app, "/api/v1/namespaces/default/endpoints").await;
    let uri = format!("/api/v1/namespaces/default/endpoints?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=12");
    let resp = call(&app, &uri, None).await;
    let mut body = resp.into_body();
    // An endpoints change in another namespace moves the resource's version;
    // this watch (namespace default) sees no event, only the bookmark.
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(endpoints(
            "kube-system",
            "kube-dns",
            &[("10.0.2.9", "bj-1")],
            90,
        )),
    );
    let f = frames(&mut body, 10).await;
    let types: Vec<&str> = f.iter().map(|x| x["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["BOOKMARK"],
        "one bookmark, then a clean end at timeoutSeconds"
    );
    assert_eq!(
        f[0]["object"],
        json!({"kind":"Endpoints","apiVersion":"v1","metadata":{
        "resourceVersion": f[0]["object"]["metadata"]["resourceVersion"].clone(), "creationTimestamp": null}})
    );
    assert!(
        f[0]["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > rv.parse().unwrap()
    );
}

/// A bookmark that fires while events still wait for the watcher (a burst
/// just committed) must not claim their version: the watch would then skip
/// them, and the client believe it had them. Seen as lost final changes in
/// the report's upstream-fault runs, whenever the 60 s bookmark fell at the
/// end of a burst.
#[tokio::test]
async fn a_bookmark_never_claims_events_the_watcher_has_not_sent() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let settings = HandlerSettings {
        watch: WatchSettings {
            bookmark_interval: Duration::from_millis(1),
        },
        ..HandlerSettings::default()
    };
    let app = app(cache, settings);
    let rv = list_rv(&app, "/api/v1/namespaces/default/endpoints").await;
    let uri = format!("/api/v1/namespaces/default/endpoints?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=8");
    let mut body = call(&app, &uri, None).await.into_body();
    let total = 300;
    for round in 0..3 {
        // A burst committed while the watch task cannot run; by the time it
        // does, its bookmark timer has long expired too.
        for i in 0..total {
            let ip = format!("10.0.{}.{}", 6 + round, i % 250);
            plain_echo_at(&mut p, &ip, 2000 + round * total + i);
        }
        std::thread::sleep(Duration::from_millis(5));
        let mut modified = 0;
        let mut claimed = 0u64;
        let mut reads = 0;
        while modified < total {
            // Events already waiting go out together: one read may bring several.
            let f = frames(&mut body, 1).await;
            reads += 1;
            assert!(
                !f.is_empty(),
                "round {round}: the stream ended after {modified} of {total} events"
            );
            for event in f {
                let rv: u64 = event["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                match event["type"].as_str().unwrap() {
                    "BOOKMARK" => claimed = claimed.max(rv),
                    "MODIFIED" => {
                        assert!(
                            rv > claimed,
                            "round {round}: event {rv} came after a bookmark at {claimed}"
                        );
                        modified += 1;
                    }
                    other => panic!("unexpected {other} event"),
                }
            }
        }
        // Waiting events go out as a few large writes, not one per event.
        assert!(
            reads * 10 < total,
            "round {round}: {total} waiting events took {reads} writes"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn send_initial_events_ends_the_initial_state_with_an_annotated_bookmark() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let uri = "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
    let f = frames(&mut call(&app, uri, None).await.into_body(), 10).await;
    // The six nodes, then the bookmark.
    assert_eq!(f.len(), 7);
    assert!(f[..6].iter().all(|x| x["type"] == "ADDED"));
    assert_eq!(f[6]["type"], "BOOKMARK");
    assert_eq!(
        f[6]["object"]["metadata"]["annotations"],
        json!({"k8s.io/initial-events-end":"true"})
    );
    // Without resourceVersionMatch it is refused, as kube-apiserver does.
    let (code, s) = get_json(&app, "/api/v1/nodes?watch=1&sendInitialEvents=true").await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
}

/// The messages of a 422's causes.
fn causes(status: &serde_json::Value) -> Vec<String> {
    status["details"]["causes"]
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

#[tokio::test(start_paused = true)]
async fn watch_options_are_defaulted_and_validated_as_kube_apiserver_does_with_watch_list_on() {
    let (cache, _p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let types = |f: &[serde_json::Value]| {
        f.iter()
            .map(|x| x["type"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let six_added: Vec<String> = vec!["ADDED".to_owned(); 6];
    let mut with_end = six_added.clone();
    with_end.push("BOOKMARK".to_owned());

    // A watch from "any" version is a WatchList: with bookmarks allowed, the
    // initial events end with the annotated bookmark; without, they do not.
    for (uri, want) in [
        ("/api/v1/nodes?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1", &with_end),
        ("/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=1", &with_end),
        ("/api/v1/nodes?watch=1&resourceVersion=0&timeoutSeconds=1", &six_added),
        // client-go 1.35 always asks for bookmarks; without them the stream is accepted, minus the end marker.
        ("/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1", &six_added),
    ] {
        let f = frames(&mut call(&app, uri, None).await.into_body(), 10).await;
        assert_eq!(&types(&f), want, "{uri}");
    }

    for (uri, want) in [
        (
            "/api/v1/nodes?watch=1&resourceVersion=5&resourceVersionMatch=NotOlderThan",
            vec!["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"],
        ),
        (
            "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5",
            vec![
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                "resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
            ],
        ),
        (
            "/api/v1/nodes?sendInitialEvents=true",
            vec!["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"],
        ),
        (
            "/api/v1/nodes?resourceVersion=5&resourceVersionMatch=Newest",
            vec!["resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""],
        ),
    ] {
        let (code, s) = get_json(&app, uri).await;
        assert_eq!(code, 422, "{uri}");
        assert_eq!(causes(&s), want, "{uri}");
    }
}

#[tokio::test(start_paused = true)]
async fn send_initial_events_false_streams_only_what_changes() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/nodes").await;
    let mut from_now = call(
        &app,
        "/api/v1/nodes?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&timeoutSeconds=5",
        None,
    )
    .await
    .into_body();
    let mut from_rv = call(
        &app,
        &format!("/api/v1/nodes?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion={rv}&timeoutSeconds=5"),
        None,
    )
    .await
    .into_body();
    p.handle(
        ResourceKind::Nodes,
        W::Apply(node("gz-4", "guangzhou", 900)),
    );
    for body in [&mut from_now, &mut from_rv] {
        let f = frames(body, 5).await;
        assert_eq!(summary(&f), pairs(&[("ADDED", "gz-4")]));
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_list_for_a_version_the_proxy_has_not_reached_waits_then_ends_with_504() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache.clone(), HandlerSettings::default());
    let future = cache.current_rv() + 1;
    let uri = format!("/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={future}&timeoutSeconds=30");
    // Never reached: one ERROR, as the watch cache answers after its 3 s wait.
    let f = frames(
        &mut call(&app, &format!("{uri}0000"), None).await.into_body(),
        10,
    )
    .await;
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["type"], "ERROR");
    assert_eq!(f[0]["object"]["code"], 504);
    assert_eq!(f[0]["object"]["reason"], "Timeout");
    assert_eq!(
        f[0]["object"]["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );

    // Reached during the wait: the initial events include the change that reached it.
    let mut body = call(&app, &uri, None).await.into_body();
    tokio::time::sleep(Duration::from_secs(1)).await;
    p.handle(
        ResourceKind::Nodes,
        W::Apply(node("gz-4", "guangzhou", 900)),
    );
    let f = frames(&mut body, 8).await;
    assert_eq!(f.len(), 8);
    assert!(f[..7].iter().all(|x| x["type"] == "ADDED"));
    assert!(summary(&f).contains(&("ADDED".to_owned(), "gz-4".to_owned())));
    assert_eq!(f[7]["type"], "BOOKMARK");
}

#[tokio::test]
async fn label_selector_transitions_become_added_and_deleted() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/endpoints").await;
    let resp = call(
        &app,
        &format!("/api/v1/endpoints?watch=1&labelSelector=superedge.io%2Fgrid-selector%3Dservicegrid-demo&resourceVersion={rv}"),
        None,
    )
    .await;
    let mut body = resp.into_body();
    let relabel = |grid: &str, rv: u64| {
        obj(
            json!({"metadata":{"name":"servicegrid-demo-svc","namespace":"default","resourceVersion":rv.to_string(),
            "labels":{"superedge.io/grid-selector":grid}},
            "subsets":[{"addresses":[{"ip":"10.0.0.70","nodeName":"bj-1"}],"ports":[{"port":8080}]}]}),
        )
    };
    p.handle(ResourceKind::Endpoints, W::Apply(relabel("other", 100)));
    p.handle(
        ResourceKind::Endpoints,
        W::Apply(relabel("servicegrid-demo", 101)),
    );
    let f = frames(&mut body, 2).await;
    assert_eq!(
        summary(&f),
        pairs(&[
            ("DELETED", "servicegrid-demo-svc"),
            ("ADDED", "servicegrid-demo-svc")
        ])
    );
    assert_eq!(
        f[0]["object"]["metadata"]["labels"]["superedge.io/grid-selector"], "servicegrid-demo",
        "DELETED carries the old content"
    );
    assert!(
        f[0]["object"]["subsets"][0]["addresses"][1].is_object(),
        "old content had both addresses"
    );
}

#[tokio::test]
async fn relabelling_a_node_sends_modified_to_watchers() {
    let (cache, mut p) = two_sites("bj-1", CacheConfig::default());
    let app = app(cache, HandlerSettings::default());
    let (_, list) = get_json(&app, "/apis/discovery.k8s.io/v1/endpointslices").await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let resp = call(
        &app,
        &format!("/apis/discovery.k8s.io/v1/endpointslices?watch=1&resourceVersion={rv}"),
        None,
    )
    .await;
    let mut body = resp.into_body();
    let demo = slice_of(&list, "servicegrid-demo-svc")["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    // gz-2 moves to beijing: its pod becomes local to bj-1.
    p.handle(ResourceKind::Nodes, W::Apply(node("gz-2", "beijing", 110)));
    let f = frames(&mut body, 1).await;
    assert_eq!(summary(&f), pairs(&[("MODIFIED", demo.as_str())]));
    assert_eq!(
        slice_ips(&f[0]["object"]),
        ["10.0.0.70", "10.0.1.72", "10.0.0.139"]
    );
}

#[tokio::test]
async fn a_slow_watcher_is_ended_with_410_while_a_fast_one_keeps_up() {
    let (cache, mut p) = two_sites(
        "bj-1",
        CacheConfig {
            log_capacity: 1000,
            watcher_buffer: 8,
            ..CacheConfig::default()
        },
    );
    let app = app(cache, HandlerSettings::default());
    let rv = list_rv(&app, "/api/v1/endpoints").await;
    let uri = format!("/api/v1/endpoints?watch=1&resourceVersion={rv}");
    let mut slow = call(&app, &uri, None).await.into_body();
    // A connection polls the body once as it sends the headers: the watch
    // starts; this client then reads nothing more for a while.
    let started = tokio::time::timeout(
        Duration::from_millis(50),
        http_body_util::BodyExt::frame(&mut slow),
    )
    .await;
    assert!(started.is_err(), "nothing to send yet");
    let mut fast = call(&app, &uri, None).await.into_body();
    let total = 200;
    let mut fast_seen = Vec::new();
    for i in 0..total {
        let ip = format!("10.0.5.{}", i % 250);
        plain_echo_at(&mut p, &ip, 1000 + i);
        fast_seen.extend(frames(&mut fast, 1).await);
    }
    assert_eq!(
        fast_seen.len(),
        total as usize,
        "the fast watcher saw every event"
    );
    assert!(fast_seen.iter().all(|f| f["type"] == "MODIFIED"));
    // The slow one never read; now it finds its buffered events, then the 410.
    let slow_frames = frames(&mut slow, total as usize + 1).await;
    let last = slow_frames.last().unwrap();
    assert_eq!(last["type"], "ERROR");
    assert_eq!(last["object"]["code"], 410);
    assert!(
        slow_frames.len() < total as usize,
        "it was ended, not allowed to hold everything"
    );
    // What it did get before the error is a gap-free prefix of the fast watcher's events.
    let n = slow_frames.len() - 1;
    assert_eq!(slow_frames[..n], fast_seen[..n]);
}
