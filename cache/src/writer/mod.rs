//! The writer: the one place that changes the cache (the projector).
//!
//! It keeps the raw upstream objects, buffers relists until they complete and
//! then applies only the differences, and recomputes the topology views of
//! Endpoints and EndpointSlices when their objects, their Service's
//! `topologyKeys` or the relevant node labels change ([`project`]). Every
//! change whose served content really differs gets the next resourceVersion
//! and is committed in one batch per resource; readiness is published right
//! after the commit that completes a kind.

#[cfg(test)]
mod chain_tests;
mod incoming;
mod local;
mod persisting;
mod project;
#[cfg(test)]
mod tests;
mod unreadable;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::{
    kind::{ApiVersion, PerKind, ResourceKind},
    persist::Disk,
    topology::{NodeLabels, TopologyKeys},
    Cache, Change, EventType, Locality, NodeScopes, Shared, View,
};
use crate::{UpstreamBody, UpstreamObject};
use incoming::{Incoming, Once, Rv, Stored};
use persisting::Persister;
use project::ServiceLinks;
use sitegrid_apimachinery::protobuf::to_json::{Decoded, SliceMessage};
use unreadable::Skipped;

pub use local::LocalPod;
use local::LocalPods;

/// The most upstream events committed together (`Writer::take`): a
/// batch's changes are looked up linearly while it is built.
const BATCH: usize = 64;

/// What a reflector hands the writer.
pub type UpstreamEvent = (ResourceKind, watcher::Event<UpstreamObject>);

/// What the writer consumes: reflector events, and from the node membership
/// which node scopes it has sent in full (after their nodes, in order).
#[derive(Debug)]
// The events are the common case and already travel by value; boxing them
// for the rare scopes message would cost an allocation per event.
#[allow(clippy::large_enum_variant)]
pub enum WriterInput {
    /// A reflector's event.
    Upstream(UpstreamEvent),
    /// The node scopes whose nodes the writer now has (see [`Writer::covered`]).
    NodeScopes(NodeScopes),
    /// The EndpointSlice version the API server serves, once known, for a
    /// writer started from a snapshot before it answered.
    SliceVersion(ApiVersion),
}

impl From<UpstreamEvent> for WriterInput {
    fn from(event: UpstreamEvent) -> Self {
        WriterInput::Upstream(event)
    }
}

/// The right to write the cache: one per cache, not `Clone`. It becomes the
/// [`Writer`] once the upstream's EndpointSlice version is known.
pub struct WriterSlot {
    shared: Arc<Shared>,
    /// Where the writer keeps the snapshot current.
    disk: Option<Disk>,
}

impl WriterSlot {
    pub(super) fn new(shared: Arc<Shared>, disk: Option<Disk>) -> WriterSlot {
        WriterSlot { shared, disk }
    }

    /// The cache this slot writes.
    pub fn cache(&self) -> Cache {
        Cache(self.shared.clone())
    }

    /// The writer for `locality` (a node name, or a site), storing EndpointSlices in
    /// `slice_version` (the version the upstream serves) — or in the
    /// snapshot's, when the cache was restored from one: slices then arrive
    /// converted.
    pub fn start(self, locality: impl Into<Locality>, slice_version: ApiVersion) -> Writer {
        // The slot is consumed, so this is the one setting (unless a snapshot made it).
        let _ = self.shared.slice_version.set(slice_version);
        let cache = Cache(self.shared);
        let native = cache.native(ResourceKind::EndpointSlices);
        let mut writer = Writer {
            next_rv: cache.start_rv() + 1,
            persister: self.disk.map(|disk| Persister::new(disk, &cache)),
            cache,
            locality: locality.into(),
            keys: watch::channel(None).0,
            upstream: PerKind::default(),
            services: ServiceLinks::default(),
            last_keys: None,
            nodes: NodeLabels::new(),
            site_nodes: Vec::new(),
            convert_slices: (native != slice_version).then_some(native),
            skipped: Skipped::default(),
            covered: None,
            parsed: None,
            local: LocalPods::default(),
        };
        if writer.cache.readiness().restored_from().is_some() {
            writer.restore_topology();
        }
        if let Some(to) = writer.convert_slices {
            warn!(snapshot = to.as_str(), upstream = slice_version.as_str(), "the snapshot stores EndpointSlices in another version than the API server now serves; they are converted on arrival");
        }
        writer
    }
}

