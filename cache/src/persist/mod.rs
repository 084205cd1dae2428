//! The persisted copy of what the proxy serves (`--data-dir`), so a proxy
//! restarted while the API server is unreachable serves what it served before.
//!
//! One file, `<data-dir>/snapshot` ([`format`]): the served objects of every
//! served kind with their resourceVersions, the newest events of each kind's
//! resume log, and the clock. Not the upstream objects the writer keeps (all
//! sites' endpoints, three times the size): while the API server is
//! unreachable nothing can change them, and the relist after reconnecting
//! brings them all again, compared with what is served so that only
//! differences go out. The topology inputs (node labels, Services'
//! `topologyKeys`) are read back from the served Nodes and Services.
//!
//! - **Written behind the cache**: the writer captures its state (reference
//!   counts, no copies of the served bodies) at most once per
//!   `--snapshot-interval` and only when something changed; encoding,
//!   compression and the write happen on a blocking thread, never on a
//!   request's path. Churn therefore costs one snapshot per interval, not
//!   one write per change — the SD-card-friendly choice: a journal of every
//!   change would write each Endpoints object again on every change to it.
//! - **Crash-safe**: a temporary file, fsync, rename, directory fsync
//!   ([`sitegrid_runtime::fs::AtomicFile`]); a header with a CRC-32 over the
//!   whole payload, so a torn, truncated or foreign file is refused whole.
//! - **Plain file, not an embedded database**: the snapshot is written and
//!   read whole, once per interval and once per start; a key-value store
//!   (redb, sled) would add page management, its own file format and
//!   write amplification for no lookup the proxy ever makes.
//!
//! Loading checks the format version, the checksum, the node the views were
//! filtered for and the consistency of the versions inside; anything wrong is
//! said in one log line and the snapshot ignored (the next sync writes a new
//! one). The cache ([`super::open`]) restores the stores from it.

mod format;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::Value;
use sitegrid_apimachinery::duration::format_system_time;
use sitegrid_runtime::fs::AtomicFile;
use tracing::{debug, info, warn};

pub use format::{FormatError, KindSnapshot, LoggedEvent, Snapshot, Text};

use super::{
    kind::{ApiVersion, PerKind, ResourceKind},
    store::StoreExport,
    Codec, Event, EventType, View,
};

/// The snapshot's file name in the data directory.
pub const FILE_NAME: &str = "snapshot";

/// The newest events of each kind's resume log that are persisted: a watch
/// resumed after a restart from a version older than these gets 410 and
/// relists, as one older than the in-memory log does.
const LOG_EVENTS: usize = 1_000;
/// About how many bytes of event bodies those may be, per kind.
const LOG_BYTES: usize = 512 << 10;
/// The largest clock a snapshot may carry. Versions are microseconds since
/// the epoch plus one per event (about 2^51 today), so a proxy never comes
/// near this; a file that does would leave the versions after it no room
/// (the restored cache starts past it, the writer counts on from there).
const MAX_CLOCK: u64 = 1 << 62;

/// Where snapshots go, and how often.
#[derive(Debug, Clone)]
pub struct Disk {
    file: AtomicFile,
    /// The least time between two writes.
    pub interval: Duration,
}

/// What opening the data directory found.
#[derive(Default)]
pub struct Opened {
    /// Where snapshots are written (None: the directory cannot be written).
    pub disk: Option<Disk>,
    /// The snapshot found there, when one is usable.
    pub restored: Option<Restored>,
}

/// A loaded snapshot, ready to fill the cache.
pub struct Restored {
    /// The codec its views were made with (the cache it fills takes it).
    pub codec: Arc<Codec>,
    /// When it was taken.
    pub written: SystemTime,
    /// The clock then.
    pub clock: u64,
    /// The EndpointSlice version the slices are stored in.
    pub slice_version: ApiVersion,
    /// Each served kind.
    pub kinds: PerKind<Option<RestoredKind>>,
}

