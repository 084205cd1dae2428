//! Keeping the cache in sync with the API server: discover which
//! EndpointSlice version it serves, start the writer, and run one upstream
//! list/watch per wanted kind feeding it (a kind wanted later starts then).
//! Runs until its task is dropped.

use std::time::Duration;

use futures::StreamExt;
use tokio::{
    sync::{mpsc, watch},
    task::JoinSet,
};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{debug, error, info, warn};

use kube::runtime::watcher;
use sitegrid_cache::{
    ApiVersion, Cache, LocalPod, Locality, ResourceKind, UpstreamBody, UpstreamObject, WriterInput,
    WriterSlot,
};

use super::{
    errors::{self, ErrorStreak},
    membership,
    protobuf::ProtobufLayer,
    reflector,
};

/// How long past its `timeoutSeconds` an upstream watch may stay silent
/// before it is taken for stalled.
const WATCH_IDLE_MARGIN: Duration = Duration::from_secs(2);

/// Events buffered between the reflectors and the writer.
const WRITER_QUEUE: usize = 1024;

/// The sync running on a thread of its own (a single-threaded runtime): the
/// upstream lists are decoded, buffered and projected there, so the heap
/// they pass through is one glibc arena, which the next list reuses,
/// rather than one per serving thread, each keeping its share of the peak
/// (docs/decisions/0003).
/// Stops when dropped, or with [`SyncThread::stop`], which also waits for
/// the writer's last snapshot.
pub struct SyncThread {
    _stop: DropGuard,
    stop: CancellationToken,
    done: tokio::sync::oneshot::Receiver<()>,
}

impl SyncThread {
    /// Starts the sync of the cache behind `slot` for `locality` from
    /// the API server `config` names; an error if the client cannot be built
    /// from it (bad TLS material, say) or the thread cannot start. `local`:
    /// the kubelet's reports of its pods while the API server is
    /// unreachable, for the writer to serve (a node with the node cache).
    pub fn start(
        config: kube::Config,
        slot: WriterSlot,
        locality: Locality,
        local: Option<watch::Receiver<Vec<LocalPod>>>,
    ) -> Result<SyncThread, kube::Error> {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let (built_tx, built_rx) = std::sync::mpsc::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("sitegrid-sync".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        error!(error = %e, "cannot start the sync's runtime");
                        return;
                    }
                };
                runtime.block_on(async move {
                    // The client (its connection pool) lives on this runtime.
                    let settings = *slot.cache().config();
                    let protobuf =
                        ProtobufLayer::new(settings.upstream_protobuf, Some(slot.cache().clone()));
                    // A watch asked to end after `watch_timeout` and silent for
                    // 2 s more has stalled (kube-runtime's own guard is at 5 s).
                    let client = match super::client::reflector_client(
                        &config,
                        settings.list_timeout,
                        settings.watch_timeout + WATCH_IDLE_MARGIN,
                        protobuf.clone(),
                        Some(slot.cache().clone()),
                    ) {
                        Ok(client) => {
                            let _ = built_tx.send(Ok(()));
                            client
                        }
                        Err(e) => {
                            let _ = built_tx.send(Err(e));
                            return;
                        }
                    };
                    run(client, protobuf, slot, locality, stopped, local).await;
                    debug!("sync stopped");
                });
                let _ = done_tx.send(());
            });
        if let Err(e) = thread {
            error!(error = %e, "cannot start the sync thread");
            return Err(kube::Error::Service(Box::new(e)));
        }
        // Building a client is quick and does no I/O: waiting here is brief.
        match built_rx.recv() {
            Ok(Err(e)) => Err(e),
            _ => Ok(SyncThread {
                _stop: stop.clone().drop_guard(),
                stop,
                done,
            }),
        }
    }

    /// Stops the sync and waits (up to `limit`) until it has ended, the
    /// writer's last snapshot written.
    pub async fn stop(self, limit: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(limit, self.done).await.is_err() {
            warn!(?limit, "the sync did not stop in time");
        }
    }
}