/// One kind's upstream state as the writer knows it.
#[derive(Default)]
struct Upstream {
    /// The objects by key.
    objects: BTreeMap<Box<str>, Stored>,
    /// A relist in progress: the objects listed so far.
    relist: Option<BTreeMap<String, Incoming>>,
    /// Objects of the relist in progress that were skipped (unreadable):
    /// their last good version stays.
    relist_kept: BTreeSet<String>,
    /// Whether a first full list has arrived.
    synced: bool,
}

/// The cache's single writer.
pub struct Writer {
    cache: Cache,
    /// Whose view is served.
    locality: Locality,
    /// The node-label keys the Services' `topologyKeys` name, once the
    /// Services are listed (what the node membership watches by).
    keys: watch::Sender<Option<BTreeSet<String>>>,
    next_rv: u64,
    upstream: PerKind<Upstream>,
    /// Per Service: its valid `topologyKeys` annotation and its EndpointSlices.
    services: ServiceLinks,
    /// The topology keys last read, shared by the Services that carry the same.
    last_keys: Option<TopologyKeys>,
    nodes: NodeLabels,
    /// A site proxy's local nodes (those its selector matches), kept as the
    /// nodes change: every projection reads them.
    site_nodes: Vec<String>,
    /// The version slices are stored in, when the upstream serves another.
    convert_slices: Option<ApiVersion>,
    /// Keeps the snapshot in the data directory current.
    persister: Option<Persister>,
    /// Upstream objects skipped as unreadable.
    skipped: Skipped,
    /// The node scopes the membership has sent in full; None when nothing
    /// tracks them (a writer fed directly): then nothing is held.
    covered: Option<NodeScopes>,
    /// The object of the watch event being handled, parsed once.
    parsed: Option<Parsed>,
    /// The node's kubelet's reports while the API server is unreachable ([`local`]).
    local: LocalPods,
}

/// The object of the watch event being handled, as parsed when it arrived
/// (an EndpointSlice read from protobuf as its message).
struct Parsed {
    kind: ResourceKind,
    key: String,
    value: Decoded,
}

/// The object of a watch event as read, shared with the event until the
/// writer has taken what it keeps.
enum Arrived {
    Value(Arc<Value>),
    Slice(Arc<SliceMessage>),
}

/// Changes collected while handling one upstream event.
#[derive(Default)]
struct Batch {
    changes: PerKind<Vec<Change>>,
}

impl Writer {
    /// The cache this writer fills.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The node-label keys the Services name (None until they are listed).
    pub fn topology_keys(&self) -> watch::Receiver<Option<BTreeSet<String>>> {
        self.keys.subscribe()
    }