/// One restored kind.
pub struct RestoredKind {
    /// The served objects.
    pub objects: Vec<Arc<View>>,
    /// The persisted tail of the resume log.
    pub log: Vec<Arc<Event>>,
    /// Watches from a version at or below this one get 410.
    pub compacted_rv: u64,
    /// The newest version of this kind.
    pub last_rv: u64,
    /// The first object found with fields the protobuf encoder does not
    /// know, and those fields (see `Cache::protobuf_complete`).
    pub protobuf_lossy: Option<(String, Vec<String>)>,
}

/// Opens `dir` for node `node`: creates it if needed, checks that snapshots
/// can be written there, and loads the snapshot it holds. Every finding is
/// one log line; nothing here fails the start.
pub fn open(dir: &Path, node: &str, interval: Duration, codec: Arc<Codec>) -> Opened {
    let path = dir.join(FILE_NAME);
    let disk = match std::fs::create_dir_all(dir)
        .map_err(|e| e.to_string())
        .and_then(|()| AtomicFile::open(&path, 0o600).map_err(|e| e.to_string()))
    {
        Ok(file) => Some(Disk { file, interval }),
        Err(e) => {
            warn!(data_dir = %dir.display(), error = %e, "data directory cannot be written: no snapshot is kept, a restart while the API server is unreachable starts empty");
            None
        }
    };
    let restored = match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if disk.is_some() {
                info!(path = %path.display(), "no snapshot yet; one is written after the first sync");
            }
            None
        }
        Err(e) => {
            warn!(path = %path.display(), error = %e, "snapshot cannot be read; ignored");
            None
        }
        Ok(bytes) => match load(&bytes, node, codec) {
            Ok(restored) => {
                let objects: usize = restored
                    .kinds
                    .iter()
                    .filter_map(|(_, k)| k.as_ref())
                    .map(|k| k.objects.len())
                    .sum();
                info!(path = %path.display(), bytes = bytes.len(), objects, taken = %format_system_time(restored.written), "snapshot loaded");
                Some(restored)
            }
            Err(reason) => {
                warn!(path = %path.display(), bytes = bytes.len(), %reason, "snapshot ignored; a new one is written after the first sync");
                None
            }
        },
    };
    Opened { disk, restored }
}

/// Decodes and checks a snapshot for node `node`, making its views with
/// `codec` (which the cache they fill must read them with: [`crate::open`]
/// takes it from the [`Restored`]).
pub fn load(bytes: &[u8], node: &str, codec: Arc<Codec>) -> Result<Restored, String> {
    let snapshot = Snapshot::decode(bytes).map_err(|e| e.to_string())?;
    if snapshot.node != node {
        return Err(format!(
            "it was taken for node {:?}, this proxy serves node {node:?}",
            snapshot.node
        ));
    }
    Restored::from_snapshot(snapshot, codec)
}

impl Restored {
    /// The cache's content from a decoded snapshot; an error when it is not
    /// self-consistent (versions out of order, an unknown resource, bodies
    /// that are not JSON objects).
    fn from_snapshot(snapshot: Snapshot, codec: Arc<Codec>) -> Result<Restored, String> {
        if snapshot.clock > MAX_CLOCK {
            return Err(format!(
                "its clock {} is out of range (at most {MAX_CLOCK})",
                snapshot.clock
            ));
        }
        let slice_version = ApiVersion::parse(&snapshot.slice_version)
            .ok_or_else(|| format!("unknown EndpointSlice version {:?}", snapshot.slice_version))?;
        let mut kinds: PerKind<Option<RestoredKind>> = PerKind::default();
        for k in snapshot.kinds {
            let kind = ResourceKind::from_plural(&k.resource)
                .ok_or_else(|| format!("unknown resource {:?}", k.resource))?;
            if kinds[kind].is_some() {
                return Err(format!("{} appears twice", k.resource));
            }
            if k.last_rv > snapshot.clock || k.compacted_rv > k.last_rv {
                return Err(format!("{}: versions beyond the clock", k.resource));
            }
            kinds[kind] = Some(RestoredKind::decode(&codec, kind, k)?);
        }
        let written = UNIX_EPOCH
            .checked_add(Duration::from_millis(snapshot.written_ms))
            .ok_or("its time is out of range")?;
        Ok(Restored {
            codec,
            written,
            clock: snapshot.clock,
            slice_version,
            kinds,
        })
    }
}

