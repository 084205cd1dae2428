//! sitegrid-proxy's cache: per-resource served state, built by the one
//! [`Writer`] (the projector) from the upstream reflectors' events and read
//! through cloneable [`Cache`] handles. It does no I/O but the snapshot
//! file: the proxy's `upstream` feeds it, its handlers read it.
//!
//! The type system says who may write: [`new`] returns the only
//! [`WriterSlot`], which becomes the [`Writer`] once the upstream's
//! EndpointSlice version is known; a `Cache` has read methods only.
//!
//! In the order data flows:
//!
//! - [`UpstreamObject`]: an object as the API server sent it (raw JSON, or
//!   the value decoded from its protobuf, and the metadata the reflectors
//!   need).
//! - `writer`: the projector. It keeps the upstream objects, buffers
//!   relists, and recomputes the views of Endpoints and EndpointSlices
//!   through [`topology`] for the [`Locality`] served; each change that
//!   alters what a client sees gets the next resourceVersion.
//! - `encode`, [`View`]: each view encoded once per wire format, kept
//!   compressed.
//! - [`Store`], [`Event`]: the served objects and the resume log of one
//!   kind, with the broadcast that watchers follow ([`WatcherRegistry`]
//!   counts them).
//! - [`lists`]: whole lists encoded once per version of their kind and
//!   shared by the LISTs that ask for them.
//! - [`Readiness`]: which kinds are served, from the API server or from a
//!   snapshot.
//! - [`persist`]: the snapshot in the data directory, written behind the
//!   writer and read at start.
#![warn(missing_docs)]

mod encode;
mod event;
pub mod kind;
pub mod lists;
mod locality;
mod meaning;
mod metrics;
mod object;
pub mod persist;
mod ready;
mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topology;
mod view;
mod watchers;
mod writer;

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::sync::watch;

pub use encode::{
    codec::{Codec, LabelWords, Packed},
    json, proto, Encoded, Wire,
};
pub use event::{Event, EventType};
pub use kind::{ApiVersion, PerKind, ResourceKind, Served};
pub use locality::Locality;
pub use metrics::{CacheMetrics, UpstreamErrorReason};
pub use object::{object_key, UpstreamBody, UpstreamObject};
pub use ready::{Availability, Readiness};
pub use store::{Change, Sizes, Store, StoreExport, Subscription, TooOld};
pub use view::{View, ViewLabels};
pub use watchers::{WatcherHandle, WatcherInfo, WatcherRegistry, WatcherSnapshot};
pub use writer::{LocalPod, UpstreamEvent, Writer, WriterInput, WriterSlot};

/// The node scopes the cache holds: label key → the values whose nodes it
/// has (the proxy's node membership decides them).
pub type NodeScopes = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// Sizes of the bounded buffers, and how the upstream is read.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Events kept per resource for watch resume.
    pub log_capacity: usize,
    /// About how many bytes those events may pin, per resource.
    pub log_bytes: usize,
    /// Events a watcher may fall behind by before it is ended with 410.
    pub watcher_buffer: usize,
    /// Endpoints and EndpointSlices are reflected from the first request for
    /// them, not from the start (Services and Nodes always are).
    pub on_demand: bool,
    /// The `timeoutSeconds` upstream watches ask for (default 290 s, as
    /// kube-rs; client-go picks 5 to 10 minutes). A watch silent for 5 s
    /// more is taken for dead and re-watched from the last version seen.
    pub watch_timeout: Duration,
    /// The longest an upstream list page (or discovery) may take, body
    /// included (default 60 s, kube-apiserver's own limit for a request
    /// that is not a watch); then it is abandoned and retried.
    pub list_timeout: Duration,
    /// Whether cached encodings are kept compressed (see [`Codec`]).
    pub compress: bool,
    /// Whether Services, Endpoints and EndpointSlices are read from
    /// upstream in protobuf when it offers it (turned into JSON on arrival).
    pub upstream_protobuf: bool,
    /// Whether views are served without `metadata.managedFields`.
    pub drop_managed_fields: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            log_capacity: 10_000,
            log_bytes: 2 << 20,
            watcher_buffer: 1_000,
            on_demand: false,
            watch_timeout: Duration::from_secs(290),
            list_timeout: Duration::from_secs(60),
            compress: true,
            upstream_protobuf: true,
            drop_managed_fields: false,
        }
    }
}

/// A read handle on the cache (cheap to clone).
#[derive(Clone)]
pub struct Cache(Arc<Shared>);

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("start_rv", &self.0.start_rv)
            .finish_non_exhaustive()
    }
}