    /// Consumes reflector events until every sender is gone, keeping the
    /// snapshot current meanwhile; writes a last one if anything changed.
    /// `local`: the kubelet's reports of its pods while the API server is
    /// unreachable (a node proxy with the node cache), served in the
    /// endpoints ([`local`]).
    pub async fn run(
        mut self,
        mut rx: mpsc::Receiver<WriterInput>,
        mut local: Option<watch::Receiver<Vec<LocalPod>>>,
    ) {
        let mut ticks = tokio::time::interval(persisting::CHECK_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        if let Some(reports) = &mut local {
            let pods = reports.borrow_and_update().clone();
            self.local_changed(pods);
        }
        loop {
            tokio::select! {
                input = rx.recv() => match input {
                    Some(input) => self.take(input, &mut rx),
                    None => break,
                },
                changed = async { local.as_mut()?.changed().await.ok() }, if local.is_some() => {
                    match (changed, &mut local) {
                        (Some(()), Some(reports)) => {
                            let pods = reports.borrow_and_update().clone();
                            self.local_changed(pods);
                        }
                        // The node cache is gone: its reports with it.
                        _ => local = None,
                    }
                }
                _ = ticks.tick(), if self.persister.is_some() => self.persist_if_due(),
            }
        }
        debug!("writer: all reflectors stopped");
        self.persist_last().await;
    }

    /// The API server serves EndpointSlices in `version` (a writer started
    /// from a snapshot before it answered stored them in the snapshot's).
    pub fn slice_version(&mut self, version: ApiVersion) {
        let native = self.cache.native(ResourceKind::EndpointSlices);
        self.convert_slices = (native != version).then_some(native);
        if self.convert_slices.is_some() {
            warn!(snapshot = native.as_str(), upstream = version.as_str(), "the snapshot stores EndpointSlices in another version than the API server now serves; they are converted on arrival");
        }
    }

    /// The kubelet's reports changed ([`local`]): applied to the served
    /// endpoints, or, when let go (the API server is back), the views made
    /// again from what the API server sent.
    pub fn local_changed(&mut self, pods: Vec<LocalPod>) {
        let local = LocalPods::new(pods);
        if local == self.local {
            return;
        }
        self.local = local;
        let mut batch = Batch::default();
        if self.local.is_empty() {
            if self.topology_ready() {
                self.recompute_all(&mut batch);
            }
        } else {
            for kind in [ResourceKind::Endpoints, ResourceKind::EndpointSlices] {
                let (views, _) = self.cache.store(kind).snapshot("");
                for view in views {
                    let mut value = view.native_body_value();
                    let changed = match kind {
                        ResourceKind::Endpoints => self.local.apply_endpoints(&mut value),
                        _ => self.local.apply_slice(&mut value),
                    };
                    if changed {
                        self.emit(kind, view.key(), Some(value), &mut batch);
                    }
                }
            }
        }
        self.commit(batch);
    }

    /// The membership has sent the nodes of `scopes` in full: Services held
    /// back for a scope that was not complete are projected now.
    pub fn scopes_covered(&mut self, scopes: NodeScopes) {
        if self.covered.as_ref() == Some(&scopes) {
            return;
        }
        let widened = match &self.covered {
            // Nothing was held before scopes were tracked.
            None => false,
            Some(old) => scopes
                .iter()
                .any(|(k, vs)| old.get(k).is_none_or(|o| !vs.is_subset(o))),
        };
        self.covered = Some(scopes);
        if widened && self.topology_ready() {
            let mut batch = Batch::default();
            self.recompute_all(&mut batch);
            self.commit(batch);
        }
    }

    /// Handles one input; an upstream event with the upstream events
    /// already waiting behind it (up to [`BATCH`]), whose changes are
    /// committed at once: each watcher is woken once for all of them and
    /// sends them in one write. Nothing waits for more to arrive; another
    /// input waiting ends the batch and is handled after its commit.
    fn take(&mut self, input: WriterInput, rx: &mut mpsc::Receiver<WriterInput>) {
        let (kind, event) = match input {
            WriterInput::Upstream(first) => first,
            WriterInput::NodeScopes(scopes) => return self.scopes_covered(scopes),
            WriterInput::SliceVersion(version) => return self.slice_version(version),
        };
        let mut batch = Batch::default();
        self.apply(kind, event, &mut batch);
        let mut after = None;
        for _ in 1..BATCH {
            match rx.try_recv() {
                Ok(WriterInput::Upstream((kind, event))) => self.apply(kind, event, &mut batch),
                Ok(other) => {
                    after = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        self.commit(batch);
        if let Some(other) = after {
            self.take(other, rx);
        }
    }

    /// Applies one upstream event and commits what it changed.
    pub fn handle(&mut self, kind: ResourceKind, event: watcher::Event<UpstreamObject>) {
        let mut batch = Batch::default();
        self.apply(kind, event, &mut batch);
        self.commit(batch);
    }

    /// Applies one upstream event to `batch`.
    fn apply(
        &mut self,
        kind: ResourceKind,
        event: watcher::Event<UpstreamObject>,
        batch: &mut Batch,
    ) {
        let metrics = self.cache.metrics();
        match &event {
            watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitApply(_) => {
                metrics.events_in(kind, 1)
            }
            // A list after the first one: the watch had to be re-established from scratch.
            watcher::Event::Init if self.upstream[kind].synced => metrics.upstream_reconnect(kind),
            _ => {}
        }
        let event = match self.convert_slices {
            Some(to) if kind == ResourceKind::EndpointSlices => persisting::convert(event, to),
            _ => event,
        };
        match event {
            watcher::Event::Init => {
                self.upstream[kind].relist = Some(BTreeMap::new());
                self.upstream[kind].relist_kept.clear();
            }
            watcher::Event::InitApply(obj) => match self.checked(kind, &obj) {
                // An unreadable object listed: its last good version stays.
                None => self.keep_last_good(kind, &obj),
                Some(_) => {
                    self.readable_again(kind, &obj.key());
                    // Kept compact until the list completes: a relist of thousands of
                    // objects must not hold them all as parsed metadata.
                    let up = &mut self.upstream[kind];
                    let buf = up.relist.get_or_insert_with(BTreeMap::new);
                    buf.insert(obj.key(), Incoming::new(self.cache.codec(), kind, obj));
                }
            },
            watcher::Event::InitDone => self.relisted(kind, batch),
            watcher::Event::Apply(obj) => match self.checked(kind, &obj) {
                None => self.keep_last_good(kind, &obj),
                Some(read) => {
                    let key = obj.key();
                    self.readable_again(kind, &key);
                    let arrived = match (read, &obj.body) {
                        (Some(value), _) => Arrived::Value(value),
                        (None, UpstreamBody::ProtobufSlice { message, .. }) => {
                            Arrived::Slice(Arc::clone(message))
                        }
                        // Kept as text (a watch event's object never is,
                        // so not expected): read here.
                        (None, _) => Arrived::Value(Arc::new(obj.value().unwrap_or_default())),
                    };
                    let incoming = Incoming::new(self.cache.codec(), kind, obj);
                    // Parsed once: its views are made from this copy (the
                    // object's own, taken once `incoming` has what it keeps).
                    let value = match arrived {
                        Arrived::Value(v) => Decoded::Value(Arc::unwrap_or_clone(v)),
                        Arrived::Slice(m) => Decoded::Slice(Arc::unwrap_or_clone(m)),
                    };
                    self.parsed = Some(Parsed {
                        kind,
                        key: key.clone(),
                        value,
                    });
                    self.changed(kind, vec![(key, incoming)], Vec::new(), batch);
                    self.parsed = None;
                }
            },
            // A deletion needs the key only, which even an unreadable object has.
            watcher::Event::Delete(obj)
                if obj.metadata.name.as_deref().unwrap_or("").is_empty() =>
            {
                self.skip(kind, &obj, "no metadata.name");
            }
            watcher::Event::Delete(obj) => {
                let key = obj.key();
                self.readable_again(kind, &key);
                let old = self.upstream[kind]
                    .objects
                    .remove(key.as_str())
                    .unwrap_or_else(|| Stored::of(self.cache.codec(), kind, &obj));
                self.changed(kind, Vec::new(), vec![(key, old)], batch);
            }
        }
    }

    /// An unreadable object arrived: its last good version, if any, stays
    /// (through the relist in progress too).
    fn keep_last_good(&mut self, kind: ResourceKind, obj: &UpstreamObject) {
        if self.upstream[kind].relist.is_some() {
            self.upstream[kind].relist_kept.insert(obj.key());
        }
    }

    /// The upstream object `key` of `kind` as JSON: the copy parsed on
    /// arrival if it just arrived (taken: each view is made once), else the
    /// kept copy (Endpoints and EndpointSlices), else the `once` part.
    fn upstream_value(
        &mut self,
        kind: ResourceKind,
        key: &str,
        once: Option<&Once>,
    ) -> Option<Value> {
        if let Some(arrived) = self.take_parsed(kind, key) {
            return Some(arrived.into_value());
        }
        if let Some(once) = once {
            return Some(once.value());
        }
        self.upstream[kind].objects.get(key)?.value()
    }

    /// The EndpointSlice `key` as [`Writer::upstream_value`] finds it, one
    /// read from protobuf as its message (its endpoints written once chosen).
    fn upstream_slice(&mut self, key: &str) -> Option<Decoded> {
        if let Some(arrived) = self.take_parsed(ResourceKind::EndpointSlices, key) {
            return Some(arrived);
        }
        self.upstream[ResourceKind::EndpointSlices]
            .objects
            .get(key)?
            .decoded()
    }

    /// The object that just arrived, if it is `key` of `kind` (taken).
    fn take_parsed(&mut self, kind: ResourceKind, key: &str) -> Option<Decoded> {
        if self
            .parsed
            .as_ref()
            .is_some_and(|a| a.kind == kind && a.key == key)
        {
            return self.parsed.take().map(|a| a.value);
        }
        None
    }

    /// A relist completed: swap it in, emitting only the differences.
    fn relisted(&mut self, kind: ResourceKind, batch: &mut Batch) {
        let fresh = self.upstream[kind].relist.take().unwrap_or_default();
        let kept = std::mem::take(&mut self.upstream[kind].relist_kept);
        // Restored from a snapshot, the store serves objects this writer has
        // no upstream copy of: those the API server no longer has go too.
        let restored_gone: Vec<(String, Stored)> =
            if !self.upstream[kind].synced && self.cache.readiness().is_restored(kind) {
                let (served, _) = self.cache.store(kind).snapshot("");
                served
                    .iter()
                    .filter(|v| {
                        !fresh.contains_key(v.key())
                            && !kept.contains(v.key())
                            && !self.upstream[kind].objects.contains_key(v.key())
                    })
                    .map(|v| (v.key().to_owned(), Stored::unknown()))
                    .collect()
            } else {
                Vec::new()
            };
        let up = &mut self.upstream[kind];
        let gone: Vec<Box<str>> = up
            .objects
            .keys()
            .filter(|k| {
                let k: &str = k;
                !fresh.contains_key(k) && !kept.contains(k)
            })
            .cloned()
            .collect();
        let mut deleted: Vec<(String, Stored)> = gone
            .into_iter()
            .filter_map(|k| up.objects.remove_entry(&k))
            .map(|(k, s)| (k.into_string(), s))
            .collect();
        deleted.extend(restored_gone);
        let total = fresh.len();
        let upserted: Vec<(String, Incoming)> = fresh
            .into_iter()
            .filter(|(k, o)| {
                up.objects
                    .get(k.as_str())
                    .is_none_or(|s| o.stored.rv == Rv::UNKNOWN || s.rv != o.stored.rv)
            })
            .collect();
        info!(resource = %kind, objects = total, changed = upserted.len() + deleted.len(), "upstream list synced");
        let first_sync = !up.synced;
        up.synced = true;
        self.changed(kind, upserted, deleted, batch);
        let up = &mut self.upstream[kind];
        up.objects = packed_full(std::mem::take(&mut up.objects));
        self.services.compact();
        // The topology inputs just became complete: every view can be computed.
        if first_sync && is_topology_input(kind) && self.topology_ready() {
            self.recompute_all(batch);
        }
        // The list's pages and their decoded copies are free now, spread
        // between the objects kept: give their pages back (a node at rest
        // would hold them for good otherwise).
        sitegrid_runtime::memory::note_list_read();
    }

    /// Whether services and nodes, which every filtered view depends on, are complete.
    fn topology_ready(&self) -> bool {
        self.upstream[ResourceKind::Services].synced && self.upstream[ResourceKind::Nodes].synced
    }

    /// Whether `kind` can be served: its first list is in, and for endpoints
    /// and slices the topology inputs too, so nobody sees a half-filtered view.
    fn servable(&self, kind: ResourceKind) -> bool {
        self.upstream[kind].synced && (is_topology_input(kind) || self.topology_ready())
    }

    /// Records upserted objects and reacts to what changed.
    fn changed(
        &mut self,
        kind: ResourceKind,
        upserted: Vec<(String, Incoming)>,
        deleted: Vec<(String, Stored)>,
        batch: &mut Batch,
    ) {
        let mut previous = Vec::with_capacity(upserted.len());
        let mut arrived: Vec<(String, Option<Box<Once>>)> = Vec::with_capacity(upserted.len());
        for (key, inc) in upserted {
            previous.push(
                self.upstream[kind]
                    .objects
                    .insert(key.as_str().into(), inc.stored),
            );
            arrived.push((key, inc.once));
        }
        match kind {
            ResourceKind::Services => self.services_changed(&arrived, &deleted, batch),
            ResourceKind::Nodes => self.nodes_changed(&arrived, &deleted, batch),
            ResourceKind::Endpoints => {
                let keys = arrived
                    .iter()
                    .map(|(k, _)| k)
                    .chain(deleted.iter().map(|(k, _)| k));
                for key in keys {
                    self.project_endpoints(key, batch);
                }
            }
            ResourceKind::EndpointSlices => {
                self.slices_changed(&arrived, previous, &deleted, batch)
            }
            // Served as they are, to every site.
            ResourceKind::ServiceCidrs => {
                for (key, once) in &arrived {
                    let view = self.upstream_value(kind, key, once.as_deref());
                    self.emit(kind, key, view, batch);
                }
                for (key, _) in &deleted {
                    self.emit(kind, key, None, batch);
                }
            }
        }
    }

    /// Queues the new served state of one object (None: gone) if it differs
    /// from what is served now, taking the next resourceVersion.
    /// The view of `key` served once `batch` is committed.
    fn current(&self, kind: ResourceKind, key: &str, batch: &Batch) -> Option<Arc<View>> {
        match pending(&batch.changes[kind], key) {
            Some(in_batch) => in_batch,
            None => self.cache.store(kind).get(key),
        }
    }

    fn emit(&mut self, kind: ResourceKind, key: &str, value: Option<Value>, batch: &mut Batch) {
        let current = self.current(kind, key, batch);
        let change = match (value, current) {
            (Some(Value::Object(mut map)), current) => {
                if self.cache.config().drop_managed_fields {
                    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                        meta.shift_remove("managedFields");
                    }
                }
                let view = View::new(self.cache.codec(), kind, &map, self.next_rv);
                let event_type = match current {
                    // A change the view's clients cannot use (`crate::meaning`):
                    // the previous view stays, without an event.
                    Some(cur) if cur.meaning() == view.meaning() => return,
                    Some(_) => EventType::Modified,
                    None => EventType::Added,
                };
                Change {
                    event_type,
                    object: Arc::new(view),
                }
            }
            (Some(_), _) => {
                warn!(resource = %kind, %key, "upstream object is not a JSON object; ignored");
                return;
            }
            (None, Some(cur)) => Change {
                event_type: EventType::Deleted,
                object: Arc::new(cur.with_rv(self.next_rv)),
            },
            (None, None) => return,
        };
        self.next_rv += 1;
        batch.changes[kind].push(change);
    }

    /// Commits the batch, advances the clock, then publishes newly served kinds.
    fn commit(&mut self, batch: Batch) {
        let Batch { mut changes } = batch;
        for kind in ResourceKind::ALL {
            // Before a kind is served nobody can hold one of its versions, so
            // its first state needs no resume log — unless it was restored:
            // clients of the previous run may resume from the snapshot's.
            let readiness = self.cache.readiness();
            let logged = readiness.is_served(kind) || readiness.is_restored(kind);
            self.cache
                .store(kind)
                .commit(std::mem::take(&mut changes[kind]), logged);
        }
        let last = self.next_rv - 1;
        self.cache.0.clock.send_if_modified(|cur| {
            let moved = last > *cur;
            if moved {
                *cur = last;
            }
            moved
        });
        let degraded = self.cache.readiness().degraded();
        for kind in ResourceKind::ALL {
            if !self.servable(kind) {
                continue;
            }
            if !self.cache.readiness().is_served(kind) {
                info!(resource = %kind, "serving from cache");
                self.cache.readiness().serve(kind);
            }
            self.cache.readiness().confirm(kind);
        }
        if let (Some(taken), None) = (degraded, self.cache.readiness().degraded()) {
            info!(snapshot = %sitegrid_apimachinery::duration::format_system_time(taken), "synced with the API server; the snapshot is no longer served");
        }
    }
}

/// `map` rebuilt with its nodes full. Filled one key after the other in
/// order, as a list arrives, a B-tree splits each full node in two and
/// leaves every node half empty. `append` to a non-empty map merges both in
/// order into full nodes, without a buffer of all the entries (which, past
/// 128 KiB, would come from mmap and raise glibc's trim threshold for good).
fn packed_full<K: Ord, V>(mut map: BTreeMap<K, V>) -> BTreeMap<K, V> {
    let Some((key, value)) = map.pop_first() else {
        return map;
    };
    let mut full = BTreeMap::new();
    full.insert(key, value);
    full.append(&mut map);
    full
}

/// Services and nodes: what the topology filter reads.
fn is_topology_input(kind: ResourceKind) -> bool {
    matches!(kind, ResourceKind::Services | ResourceKind::Nodes)
}

/// The state of `key` as changed earlier in the same batch (`Some(None)`: deleted), if it was.
fn pending(changes: &[Change], key: &str) -> Option<Option<Arc<View>>> {
    changes
        .iter()
        .rev()
        .find(|c| c.object.key() == key)
        .map(|c| match c.event_type {
            EventType::Deleted => None,
            _ => Some(c.object.clone()),
        })
}

#[cfg(test)]
mod packed_full_tests {
    use std::collections::BTreeMap;

    use super::packed_full;

    #[test]
    fn keeps_every_entry_in_order() {
        for n in [0, 1, 2, 11, 12, 1000] {
            let map: BTreeMap<String, usize> = (0..n).map(|i| (format!("k{i:05}"), i)).collect();
            let mut grown = BTreeMap::new();
            for (k, v) in &map {
                grown.insert(k.clone(), *v);
            }
            let full = packed_full(grown);
            assert_eq!(full, map, "{n} entries");
            assert_eq!(full.len(), n);
        }
    }
}