impl RestoredKind {
    fn decode(codec: &Codec, kind: ResourceKind, k: KindSnapshot) -> Result<RestoredKind, String> {
        let what = &k.resource;
        let mut protobuf_lossy = None;
        let mut view_of = |body: &str| {
            let (view, unknown) = view_of(codec, kind, body)?;
            if protobuf_lossy.is_none() && !unknown.is_empty() {
                protobuf_lossy = Some((view.key().to_owned(), unknown));
            }
            Ok::<_, String>(view)
        };
        let mut objects = Vec::with_capacity(k.objects.len());
        for body in &k.objects {
            let view = view_of(&body.as_str()).map_err(|e| format!("{what}: {e}"))?;
            if view.rv > k.last_rv {
                return Err(format!("{what}: {} is newer than the resource", view.key()));
            }
            objects.push(Arc::new(view));
        }
        let mut log = Vec::with_capacity(k.log.len());
        let mut last: HashMap<String, Arc<View>> = HashMap::new();
        let mut after = k.compacted_rv;
        for e in &k.log {
            if e.rv <= after || e.rv > k.last_rv {
                return Err(format!("{what}: logged versions out of order"));
            }
            after = e.rv;
            let object =
                Arc::new(view_of(&e.object.as_str()).map_err(|err| format!("{what}: {err}"))?);
            let event_type = match &*e.event_type {
                "ADDED" => EventType::Added,
                "MODIFIED" => EventType::Modified,
                "DELETED" => EventType::Deleted,
                other => return Err(format!("{what}: unknown event type {other:?}")),
            };
            let prev = match (&e.prev, event_type) {
                (_, EventType::Added) => None,
                (Some(body), _) => Some(Arc::new(
                    view_of(&body.as_str()).map_err(|err| format!("{what}: {err}"))?,
                )),
                (None, _) => Some(
                    last.get(object.key())
                        .cloned()
                        .ok_or_else(|| format!("{what}: {} has no earlier state", object.key()))?,
                ),
            };
            last.insert(object.key().to_owned(), object.clone());
            log.push(Arc::new(Event::new(e.rv, event_type, object, prev)));
        }
        Ok(RestoredKind {
            objects,
            log,
            compacted_rv: k.compacted_rv,
            last_rv: k.last_rv,
            protobuf_lossy,
        })
    }
}

/// A served body of `kind` back as a view, at the resourceVersion it
/// carries, and the fields of it the protobuf encoder does not know.
fn view_of(codec: &Codec, kind: ResourceKind, body: &str) -> Result<(View, Vec<String>), String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("a body is not a JSON object: {e}"))?;
    let Value::Object(map) = &value else {
        return Err("a body is not a JSON object".to_owned());
    };
    let rv = map
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .ok_or("a body has no resourceVersion")?;
    let unknown = kind.unknown_fields(&value).map_err(|e| e.to_string())?;
    Ok((View::new(codec, kind, map, rv), unknown))
}

/// What the writer captures for one snapshot: reference-counted views,
/// turned into bytes off its thread.
pub struct Capture {
    /// The node the views are filtered for.
    pub node: String,
    /// When it was captured.
    pub taken: SystemTime,
    /// The clock then.
    pub clock: u64,
    /// The EndpointSlice version the slices are stored in.
    pub slice_version: ApiVersion,
    /// Each served kind's store.
    pub kinds: Vec<(ResourceKind, StoreExport)>,
}

impl Capture {
    /// The log bounds a capture keeps: `(events, bytes)` per kind.
    pub const LOG_BOUNDS: (usize, usize) = (LOG_EVENTS, LOG_BYTES);

