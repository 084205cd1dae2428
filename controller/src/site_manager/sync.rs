//! The shell of the site-manager controller: reflects Nodes (trimmed to what
//! membership reads: metadata, taints, cordon and the Ready condition),
//! NodeUnits and NodeGroups; after each burst of changes runs one pass
//! ([`super::execute`]: [`super::decide::decide`] over the stores, its
//! actions written).
//!
//! Writes are merge patches (a node's labels and annotations key by key; its
//! taint list, which a merge patch replaces whole, guarded by the node's
//! resourceVersion). A write that fails is retried by the next pass, which
//! comes after [`RETRY`] at the latest.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use sitegrid_api::site_manager::{NodeGroup, NodeUnit};

use super::execute::Executor;
use super::SiteManagerOptions;
use crate::metrics::Metrics;

/// How long to let a burst of events settle before a pass.
const SETTLE: Duration = Duration::from_millis(100);
/// A pass this often anyway (a pass at rest writes nothing).
const RESYNC: Duration = Duration::from_secs(60);
/// How long a pass waits at most for the watches to bring the objects the
/// previous pass wrote.
const CATCH_UP: Duration = Duration::from_secs(5);
/// A pass this soon after one whose writes failed.
const RETRY: Duration = Duration::from_secs(3);

/// Runs until `stop` resolves.
pub async fn run(
    client: Client,
    options: SiteManagerOptions,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()>,
) {
    let (nodes, node_events) = reflect(Api::<Node>::all(client.clone()), trim_node);
    let (units, unit_events) = reflect(Api::<NodeUnit>::all(client.clone()), |_| {});
    let (groups, group_events) = reflect(Api::<NodeGroup>::all(client.clone()), |_| {});
    let mut events = std::pin::pin!(futures::stream::select(
        futures::stream::select(node_events, unit_events),
        group_events
    ));
    let mut stop = std::pin::pin!(stop);
    let writer = Executor::new(client, metrics);
    let mut synced = false;
    // Whether something changed since the last pass began.
    let mut changed = false;
    let mut next = RESYNC;
    loop {
        // Wait for a change, or for the resync.
        let timer = tokio::time::sleep(next);
        let mut timer = std::pin::pin!(timer);
        while !changed {
            tokio::select! {
                () = &mut stop => return,
                () = &mut timer => break,
                event = events.next() => match event {
                    None => return,
                    Some(Err(err)) => tracing::warn!(%err, "sites: watch"),
                    Some(Ok(())) => changed = true,
                },
            }
        }
        if !synced {
            // Nothing is decided from a partial picture: wait until every
            // store has had its first full list.
            let ready = |r: Option<Result<(), _>>| matches!(r, Some(Ok(())));
            synced = ready(nodes.wait_until_ready().now_or_never())
                && ready(units.wait_until_ready().now_or_never())
                && ready(groups.wait_until_ready().now_or_never());
            if !synced {
                changed = false;
                continue;
            }
            tracing::info!(
                nodes = nodes.state().len(),
                units = units.state().len(),
                groups = groups.state().len(),
                "sites: caches synced"
            );
        }
        // Let a burst settle, and let the stores see every write of the last
        // pass, so a pass neither repeats a write nor trips over a version it
        // already changed.
        let settle = tokio::time::sleep(SETTLE);
        if drive(settle, &mut events, &mut changed, &mut stop)
            .await
            .is_none()
        {
            return;
        }
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        while writer.behind(&nodes, &units, &groups) && tokio::time::Instant::now() < deadline {
            let wait = tokio::time::sleep(SETTLE / 5);
            if drive(wait, &mut events, &mut changed, &mut stop)
                .await
                .is_none()
            {
                return;
            }
        }
        writer.forget_writes();
        changed = false;
        let pass = writer.pass(&options, &nodes, &units, &groups);
        let Some(ok) = drive(pass, &mut events, &mut changed, &mut stop).await else {
            return;
        };
        next = if ok { RESYNC } else { RETRY };
    }
}

/// Awaits `work` while keeping the watches read (the stores current, and no
/// watch left unread long enough for the API server to drop it), noting in
/// `changed` whether anything arrived. `None` when `stop` resolved or the
/// watches ended.
async fn drive<T>(
    work: impl std::future::Future<Output = T>,
    events: &mut (impl Stream<Item = Result<(), watcher::Error>> + Unpin),
    changed: &mut bool,
    stop: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> Option<T> {
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            () = &mut *stop => return None,
            done = &mut work => return Some(done),
            event = events.next() => match event {
                None => return None,
                Some(Err(err)) => tracing::warn!(%err, "sites: watch"),
                Some(Ok(())) => *changed = true,
            },
        }
    }
}

/// Keeps of a Node only what membership reads: the status shrinks to the
/// Ready condition without its heartbeat time (images, volumes, addresses
/// and heartbeats are dropped as they arrive).
fn trim_node(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(status) = node.status.as_mut() {
        let ready = status
            .conditions
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ == "Ready")
            .map(|mut c| {
                c.last_heartbeat_time = None;
                c
            })
            .collect();
        *status = NodeStatus {
            conditions: Some(ready),
            ..NodeStatus::default()
        };
    }
}

/// A reflector whose events are reduced to "something changed".
fn reflect<K>(
    api: Api<K>,
    trim: impl FnMut(&mut K) + Send + 'static,
) -> (
    Store<K>,
    impl Stream<Item = Result<(), watcher::Error>> + Send,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + serde::de::DeserializeOwned
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(trim),
    )
    .map(|event| event.map(|_| ()));
    (reader, stream)
}
