//! The projector: the single writer of the cache.
//!
//! It keeps the raw upstream objects, buffers relists until they complete and
//! then applies only the differences, and recomputes the topology views of
//! Endpoints and EndpointSlices when their objects, their Service's
//! `topologyKeys` or the relevant node labels change. Every change whose
//! served content really differs gets the next resourceVersion and is
//! committed in one batch per resource.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use kube::runtime::watcher;
use serde_json::{value::RawValue, Map, Value};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{Cache, Change, EventType, View};
use crate::ops::Metrics;
use crate::{
    object::UpstreamObject,
    resource::ResourceKind,
    topology::{self, NodeLabels, TopologyKeys, SERVICE_NAME_LABEL},
};

/// What a reflector hands the projector.
pub type UpstreamEvent = (ResourceKind, watcher::Event<UpstreamObject>);

/// What the projector keeps of an upstream object between events.
struct Stored {
    /// The upstream resourceVersion: a relist skips objects that did not change.
    rv: Box<str>,
    /// The raw JSON, LZ4-compressed, kept only where views are recomputed
    /// later (Endpoints and EndpointSlices); Services and Nodes are projected
    /// once, on arrival. Compressed because it is read only when a node
    /// moves site or a Service's topology changes, and endpoint JSON shrinks
    /// about fourfold.
    raw: Option<Box<[u8]>>,
    /// For an EndpointSlice: the `ns/service` it belongs to.
    service: Option<String>,
}

type Upstream = BTreeMap<String, Stored>;

/// The cache's single writer.
pub struct Projector {
    cache: Arc<Cache>,
    local_node: String,
    next_rv: u64,
    upstream: [Upstream; 4],
    relist: [Option<BTreeMap<String, Incoming>>; 4],
    upstream_synced: [bool; 4],
    services: HashMap<String, TopologyKeys>,
    nodes: NodeLabels,
    /// `ns/service` → keys of its EndpointSlices.
    slices_by_service: HashMap<String, BTreeSet<String>>,
    /// Counts upstream events and relists.
    metrics: Option<Arc<Metrics>>,
}

/// Changes collected while handling one upstream event.
#[derive(Default)]
struct Batch {
    changes: [Vec<Change>; 4],
}

impl Projector {
    /// A projector writing into `cache` for the node `local_node`.
    pub fn new(cache: Arc<Cache>, local_node: impl Into<String>) -> Projector {
        let next_rv = cache.start_rv + 1;
        Projector {
            cache,
            local_node: local_node.into(),
            next_rv,
            upstream: Default::default(),
            relist: Default::default(),
            upstream_synced: [false; 4],
            services: HashMap::new(),
            nodes: NodeLabels::new(),
            slices_by_service: HashMap::new(),
            metrics: None,
        }
    }