    /// The snapshot, as it will be written: borrowing the views' bodies.
    pub fn snapshot(&self) -> Snapshot<'_> {
        // Unpacked one at a time as the snapshot is written.
        fn text(v: &View) -> Text<'_> {
            Text::Body(v)
        }
        let kinds = self
            .kinds
            .iter()
            .map(|(kind, export)| {
                let mut seen = std::collections::HashSet::new();
                let log = export
                    .log
                    .iter()
                    .map(|e| LoggedEvent {
                        rv: e.rv,
                        event_type: e.event_type.as_str().into(),
                        object: text(&e.object),
                        // The state before is the previous logged event's, except at
                        // an object's first event in the persisted log.
                        prev: if seen.insert(e.object.key().to_owned()) {
                            e.prev.as_deref().map(text)
                        } else {
                            None
                        },
                    })
                    .collect();
                KindSnapshot {
                    resource: kind.plural().into(),
                    compacted_rv: export.compacted_rv,
                    last_rv: export.last_rv,
                    objects: export.objects.iter().map(|v| text(v)).collect(),
                    log,
                }
            })
            .collect();
        Snapshot {
            node: self.node.as_str().into(),
            written_ms: millis(self.taken),
            clock: self.clock,
            slice_version: self.slice_version.as_str().into(),
            kinds,
        }
    }
}

impl Disk {
    /// The snapshot file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Encodes and writes `capture` (blocking: call it off the async threads),
    /// recording the outcome in `status`.
    pub fn write(&self, capture: Capture, status: &PersistStatus) {
        let taken = capture.taken;
        let snapshot = capture.snapshot();
        let result = self
            .file
            .write_with(|file| snapshot.write_to(file))
            .map_err(|e| e.to_string());
        match result {
            Ok(len) => {
                status.written(taken, len);
                debug!(path = %self.path().display(), bytes = len, "snapshot written");
            }
            Err(e) => {
                // Once per failing streak: the next write is an interval away anyway.
                if status.failed() == 1 {
                    warn!(path = %self.path().display(), error = %e, "snapshot cannot be written; the previous one stays");
                }
            }
        }
    }
}

/// The persisted copy's figures, for `/metrics` and `/readyz`.
#[derive(Debug, Default)]
pub struct PersistStatus {
    /// Milliseconds since the epoch of the newest snapshot on disk (0: none).
    written_ms: AtomicU64,
    writes: AtomicU64,
    bytes_written: AtomicU64,
    errors: AtomicU64,
    /// Errors since the last successful write.
    failing: AtomicU64,
    size: AtomicU64,
}

impl PersistStatus {
    /// A snapshot taken at `taken` of `size` bytes is on disk.
    fn written(&self, taken: SystemTime, size: u64) {
        self.written_ms.store(millis(taken), Ordering::Relaxed);
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(size, Ordering::Relaxed);
        self.size.store(size, Ordering::Relaxed);
        self.failing.store(0, Ordering::Relaxed);
    }

    /// A write failed; the errors since the last success.
    fn failed(&self) -> u64 {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.failing.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The snapshot found at start is the newest on disk.
    pub(super) fn loaded(&self, taken: SystemTime) {
        self.written_ms.store(millis(taken), Ordering::Relaxed);
    }

    /// When the newest snapshot on disk was taken.
    pub fn taken(&self) -> Option<SystemTime> {
        match self.written_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => UNIX_EPOCH.checked_add(Duration::from_millis(ms)),
        }
    }

    /// Snapshots written by this process.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Bytes written by this process.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    /// Failed writes.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// The size of the last snapshot written.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The default data directory.
pub fn default_dir() -> PathBuf {
    PathBuf::from("/var/lib/sitegrid-proxy")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(name: &str, rv: u64) -> String {
        format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{rv}"}}}}"#
        )
    }

