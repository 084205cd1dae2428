//! The writer's side of the snapshot: the topology inputs read back from a
//! restored one, capturing the stores for the next, and deciding when to write.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use kube::runtime::watcher;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::Writer;
use crate::{
    kind::{ApiVersion, ResourceKind},
    persist::{Capture, Disk},
    topology::TopologyKeys,
    Cache, UpstreamBody, UpstreamObject,
};

/// How often the writer checks whether a snapshot is due.
pub(super) const CHECK_PERIOD: Duration = Duration::from_secs(1);

/// When the last snapshot was written, and the one being written.
pub(super) struct Persister {
    disk: Arc<Disk>,
    /// The clock the newest snapshot (written or restored) reflects.
    clock: u64,
    /// The kinds it holds.
    kinds: Vec<ResourceKind>,
    /// When this process last wrote one.
    last: Option<Instant>,
    writing: Option<JoinHandle<()>>,
}

impl Persister {
    pub(super) fn new(disk: Disk, cache: &Cache) -> Persister {
        let restored = cache.readiness().restored_from().is_some();
        Persister {
            disk: Arc::new(disk),
            // A restored cache starts with the snapshot's content: nothing to write yet.
            clock: if restored { cache.current_rv() } else { 0 },
            kinds: served(cache),
            last: None,
            writing: None,
        }
    }
}

/// The kinds the cache serves.
fn served(cache: &Cache) -> Vec<ResourceKind> {
    ResourceKind::ALL
        .into_iter()
        .filter(|k| cache.readiness().is_served(*k))
        .collect()
}

impl Writer {
    /// Reads the topology inputs back from the restored Services and Nodes
    /// (served as the API server sent them), without emitting anything.
    pub(super) fn restore_topology(&mut self) {
        let (services, _) = self.cache.store(ResourceKind::Services).snapshot("");
        for view in services {
            let annotations = string_map(&view.native_body_value(), "annotations");
            if let Ok(Some(keys)) = TopologyKeys::from_annotations(Some(&annotations)) {
                let keys = self.shared_keys(keys);
                self.services.set_keys(view.key(), Some(keys));
            }
        }
        let (nodes, _) = self.cache.store(ResourceKind::Nodes).snapshot("");
        for view in nodes {
            let labels = string_map(&view.native_body_value(), "labels");
            self.nodes.insert(view.key().to_owned(), labels);
        }
        self.find_site_nodes();
    }

    /// Writes a snapshot in the background when one is due: something
    /// changed, the previous write is done, and either none was written yet
    /// by this process (the first sync just completed) or the interval passed.
    pub(super) fn persist_if_due(&mut self) {
        let Some(p) = &self.persister else { return };
        if p.writing.as_ref().is_some_and(|w| !w.is_finished()) || !self.dirty() {
            return;
        }
        let due = match p.last {
            None => self.cache.readiness().is_ready(),
            Some(at) => at.elapsed() >= p.disk.interval,
        };
        if !due {
            return;
        }
        let capture = self.capture();
        let Some(p) = &mut self.persister else { return };
        p.clock = capture.clock;
        p.kinds = capture.kinds.iter().map(|(k, ..)| *k).collect();
        p.last = Some(Instant::now());
        p.writing = Some(write_off_thread(&p.disk, &self.cache, capture));
    }

    /// The last write before the writer ends: waits for one in progress,
    /// then writes what changed since.
    pub(super) async fn persist_last(&mut self) {
        let Some(p) = &mut self.persister else { return };
        if let Some(writing) = p.writing.take() {
            let _ = writing.await;
        }
        if !self.dirty() {
            return;
        }
        let capture = self.capture();
        let Some(p) = &self.persister else { return };
        let _ = write_off_thread(&p.disk, &self.cache, capture).await;
    }

    /// Whether the cache moved since the newest snapshot.
    fn dirty(&self) -> bool {
        self.persister
            .as_ref()
            .is_some_and(|p| p.clock != self.cache.current_rv() || p.kinds != served(&self.cache))
    }

    /// The served kinds' stores and this writer's upstream objects, now.
    pub(super) fn capture(&self) -> Capture {
        let (events, bytes) = Capture::LOG_BOUNDS;
        let kinds = served(&self.cache)
            .into_iter()
            .map(|kind| (kind, self.cache.store(kind).export(events, bytes)))
            .collect();
        Capture {
            node: self.locality.owner(),
            taken: SystemTime::now(),
            clock: self.cache.current_rv(),
            slice_version: self.cache.native(ResourceKind::EndpointSlices),
            kinds,
        }
    }
}

/// Encodes and writes `capture` on a blocking thread.
fn write_off_thread(disk: &Arc<Disk>, cache: &Cache, capture: Capture) -> JoinHandle<()> {
    let (disk, cache) = (disk.clone(), cache.clone());
    tokio::task::spawn_blocking(move || disk.write(capture, cache.persisted()))
}

/// `metadata.<field>` of an object as a string map.
fn string_map(obj: &Value, field: &str) -> BTreeMap<String, String> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// An EndpointSlice event with its object converted to version `to`.
pub(super) fn convert(
    event: watcher::Event<UpstreamObject>,
    to: ApiVersion,
) -> watcher::Event<UpstreamObject> {
    let conv = |obj: UpstreamObject| -> UpstreamObject {
        if matches!(obj.body, UpstreamBody::UnreadableProtobuf) {
            return obj;
        }
        let Ok(mut value) = obj.body.value() else {
            return obj;
        };
        to.convert_slice(&mut value);
        // In the form it came in: a decoded value, or text.
        // No longer what its protobuf reads as: kept as the value alone.
        let converted = UpstreamBody::Protobuf {
            value: Arc::new(value),
            wire: None,
        };
        let body = match &obj.body {
            UpstreamBody::Protobuf { .. } | UpstreamBody::ProtobufSlice { .. } => converted,
            // A list's: kept compact until the list completes.
            UpstreamBody::ProtobufText(_) | UpstreamBody::ProtobufListed(_) => {
                converted.into_text()
            }
            _ => match converted.into_text() {
                UpstreamBody::ProtobufText(raw) => UpstreamBody::Json(raw),
                _ => return obj,
            },
        };
        UpstreamObject { body, ..obj }
    };
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(conv(o)),
        watcher::Event::InitApply(o) => watcher::Event::InitApply(conv(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(conv(o)),
        other => other,
    }
}