    /// Reports upstream events and relists to `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Projector {
        self.metrics = Some(metrics);
        self
    }

    /// Consumes reflector events until every sender is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<UpstreamEvent>) {
        while let Some((kind, event)) = rx.recv().await {
            self.handle(kind, event);
        }
        debug!("projector: all reflectors stopped");
    }

    /// Applies one upstream event and commits what it changed.
    pub fn handle(&mut self, kind: ResourceKind, event: watcher::Event<UpstreamObject>) {
        let mut batch = Batch::default();
        let i = kind.index();
        if let Some(m) = &self.metrics {
            match &event {
                watcher::Event::Apply(_)
                | watcher::Event::Delete(_)
                | watcher::Event::InitApply(_) => m.events_in(kind.plural(), 1),
                // A list after the first one: the watch had to be re-established from scratch.
                watcher::Event::Init if self.upstream_synced[i] => {
                    m.upstream_reconnect(kind.plural())
                }
                _ => {}
            }
        }
        match event {
            watcher::Event::Init => self.relist[i] = Some(BTreeMap::new()),
            watcher::Event::InitApply(obj) => {
                // Kept compact until the list completes: a relist of thousands of
                // objects must not hold them all as parsed metadata plus raw text.
                let buf = self.relist[i].get_or_insert_with(BTreeMap::new);
                buf.insert(obj.key(), incoming(kind, obj));
            }
            watcher::Event::InitDone => {
                let fresh = self.relist[i].take().unwrap_or_default();
                let gone: Vec<String> = self.upstream[i]
                    .keys()
                    .filter(|k| !fresh.contains_key(*k))
                    .cloned()
                    .collect();
                let deleted: Vec<(String, Stored)> = gone
                    .into_iter()
                    .filter_map(|k| self.upstream[i].remove(&k).map(|s| (k, s)))
                    .collect();
                let store = &self.upstream[i];
                let upserted: Vec<(String, Incoming)> = fresh
                    .into_iter()
                    .filter(|(k, o)| {
                        store
                            .get(k)
                            .is_none_or(|s| o.stored.rv.is_empty() || s.rv != o.stored.rv)
                    })
                    .collect();
                info!(resource = %kind, objects = store.len() + upserted.len() - upserted.iter().filter(|(k, _)| store.contains_key(k)).count(),
                    changed = upserted.len() + deleted.len(), "upstream list synced");
                self.changed(kind, upserted, deleted, &mut batch);
                let first_sync = !self.upstream_synced[i];
                self.upstream_synced[i] = true;
                if first_sync {
                    self.on_first_sync(kind, &mut batch);
                }
            }
            watcher::Event::Apply(obj) => self.changed(
                kind,
                vec![(obj.key(), incoming(kind, obj))],
                Vec::new(),
                &mut batch,
            ),
            watcher::Event::Delete(obj) => {
                let key = obj.key();
                let old = self.upstream[i]
                    .remove(&key)
                    .unwrap_or_else(|| stored(kind, &obj));
                self.changed(kind, Vec::new(), vec![(key, old)], &mut batch);
            }
        }
        self.commit(batch);
    }

    fn topology_ready(&self) -> bool {
        self.upstream_synced[ResourceKind::Services.index()]
            && self.upstream_synced[ResourceKind::Nodes.index()]
    }

    /// After a resource's first full list: services and nodes are served at
    /// once; endpoints and slices only once the topology inputs (services and
    /// nodes) are complete, so kube-proxy never sees a half-filtered view.
    fn on_first_sync(&mut self, kind: ResourceKind, batch: &mut Batch) {
        use ResourceKind::*;
        match kind {
            Services | Nodes => {
                self.cache.store(kind).mark_synced_after_commit();
                if self.topology_ready() {
                    self.recompute_all(batch);
                    for k in [Endpoints, EndpointSlices] {
                        if self.upstream_synced[k.index()] {
                            self.cache.store(k).mark_synced_after_commit();
                        }
                    }
                }
            }
            Endpoints | EndpointSlices => {
                if self.topology_ready() {
                    self.cache.store(kind).mark_synced_after_commit();
                }
            }
        }
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
        let upserted: Vec<(String, Extra)> = upserted
            .into_iter()
            .map(|(key, inc)| {
                previous.push(self.upstream[kind.index()].insert(key.clone(), inc.stored));
                (key, inc.extra)
            })
            .collect();
        match kind {
            ResourceKind::Services => self.services_changed(&upserted, &deleted, batch),
            ResourceKind::Nodes => self.nodes_changed(&upserted, &deleted, batch),
            ResourceKind::Endpoints => {
                for key in upserted
                    .iter()
                    .map(|(k, _)| k)
                    .chain(deleted.iter().map(|(k, _)| k))
                {
                    self.project_endpoints(key, batch);
                }
            }
            ResourceKind::EndpointSlices => {
                self.slices_changed(&upserted, previous, &deleted, batch)
            }
        }
    }

    fn services_changed(
        &mut self,
        upserted: &[(String, Extra)],
        deleted: &[(String, Stored)],
        batch: &mut Batch,
    ) {
        let mut affected = Vec::new();
        for (key, obj) in upserted {
            let keys = match TopologyKeys::from_annotations(obj.annotations.as_ref()) {
                Ok(k) => k,
                Err(reason) => {
                    warn!(service = %key, %reason, "ignoring invalid topology annotation; endpoints pass unfiltered");
                    None
                }
            };
            let before = match &keys {
                Some(k) => self.services.insert(key.clone(), k.clone()),
                None => self.services.remove(key),
            };
            if before != keys {
                affected.push(key.clone());
            }
            let view = obj.view_raw.as_deref().map(parse_stored);
            self.emit(ResourceKind::Services, key, view, batch);
        }
        for (key, _) in deleted {
            if self.services.remove(key).is_some() {
                affected.push(key.clone());
            }
            self.emit(ResourceKind::Services, key, None, batch);
        }
        for service in affected {
            self.project_service(&service, batch);
        }
    }

    fn nodes_changed(
        &mut self,
        upserted: &[(String, Extra)],
        deleted: &[(String, Stored)],
        batch: &mut Batch,
    ) {
        let mut labels_moved = false;
        for (key, obj) in upserted {
            let labels = obj.labels.clone().unwrap_or_default();
            if self.nodes.get(key) != Some(&labels) {
                labels_moved |= self.relevant(key, self.nodes.get(key), Some(&labels));
                self.nodes.insert(key.clone(), labels);
            }
            let view = obj.view_raw.as_deref().map(parse_stored);
            self.emit(ResourceKind::Nodes, key, view, batch);
        }
        for (key, _) in deleted {
            if let Some(old) = self.nodes.remove(key) {
                labels_moved |= self.relevant(key, Some(&old), None);
            }
            self.emit(ResourceKind::Nodes, key, None, batch);
        }
        if labels_moved {
            debug!("node topology labels changed; recomputing filtered views");
            self.recompute_all(batch);
        }
    }

    /// Whether a node's label change can alter any view: it is the local node,
    /// or a label some Service's topology keys name differs.
    fn relevant(
        &self,
        node: &str,
        before: Option<&BTreeMap<String, String>>,
        after: Option<&BTreeMap<String, String>>,
    ) -> bool {
        if node == self.local_node {
            return true;
        }
        self.services
            .values()
            .flat_map(TopologyKeys::label_keys)
            .any(|k| before.and_then(|l| l.get(k)) != after.and_then(|l| l.get(k)))
    }

    fn slices_changed(
        &mut self,
        upserted: &[(String, Extra)],
        previous: Vec<Option<Stored>>,
        deleted: &[(String, Stored)],
        batch: &mut Batch,
    ) {
        let mut services = BTreeSet::new();
        let unlink =
            |links: &mut HashMap<String, BTreeSet<String>>, svc: &Option<String>, key: &str| {
                if let Some(set) = svc.as_ref().and_then(|s| links.get_mut(s)) {
                    set.remove(key);
                }
            };
        for ((key, _), prev) in upserted.iter().zip(previous) {
            if let Some(prev) = &prev {
                unlink(&mut self.slices_by_service, &prev.service, key);
                services.extend(prev.service.clone());
            }
            match self.upstream[ResourceKind::EndpointSlices.index()]
                .get(key)
                .and_then(|s| s.service.clone())
            {
                Some(svc) => {
                    self.slices_by_service
                        .entry(svc.clone())
                        .or_default()
                        .insert(key.clone());
                    services.insert(svc);
                }
                None => self.project_single_slice(key, batch),
            }
        }
        for (key, old) in deleted {
            unlink(&mut self.slices_by_service, &old.service, key);
            services.extend(old.service.clone());
            self.emit(ResourceKind::EndpointSlices, key, None, batch);
        }
        for svc in services {
            self.project_slices_of(&svc, batch);
        }
    }

    fn recompute_all(&mut self, batch: &mut Batch) {
        let keys: Vec<String> = self.upstream[ResourceKind::Endpoints.index()]
            .keys()
            .cloned()
            .collect();
        for key in &keys {
            self.project_endpoints(key, batch);
        }
        let slices: Vec<String> = self.upstream[ResourceKind::EndpointSlices.index()]
            .keys()
            .cloned()
            .collect();
        let mut services = BTreeSet::new();
        for key in &slices {
            match self.upstream[ResourceKind::EndpointSlices.index()]
                .get(key)
                .and_then(|s| s.service.clone())
            {
                Some(svc) => {
                    services.insert(svc);
                }
                None => self.project_single_slice(key, batch),
            }
        }
        for svc in services {
            self.project_slices_of(&svc, batch);
        }
    }

    /// Recomputes the Endpoints and EndpointSlices of one Service.
    fn project_service(&mut self, service: &str, batch: &mut Batch) {
        self.project_endpoints(service, batch);
        self.project_slices_of(service, batch);
    }

    fn project_endpoints(&mut self, key: &str, batch: &mut Batch) {
        if !self.topology_ready() {
            return;
        }
        let Some(raw) = self.upstream[ResourceKind::Endpoints.index()]
            .get(key)
            .and_then(|s| s.raw.clone())
        else {
            self.emit(ResourceKind::Endpoints, key, None, batch);
            return;
        };
        let mut value = parse_stored(&raw);
        if let Some(keys) = self.services.get(key) {
            let refs = topology::endpoints_refs(&value);
            let selection =
                topology::choose(keys, self.nodes.get(&self.local_node), &self.nodes, &refs);
            topology::project_endpoints(&mut value, &selection, &self.nodes);
        }
        self.emit(ResourceKind::Endpoints, key, Some(value), batch);
    }

    fn project_slices_of(&mut self, service: &str, batch: &mut Batch) {
        if !self.topology_ready() {
            return;
        }
        let slice_keys: Vec<String> = self
            .slices_by_service
            .get(service)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let store = &self.upstream[ResourceKind::EndpointSlices.index()];
        let mut values: Vec<(String, Value)> = slice_keys
            .iter()
            .filter_map(|k| Some((k.clone(), parse_stored(store.get(k)?.raw.as_ref()?))))
            .collect();
        if let Some(keys) = self.services.get(service) {
            let refs: Vec<_> = values
                .iter()
                .flat_map(|(_, v)| topology::slice_refs(v))
                .collect();
            let selection =
                topology::choose(keys, self.nodes.get(&self.local_node), &self.nodes, &refs);
            for (_, v) in values.iter_mut() {
                topology::project_slice(v, &selection, &self.nodes);
            }
        }
        for (key, value) in values {
            self.emit(ResourceKind::EndpointSlices, &key, Some(value), batch);
        }
    }

    fn project_single_slice(&mut self, key: &str, batch: &mut Batch) {
        if !self.topology_ready() {
            return;
        }
        let value = self.upstream[ResourceKind::EndpointSlices.index()]
            .get(key)
            .and_then(|s| s.raw.as_ref())
            .map(|raw| parse_stored(raw));
        self.emit(ResourceKind::EndpointSlices, key, value, batch);
    }

    /// Queues the new served state of one object (None: gone) if it differs
    /// from what is served now, taking the next resourceVersion.
    fn emit(&mut self, kind: ResourceKind, key: &str, value: Option<Value>, batch: &mut Batch) {
        let store = self.cache.store(kind);
        let current = match pending(&batch.changes[kind.index()], key) {
            Some(in_batch) => in_batch,
            None => store.get(key),
        };
        let change = match (value, current) {
            (Some(Value::Object(map)), current) => {
                let view = View::new(&map, self.next_rv, store.native());
                match current {
                    Some(cur) if cur.same_content(&view) => return,
                    Some(_) => Change {
                        event_type: EventType::Modified,
                        object: Arc::new(view),
                    },
                    None => Change {
                        event_type: EventType::Added,
                        object: Arc::new(view),
                    },
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
        batch.changes[kind.index()].push(change);
    }

    fn commit(&mut self, batch: Batch) {
        let mut synced = Vec::new();
        for (kind, changes) in ResourceKind::ALL.into_iter().zip(batch.changes) {
            let store = self.cache.store(kind);
            store.commit(changes);
            if store.take_pending_sync() {
                synced.push(kind);
            }
        }
        self.cache.advance_rv(self.next_rv - 1);
        for kind in synced {
            info!(resource = %kind, "serving from cache");
            self.cache.store(kind).mark_synced();
        }
    }
}

/// The state of `key` as changed earlier in the same batch (`Some(None)`: deleted), if it was.
fn pending(changes: &[Change], key: &str) -> Option<Option<Arc<View>>> {
    changes
        .iter()
        .rev()
        .find(|c| c.object.key == key)
        .map(|c| match c.event_type {
            EventType::Deleted => None,
            _ => Some(c.object.clone()),
        })
}

/// An upstream object as the projector takes it in.
struct Incoming {
    /// What is kept between events.
    stored: Stored,
    /// What is used once, on arrival.
    extra: Extra,
}

/// What a Service or Node contributes on arrival (then dropped).
#[derive(Default)]
struct Extra {
    /// Node labels.
    labels: Option<BTreeMap<String, String>>,
    /// Service annotations (for `topologyKeys`).
    annotations: Option<BTreeMap<String, String>>,
    /// Services and Nodes: the compressed JSON their view is made from.
    view_raw: Option<Box<[u8]>>,
}

/// Takes `obj` apart into what is kept and what is used once.
fn incoming(kind: ResourceKind, obj: UpstreamObject) -> Incoming {
    let extra = match kind {
        ResourceKind::Services => Extra {
            annotations: obj.metadata.annotations.clone(),
            view_raw: Some(compress(&obj.raw)),
            ..Extra::default()
        },
        ResourceKind::Nodes => Extra {
            labels: obj.metadata.labels.clone(),
            view_raw: Some(compress(&obj.raw)),
            ..Extra::default()
        },
        _ => Extra::default(),
    };
    Incoming {
        stored: stored(kind, &obj),
        extra,
    }
}

fn compress(raw: &RawValue) -> Box<[u8]> {
    lz4_flex::compress_prepend_size(raw.get().as_bytes()).into_boxed_slice()
}

/// What the projector keeps of `obj` (raw JSON only where views are recomputed).
fn stored(kind: ResourceKind, obj: &UpstreamObject) -> Stored {
    let keep_raw = matches!(kind, ResourceKind::Endpoints | ResourceKind::EndpointSlices);
    Stored {
        rv: obj.upstream_rv().into(),
        raw: keep_raw.then(|| compress(&obj.raw)),
        service: (kind == ResourceKind::EndpointSlices)
            .then(|| slice_service(obj))
            .flatten(),
    }
}

/// Parses a stored (compressed) raw object.
fn parse_stored(raw: &[u8]) -> Value {
    lz4_flex::decompress_size_prepended(raw)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .unwrap_or_else(|| Value::Object(Map::new()))
}

/// `ns/service` of an EndpointSlice, from its `kubernetes.io/service-name` label.
fn slice_service(obj: &UpstreamObject) -> Option<String> {
    let svc = obj.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some(crate::object::object_key(
        obj.metadata.namespace.as_deref(),
        svc,
    ))
}