/// What readers and the writer share.
struct Shared {
    config: CacheConfig,
    stores: PerKind<Store>,
    /// The newest resourceVersion committed, across resources.
    clock: watch::Sender<u64>,
    /// The first resourceVersion of this process; every earlier one is from a previous run.
    start_rv: u64,
    readiness: Readiness,
    /// The EndpointSlice version the upstream serves, which the slices are
    /// stored in; set once, when the writer starts.
    slice_version: OnceLock<ApiVersion>,
    watchers: Arc<WatcherRegistry>,
    metrics: CacheMetrics,
    /// The persisted copy's figures.
    persist: persist::PersistStatus,
    /// The node scopes the Nodes store holds in full.
    node_scopes: parking_lot::RwLock<NodeScopes>,
    /// How this cache's encodings are kept compact; its views read back through it.
    codec: Arc<Codec>,
    /// Kinds that have held an object with fields the protobuf encoder does
    /// not know (see [`Cache::protobuf_complete`]); never cleared while the
    /// process runs.
    protobuf_lossy: PerKind<AtomicBool>,
}

impl Shared {
    /// See [`Cache::protobuf_lossy`].
    fn protobuf_lossy(&self, kind: ResourceKind, key: &str, fields: &[String]) {
        if !self.protobuf_lossy[kind].swap(true, Ordering::AcqRel) {
            tracing::warn!(
                resource = %kind,
                %key,
                fields = %fields.join(","),
                "an object has fields this proxy cannot write in protobuf; its kind is served \
                 in JSON from now on, also to clients that prefer protobuf (they accept JSON too)"
            );
        }
    }
}

/// An empty cache whose versions start now, and the one slot its writer comes from.
pub fn new(config: CacheConfig) -> (Cache, WriterSlot) {
    with_start_rv(config, start_rv_now())
}

/// An empty cache whose versions start after `start_rv`.
pub fn with_start_rv(config: CacheConfig, start_rv: u64) -> (Cache, WriterSlot) {
    let codec = Arc::new(Codec::new(config.compress));
    let shared = build(config, start_rv, readiness(config), codec);
    (Cache(shared.clone()), WriterSlot::new(shared, None))
}

/// The cache with what the data directory held: the snapshot's kinds
/// restored (served once the API server fails to answer, see
/// [`Readiness`]), versions starting after both the snapshot's clock and
/// now, and a writer that keeps the snapshot current on `opened.disk`.
pub fn open(config: CacheConfig, opened: persist::Opened) -> (Cache, WriterSlot) {
    let persist::Opened { disk, restored } = opened;
    let Some(restored) = restored else {
        let codec = Arc::new(Codec::new(config.compress));
        let shared = build(config, start_rv_now(), readiness(config), codec);
        return (Cache(shared.clone()), WriterSlot::new(shared, disk));
    };
    let kinds: Vec<ResourceKind> = ResourceKind::ALL
        .into_iter()
        .filter(|k| restored.kinds[*k].is_some())
        .collect();
    let readiness = readiness(config).restoring(&kinds, restored.written);
    // A clock stepped back must not hand out versions a client already holds.
    let start_rv = start_rv_now().max(restored.clock + 1);
    // The restored views read back through the codec that made them.
    let shared = build(config, start_rv, readiness, restored.codec);
    let _ = shared.slice_version.set(restored.slice_version);
    shared.persist.loaded(restored.written);
    for (kind, entry) in restored.kinds.into_entries() {
        if let Some(k) = entry {
            if let Some((key, fields)) = &k.protobuf_lossy {
                shared.protobuf_lossy(kind, key, fields);
            }
            shared.stores[kind].restore(StoreExport {
                objects: k.objects,
                log: k.log,
                compacted_rv: k.compacted_rv,
                last_rv: k.last_rv,
            });
        }
    }
    (Cache(shared.clone()), WriterSlot::new(shared, disk))
}

/// What is wanted from the start: every kind, or with on-demand
/// reflection the topology inputs only.
fn readiness(config: CacheConfig) -> Readiness {
    if config.on_demand {
        Readiness::wanting(&[])
    } else {
        Readiness::default()
    }
}

fn build(
    config: CacheConfig,
    start_rv: u64,
    readiness: Readiness,
    codec: Arc<Codec>,
) -> Arc<Shared> {
    Arc::new(Shared {
        config,
        stores: PerKind::new(|_| {
            Store::new(
                start_rv,
                config.log_capacity,
                config.log_bytes,
                config.watcher_buffer,
            )
        }),
        clock: watch::channel(start_rv).0,
        start_rv,
        readiness,
        slice_version: OnceLock::new(),
        watchers: Arc::default(),
        metrics: CacheMetrics::default(),
        persist: persist::PersistStatus::default(),
        node_scopes: parking_lot::RwLock::default(),
        codec,
        protobuf_lossy: PerKind::default(),
    })
}

impl Cache {
    /// What the cache was opened with.
    pub fn config(&self) -> &CacheConfig {
        &self.0.config
    }