    fn snapshot(kind: KindSnapshot<'static>) -> Snapshot<'static> {
        Snapshot {
            node: "bj-1".into(),
            written_ms: 1_795_000_000_000,
            clock: 100,
            slice_version: "v1".into(),
            kinds: vec![kind],
        }
    }

    fn services(objects: Vec<String>, log: Vec<LoggedEvent<'static>>) -> KindSnapshot<'static> {
        KindSnapshot {
            resource: "services".into(),
            compacted_rv: 10,
            last_rv: 20,
            objects: objects.into_iter().map(Text::from).collect(),
            log,
        }
    }

    fn event(rv: u64, event_type: &str, prev: Option<String>) -> LoggedEvent<'static> {
        LoggedEvent {
            rv,
            event_type: event_type.to_owned().into(),
            object: body("a", rv).into(),
            prev: prev.map(Text::from),
        }
    }

    fn loaded(s: &Snapshot) -> Result<Restored, String> {
        load(&s.encode().unwrap(), "bj-1", Arc::default())
    }

    #[test]
    fn a_consistent_snapshot_loads_with_its_events_chained() {
        let s = snapshot(services(
            vec![body("a", 15)],
            vec![event(12, "ADDED", None), event(15, "MODIFIED", None)],
        ));
        let restored = loaded(&s).unwrap();
        let k = restored.kinds[ResourceKind::Services].as_ref().unwrap();
        assert_eq!((k.objects.len(), k.log.len()), (1, 2));
        // The second event's previous state is the first event's object.
        assert_eq!(k.log[1].prev.as_ref().map(|p| p.rv), Some(12));
    }

    /// A restart keeps serving a kind in JSON only if an object restored
    /// has fields protobuf would drop.
    #[test]
    fn restored_objects_with_fields_protobuf_would_drop_are_noted() {
        let future = r#"{"metadata":{"name":"b","namespace":"default","resourceVersion":"16"},"spec":{"futureField":1}}"#;
        let s = snapshot(services(vec![body("a", 15), future.into()], vec![]));
        let restored = loaded(&s).unwrap();
        let k = restored.kinds[ResourceKind::Services].as_ref().unwrap();
        assert_eq!(
            k.protobuf_lossy,
            Some(("default/b".to_owned(), vec!["spec.futureField".to_owned()]))
        );
        let s = snapshot(services(vec![body("a", 15)], vec![]));
        let k = &loaded(&s).unwrap().kinds[ResourceKind::Services];
        assert_eq!(k.as_ref().unwrap().protobuf_lossy, None);
    }

    /// Checksummed but inconsistent content is refused whole, with the reason.
    #[test]
    fn inconsistent_content_is_refused() {
        let cases: Vec<(Snapshot, &str)> = vec![
            (snapshot(services(vec![body("a", 21)], vec![])), "newer"),
            (
                snapshot(services(vec!["[1,2]".into()], vec![])),
                "not a JSON object",
            ),
            (
                snapshot(services(
                    vec![r#"{"metadata":{"name":"a"}}"#.into()],
                    vec![],
                )),
                "no resourceVersion",
            ),
            (
                snapshot(services(
                    vec![],
                    vec![event(15, "ADDED", None), event(12, "MODIFIED", None)],
                )),
                "out of order",
            ),
            (
                snapshot(services(vec![], vec![event(10, "ADDED", None)])),
                "out of order",
            ),
            (
                snapshot(services(vec![], vec![event(15, "MODIFIED", None)])),
                "no earlier state",
            ),
            (
                snapshot(services(vec![], vec![event(15, "BOOKMARK", None)])),
                "unknown event type",
            ),
            (
                snapshot(KindSnapshot {
                    resource: "pods".into(),
                    ..services(vec![], vec![])
                }),
                "unknown resource",
            ),
            (
                Snapshot {
                    clock: 19,
                    ..snapshot(services(vec![], vec![]))
                },
                "beyond the clock",
            ),
            (
                // The restored cache would start at clock + 1.
                Snapshot {
                    clock: u64::MAX,
                    ..snapshot(services(vec![], vec![]))
                },
                "clock 18446744073709551615 is out of range",
            ),
            (
                Snapshot {
                    slice_version: "v2".into(),
                    ..snapshot(services(vec![], vec![]))
                },
                "EndpointSlice version",
            ),
        ];
        for (s, why) in cases {
            match loaded(&s) {
                Ok(_) => panic!("loaded: {s:?}"),
                Err(e) => assert!(e.contains(why), "{e} (want {why})"),
            }
        }
        let mut twice = snapshot(services(vec![], vec![]));
        twice.kinds.push(services(vec![], vec![]));
        assert!(loaded(&twice).err().unwrap().contains("twice"));
    }
}
