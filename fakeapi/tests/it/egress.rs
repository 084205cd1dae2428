//! Egress accounting: the counters grow by exactly the body bytes a client
//! received, per resource, form and verb, and the debug endpoint serves them.

use std::time::Duration;

use sitegrid_fakeapi::{sample, ApiServerConfig, Egress};

use crate::common::{start, start_two_sites, METADATA, METADATA_LIST};

const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                       application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

#[tokio::test]
async fn list_and_get_bytes_are_what_the_client_received() {
    let h = start_two_sites().await;
    assert_eq!(h.server.egress().total_bytes, 0, "loading sends nothing");
    let list = h.client.get("/api/v1/nodes").await;
    let list_meta = h
        .client
        .get_as(
            "/api/v1/nodes?labelSelector=location%3Dbeijing",
            METADATA_LIST,
        )
        .await;
    let get = h.client.get("/api/v1/nodes/bj-1").await;
    let missing = h.client.get("/api/v1/nodes/nope").await;
    let get_meta = h.client.get_as("/api/v1/nodes/bj-1", METADATA).await;
    let table = h.client.get_as("/api/v1/nodes", KUBECTL).await;
    let slices = h
        .client
        .get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices")
        .await;
    let discovery = h.client.get("/api/v1").await;
    assert_eq!(missing.code(), 404);
    let len = |r: &crate::common::Reply| r.body.len() as u64;
    let e = h.server.egress();
    let nodes = &e.resources["nodes"];
    assert_eq!((nodes.full.lists, nodes.full.list_bytes), (1, len(&list)));
    assert_eq!(
        (nodes.full.gets, nodes.full.get_bytes),
        (2, len(&get) + len(&missing)),
        "a 404 is a GET's answer too"
    );
    assert_eq!(
        (nodes.metadata.lists, nodes.metadata.list_bytes),
        (1, len(&list_meta))
    );
    assert_eq!(
        (nodes.metadata.gets, nodes.metadata.get_bytes),
        (1, len(&get_meta))
    );
    assert_eq!(
        (nodes.table.lists, nodes.table.list_bytes),
        (1, len(&table))
    );
    assert_eq!(nodes.full.watch_bytes + nodes.metadata.watch_bytes, 0);
    assert_eq!(e.resources["endpointslices"].full.list_bytes, len(&slices));
    assert_eq!(e.other_bytes, len(&discovery));
    let received = [
        &list, &list_meta, &get, &missing, &get_meta, &table, &slices, &discovery,
    ]
    .into_iter()
    .map(len)
    .sum::<u64>();
    assert_eq!(e.total_bytes, received);
    assert!(
        len(&list_meta) * 2 < len(&list),
        "metadata of half the nodes is less than half the nodes"
    );
}

#[tokio::test]
async fn watch_bytes_events_and_open_watches() {
    let h = start(ApiServerConfig {
        bookmark_interval: Duration::from_millis(50),
        ..ApiServerConfig::default()
    })
    .await;
    h.server.load(sample::two_sites("v1"));
    let mut full = h
        .client
        .watch("/api/v1/nodes?watch=1&resourceVersion=0")
        .await;
    let mut meta = h
        .client
        .watch_as(
            "/api/v1/nodes?watch=1&resourceVersion=0&labelSelector=location%3Dbeijing",
            Some(METADATA),
        )
        .await;
    for _ in 0..6 {
        full.event().await;
    }
    for _ in 0..3 {
        meta.event().await;
    }
    // A beijing node's heartbeat reaches both; a guangzhou one only the full watch.
    h.server.heartbeat("bj-1").unwrap();
    h.server.heartbeat("gz-1").unwrap();
    assert_eq!(full.event().await["type"], "MODIFIED");
    assert_eq!(full.event().await["type"], "MODIFIED");
    assert_eq!(meta.event().await["type"], "MODIFIED");
    assert!(full.quiet_for(Duration::from_millis(100)).await);
    assert!(meta.quiet_for(Duration::from_millis(100)).await);
    let e = h.server.egress();
    let nodes = &e.resources["nodes"];
    assert_eq!(nodes.full.watch_bytes, full.received);
    assert_eq!(nodes.full.watch_events, 8);
    assert_eq!(nodes.metadata.watch_bytes, meta.received);
    assert_eq!(nodes.metadata.watch_events, 4);
    assert_eq!((nodes.full.watches_opened, nodes.full.open_watches), (1, 1));
    assert_eq!(
        (nodes.metadata.watches_opened, nodes.metadata.open_watches),
        (1, 1)
    );
    assert_eq!(h.server.open_watches().get("nodes"), Some(&2));
    assert_eq!(e.total_bytes, full.received + meta.received);
    // Bookmarks are counted apart from events.
    let rv = h.server.resource_version();
    let mut marked = h
        .client
        .watch(&format!(
            "/api/v1/services?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"
        ))
        .await;
    h.server.heartbeat("bj-2").unwrap();
    assert_eq!(marked.event().await["type"], "BOOKMARK");
    let services = &h.server.egress().resources["services"].full;
    assert_eq!((services.watch_events, services.watch_bookmarks), (0, 1));
    assert_eq!(services.watch_bytes, marked.received);
    // Closed watches are no longer open; what they sent stays counted.
    drop((full, meta, marked));
    for _ in 0..100 {
        if h.server.open_watches().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(h.server.open_watches().is_empty());
    let after = h.server.egress();
    assert_eq!(after.resources["nodes"].open_watches(), 0);
    assert!(after.resources["nodes"].full.watch_bytes >= e.resources["nodes"].full.watch_bytes);
}

#[tokio::test]
async fn the_debug_endpoint_serves_the_counters_and_is_not_counted() {
    let h = start_two_sites().await;
    let list = h.client.get("/api/v1/namespaces/default/services").await;
    let reply = h.client.get("/debug/egress").await;
    assert_eq!(reply.code(), 200);
    assert_eq!(reply.headers["content-type"], "application/json");
    let served: Egress = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(
        served,
        h.server.egress(),
        "reading the counters changes none"
    );
    assert_eq!(
        served.resources["services"].full.list_bytes,
        list.body.len() as u64
    );
    let json = reply.json();
    assert_eq!(json["totalBytes"], list.body.len() as u64);
    assert_eq!(json["otherBytes"], 0);
    assert_eq!(
        json["resources"]["services"]["full"]["listBytes"],
        list.body.len() as u64
    );
    for key in [
        "listBytes",
        "lists",
        "getBytes",
        "gets",
        "watchBytes",
        "watchEvents",
        "watchBookmarks",
        "watchesOpened",
        "openWatches",
    ] {
        assert!(
            json["resources"]["nodes"]["metadata"][key].is_u64(),
            "{key}"
        );
    }
    assert!(json["resources"]["events.events.k8s.io"]["table"].is_object());
}
