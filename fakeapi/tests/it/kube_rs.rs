//! kube-rs' metadata watcher (kube-runtime, over kube-core's `list_metadata`
//! and `watch_metadata` requests) against this server: a site's Nodes
//! followed by label selector, nodes moving in and out, and heartbeats.

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};

use crate::common::{relabelled, start_two_sites, WAIT};

type Meta = PartialObjectMeta<Node>;

/// The next event: `(variant, name, location label)`.
async fn next(
    stream: &mut (impl Stream<Item = Result<Event<Meta>, watcher::Error>> + Unpin),
) -> (&'static str, String, String) {
    let ev = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event in time")
        .expect("the stream goes on")
        .expect("no watcher error");
    let describe = |variant, m: &Meta| {
        let location = m
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("location").cloned())
            .unwrap_or_default();
        (
            variant,
            m.metadata.name.clone().unwrap_or_default(),
            location,
        )
    };
    match &ev {
        Event::Init => ("Init", String::new(), String::new()),
        Event::InitApply(m) => describe("InitApply", m),
        Event::InitDone => ("InitDone", String::new(), String::new()),
        Event::Apply(m) => describe("Apply", m),
        Event::Delete(m) => describe("Delete", m),
    }
}

fn ev(variant: &'static str, name: &str, location: &str) -> (&'static str, String, String) {
    (variant, name.to_owned(), location.to_owned())
}

#[tokio::test]
async fn metadata_watcher_follows_a_sites_nodes() {
    let h = start_two_sites().await;
    let config = kube::Config::new(h.handle.url().parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let selector = watcher::Config::default().labels("location=beijing");
    // The name the brief and older kube-rs use; kube 5 deprecates it for
    // `watcher` over `Api<PartialObjectMeta<K>>`, which sends the same requests.
    #[allow(deprecated)]
    let mut old =
        watcher::metadata_watcher(Api::<Node>::all(client.clone()), selector.clone()).boxed();
    let mut new = watcher::watcher(Api::<Meta>::all(client), selector).boxed();
    for stream in [&mut old, &mut new] {
        assert_eq!(next(stream).await.0, "Init");
        for name in ["bj-1", "bj-2", "bj-3"] {
            assert_eq!(next(stream).await, ev("InitApply", name, "beijing"));
        }
        assert_eq!(next(stream).await.0, "InitDone");
    }
    // Both watches are open before anything changes.
    for _ in 0..100 {
        if h.server.open_watches().get("nodes") == Some(&2) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let gz1 = h.server.get("nodes", None, "gz-1").unwrap();
    h.server.apply(relabelled(&gz1, "beijing"));
    let bj1 = h.server.get("nodes", None, "bj-1").unwrap();
    h.server.apply(relabelled(&bj1, "guangzhou"));
    let bj2_before = h.server.get("nodes", None, "bj-2").unwrap();
    let bj2 = h.server.heartbeat("bj-2").unwrap();
    for stream in [&mut old, &mut new] {
        assert_eq!(next(stream).await, ev("Apply", "gz-1", "beijing"));
        // The last state it had in the site.
        assert_eq!(next(stream).await, ev("Delete", "bj-1", "beijing"));
        // A heartbeat reaches metadata watchers too: its resourceVersion and
        // the kubelet's managedFields time changed.
        assert_eq!(next(stream).await, ev("Apply", "bj-2", "beijing"));
    }
    assert_ne!(
        bj2["metadata"]["resourceVersion"],
        bj2_before["metadata"]["resourceVersion"]
    );
    // Every read went through the metadata form.
    let nodes = &h.server.egress().resources["nodes"];
    assert_eq!(nodes.metadata.lists, 2);
    assert_eq!(nodes.metadata.watches_opened, 2);
    assert_eq!(nodes.full.lists + nodes.full.watches_opened, 0);
}