    /// The node scopes whose nodes the cache holds, complete (listed).
    pub fn node_scopes(&self) -> NodeScopes {
        self.0.node_scopes.read().clone()
    }

    /// Records the scopes the writer has been given in full.
    pub fn set_node_scopes(&self, scopes: NodeScopes) {
        *self.0.node_scopes.write() = scopes;
    }

    /// Whether every object of `kind` the cache has held could be encoded
    /// in protobuf without losing a field. Once one could not (a field of an
    /// API version newer than the encoder's types), protobuf clients that
    /// also take JSON get JSON for this kind, and open protobuf watches end
    /// before its next event, until the process restarts: an object must not
    /// be served as if complete without some of its fields.
    pub fn protobuf_complete(&self, kind: ResourceKind) -> bool {
        !self.0.protobuf_lossy[kind].load(Ordering::Acquire)
    }

    /// Records that `key` of `kind` has `fields` the protobuf encoder does
    /// not know (logged the first time for the kind).
    pub(crate) fn protobuf_lossy(&self, kind: ResourceKind, key: &str, fields: &[String]) {
        self.0.protobuf_lossy(kind, key, fields);
    }

    /// The store of one resource.
    pub fn store(&self, kind: ResourceKind) -> &Store {
        &self.0.stores[kind]
    }

    /// The first resourceVersion of this process.
    pub fn start_rv(&self) -> u64 {
        self.0.start_rv
    }

    /// The newest resourceVersion handed out, across resources.
    pub fn current_rv(&self) -> u64 {
        *self.0.clock.borrow()
    }

    /// Waits until the clock reaches `rv`; false if it did not within `limit`.
    pub async fn wait_for_rv(&self, rv: u64, limit: Duration) -> bool {
        let mut rx = self.0.clock.subscribe();
        let reached = tokio::time::timeout(limit, rx.wait_for(|cur| *cur >= rv)).await;
        matches!(reached, Ok(Ok(_)))
    }

    /// Which kinds are served.
    pub fn readiness(&self) -> &Readiness {
        &self.0.readiness
    }

    /// The version objects of `kind` are stored in (the upstream's).
    pub fn native(&self, kind: ResourceKind) -> ApiVersion {
        match kind {
            ResourceKind::EndpointSlices => self
                .0
                .slice_version
                .get()
                .copied()
                .unwrap_or(ApiVersion::V1),
            _ => ApiVersion::V1,
        }
    }

    /// The version `served`'s objects are stored in, as far as their JSON
    /// goes: the native one where the two versions differ (EndpointSlices),
    /// else the one asked for (the stored body serves both).
    fn stored_as(&self, served: Served) -> ApiVersion {
        if served.kind.versions_differ() {
            self.native(served.kind)
        } else {
            served.version
        }
    }

    /// `view`'s body as `served` asks for it.
    pub fn body<'v>(&self, view: &'v View, served: Served) -> &'v Encoded {
        view.body(&self.0.codec, served.version, self.stored_as(served))
    }

    /// `view`'s protobuf message as `served` asks for it, encoded once and shared.
    pub fn message(
        &self,
        view: &View,
        served: Served,
    ) -> Result<bytes::Bytes, sitegrid_apimachinery::protobuf::EncodeError> {
        view.message(&self.0.codec, served, self.stored_as(served))
    }

    /// `view`'s protobuf message as `served` asks for it, as the view keeps
    /// it (encoded once), to unpack where the caller wants it.
    pub fn packed_message<'v>(
        &self,
        view: &'v View,
        served: Served,
    ) -> Result<&'v Packed, sitegrid_apimachinery::protobuf::EncodeError> {
        view.packed_message(&self.0.codec, served, self.stored_as(served))
    }

    /// `event`'s watch frame as `served` asks for it in `wire`, encoded once and shared.
    pub fn frame(
        &self,
        event: &Event,
        served: Served,
        wire: Wire,
    ) -> Result<bytes::Bytes, sitegrid_apimachinery::protobuf::EncodeError> {
        event.frame(&self.0.codec, served, self.stored_as(served), wire)
    }

    /// The open watches.
    pub fn watchers(&self) -> &Arc<WatcherRegistry> {
        &self.0.watchers
    }

    /// The counters the cache's users record.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.0.metrics
    }

    /// The persisted copy's figures.
    pub fn persisted(&self) -> &persist::PersistStatus {
        &self.0.persist
    }

    /// How this cache's encodings are kept: its views' labels read back through it.
    pub fn codec(&self) -> &Codec {
        &self.0.codec
    }
}

/// The proxy's first resourceVersion: microseconds since the epoch. Each event
/// takes the next number, so versions keep increasing across restarts as long
/// as a process averages under a million events per second; a client holding
/// a version from an earlier run is therefore always below the new start and
/// gets 410, never a wrong replay.
pub fn start_rv_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(1)
}