/// Discovers the upstream (retrying until it answers), then keeps the cache
/// in sync for `locality` until `stop`: then the reflectors end, and
/// the writer writes its last snapshot before this returns. A cache
/// restored from a snapshot has its writer from the start, so that what the
/// kubelet reports while the API server is unreachable (`local`) is served.
/// `protobuf`: the layer of `client` that reads protobuf.
pub async fn run(
    client: kube::Client,
    protobuf: ProtobufLayer,
    slot: WriterSlot,
    locality: Locality,
    stop: CancellationToken,
    local: Option<watch::Receiver<Vec<LocalPod>>>,
) {
    let cache = slot.cache();
    let (tx, rx) = mpsc::channel(WRITER_QUEUE);
    let start = |slot: WriterSlot, rx, version| {
        let writer = slot.start(locality.clone(), version);
        (
            writer.topology_keys(),
            tokio::spawn(writer.run(rx, local.clone())),
        )
    };
    // Restored: the writer runs before the API server answers.
    let writer = if cache.readiness().restored_from().is_some() {
        Ok(start(slot, rx, cache.native(ResourceKind::EndpointSlices)))
    } else {
        Err((slot, rx))
    };
    let slice_version = tokio::select! {
        v = discover_with_retry(&client, &cache) => v,
        () = stop.cancelled() => {
            drop(tx);
            if let Ok((_, writing)) = writer {
                let _ = writing.await;
            }
            return;
        }
    };
    info!(
        endpointslices = slice_version.as_str(),
        "upstream discovered; syncing"
    );
    let (keys, writing) = match writer {
        Ok(started) => {
            let _ = tx.send(WriterInput::SliceVersion(slice_version)).await;
            started
        }
        Err((slot, rx)) => start(slot, rx, slice_version),
    };
    let mut tasks = JoinSet::new();
    // Nodes: the local node(s) and the nodes sharing a local value of a key
    // in use, never the whole cluster's (see `membership`).
    tasks.spawn(membership::reflect_nodes(
        client.clone(),
        locality,
        keys,
        tx.clone(),
        cache.clone(),
    ));
    for kind in ResourceKind::ALL {
        if kind == ResourceKind::Nodes {
            continue;
        }
        let (client, tx, cache) = (client.clone(), tx.clone(), cache.clone());
        let protobuf = protobuf.clone();
        if ResourceKind::ONLY_ON_DEMAND.contains(&kind) {
            tasks.spawn(reflect_discovered(client, protobuf, kind, tx, cache));
            continue;
        }
        tasks.spawn(async move {
            // On demand: nothing goes upstream for a kind no client asked for.
            if !cache.readiness().is_wanted(kind) {
                cache.readiness().wanted(kind).await;
                info!(resource = %kind, "first request; syncing");
            }
            // Endpoints and EndpointSlices wait for the topology inputs: no
            // view of theirs can be made before, and a Services list held
            // (until complete) while thousands of slices arrive would leave
            // its space scattered between their long-lived copies.
            if kind != ResourceKind::Services {
                cache
                    .readiness()
                    .synced(&[ResourceKind::Services, ResourceKind::Nodes])
                    .await;
            }
            reflect(client, &protobuf, kind, slice_version, tx, cache).await
        });
    }
    drop(tx);
    // Nothing here ends on its own; when one does, it is logged and the rest go on.
    loop {
        tokio::select! {
            ended = tasks.join_next() => match ended {
                Some(Err(err)) => warn!(error = %err, "a sync task ended abnormally"),
                Some(Ok(())) => {}
                None => break,
            },
            () = stop.cancelled() => break,
        }
    }
    // The reflectors' senders go with them: the writer drains, writes, ends.
    tasks.shutdown().await;
    if let Err(err) = writing.await {
        warn!(error = %err, "the writer ended abnormally");
    }
}

/// How often, at most, discovery is read again for a kind the API server
/// did not serve (when requests for it keep coming): an upgraded API server
/// that starts serving it is noticed within this.
const RECHECK: Duration = Duration::from_secs(60);

/// A kind not every API server has (ServiceCIDRs), from the first request
/// for it: discovery says which versions the API server serves. None: the
/// kind is absent (its requests get `404`) until a later request wants it,
/// and discovery is read again, at most once per [`RECHECK`]. Some: it is
/// listed and watched in the preferred one, for good.
async fn reflect_discovered(
    client: kube::Client,
    protobuf: ProtobufLayer,
    kind: ResourceKind,
    tx: mpsc::Sender<WriterInput>,
    cache: Cache,
) {
    let readiness = cache.readiness();
    let mut checked: Option<tokio::time::Instant> = None;
    let mut delay = Duration::from_millis(200);
    loop {
        readiness.wanted(kind).await;
        if let Some(at) = checked {
            tokio::time::sleep_until(at + RECHECK).await;
        }
        match served_versions(&client, kind).await {
            Ok(versions) => {
                readiness.upstream_working();
                readiness.upstream_serves(kind, &versions);
                checked = Some(tokio::time::Instant::now());
                let Some(version) = versions.first() else {
                    info!(resource = %kind, group = kind.group(), "the API server does not serve it; requests get 404");
                    continue;
                };
                info!(resource = %kind, version = version.as_str(), "first request; syncing");
                return reflect(client, &protobuf, kind, *version, tx, cache).await;
            }
            Err(err) => {
                let reason = errors::client_reason(&err);
                cache.metrics().upstream_error(kind, reason);
                if reason.is_upstream_failing() {
                    readiness.upstream_failing(reason.as_str());
                }
                warn!(resource = %kind, error = %err, retry_in = ?delay, "cannot read discovery");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// The versions (preferred first) in which the API server serves `kind`,
/// from its discovery documents; none when it has neither the group nor the
/// resource in it.
async fn served_versions(
    client: &kube::Client,
    kind: ResourceKind,
) -> Result<Vec<ApiVersion>, kube::Error> {
    let mut served = Vec::new();
    for version in ApiVersion::BOTH {
        let group_version = format!("{}/{}", kind.group(), version.as_str());
        match client.list_api_group_resources(&group_version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == kind.plural()) => {
                served.push(version)
            }
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err),
        }
    }
    Ok(served)
}

/// One kind's list/watch in `version`, forwarded to the writer; errors are
/// counted (by reason), logged once per streak, and retried. An object read
/// from protobuf that does not decode completely is not forwarded, nor
/// anything after it: the resource is read in JSON from then on
/// (`protobuf`), listed again from the start.
pub(super) async fn reflect(
    client: kube::Client,
    protobuf: &ProtobufLayer,
    kind: ResourceKind,
    version: ApiVersion,
    tx: mpsc::Sender<WriterInput>,
    cache: Cache,
) {
    let resource = kind.api_resource(version);
    let watch_timeout = cache.config().watch_timeout;
    let mut errors = ErrorStreak::new(kind);
    loop {
        let mut events = std::pin::pin!(reflector::watch(client.clone(), &resource, watch_timeout));
        while let Some(item) = events.next().await {
            match item {
                Ok(event) => {
                    errors.over(&cache);
                    if let Some(why) = unreadable_protobuf(&event) {
                        if protobuf.unreadable(kind, version, why) {
                            break;
                        }
                    }
                    if tx.send((kind, event).into()).await.is_err() {
                        debug!(resource = %kind, "writer gone; reflector stops");
                        return;
                    }
                }
                // The backoff stream retries by itself; the cache keeps serving meanwhile.
                Err(err) => errors.failed(&cache, &err),
            }
        }
    }
}

/// Why the object of `event`, read from protobuf, does not decode, if so.
fn unreadable_protobuf(event: &watcher::Event<UpstreamObject>) -> Option<&str> {
    match event {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o)
            if matches!(o.body, UpstreamBody::UnreadableProtobuf) =>
        {
            Some(o.invalid.as_deref().unwrap_or("unreadable"))
        }
        _ => None,
    }
}

/// Which EndpointSlice version the upstream serves: `v1` when it has it,
/// else `v1beta1` (Kubernetes 1.20). Retries with backoff until it answers.
async fn discover_with_retry(client: &kube::Client, cache: &Cache) -> ApiVersion {
    let mut delay = Duration::from_millis(200);
    loop {
        let found = reflector::group_versions(client, ResourceKind::EndpointSlices.group()).await;
        if found.is_ok() {
            cache.readiness().upstream_working();
        }
        match found {
            Ok(versions) if versions.iter().any(|v| v == "v1") => return ApiVersion::V1,
            Ok(_) => return ApiVersion::V1beta1,
            Err(err) => {
                cache.readiness().upstream_unreachable();
                let reason = errors::client_reason(&err);
                if reason.is_upstream_failing() {
                    cache.readiness().upstream_failing(reason.as_str());
                }
                warn!(error = %err, retry_in = ?delay, "cannot reach the API server for discovery");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
}
