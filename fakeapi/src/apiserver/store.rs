//! The in-memory etcd: one global resourceVersion counter, the current objects
//! per type, and a bounded log of watch events used for watch resumption and
//! for consistent list pages at an older resourceVersion.

pub(crate) use sitegrid_apimachinery::watch::EventType;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use super::object::{meta_mut, Obj};
use super::resource::{ResourceType, Resources};

/// Events a live watcher may fall behind by before its stream is ended (the
/// client then re-watches from its last resourceVersion, like after any drop).
/// Writers never wait for watchers.
const WATCH_BUFFER: usize = 2048;

/// One write, as kept in the history and sent to watchers.
#[derive(Debug)]
pub(crate) struct Event {
    /// The global resourceVersion of this write.
    pub rv: u64,
    /// Index of the resource type.
    pub resource: usize,
    /// What happened.
    pub ty: EventType,
    /// The new state; for `Deleted`, the last state with `rv` as its resourceVersion.
    pub object: Arc<Obj>,
    /// The state before this write (`Modified`, `Deleted`).
    pub prev: Option<Arc<Obj>>,
    /// The unfiltered watch frame, encoded once for every watcher.
    pub frame: Bytes,
    /// The same as a `PartialObjectMetadata` frame, encoded on first use and
    /// then shared by every metadata watcher.
    meta_frame: OnceLock<Bytes>,
    /// The same as a protobuf watch frame, likewise.
    protobuf_frame: OnceLock<Bytes>,
}

impl Event {
    /// The unfiltered frame in the metadata form, made by `encode` the first
    /// time it is asked for (the encoding is the watch's business).
    pub fn meta_frame(&self, encode: impl FnOnce(&Event) -> Bytes) -> Bytes {
        self.meta_frame.get_or_init(|| encode(self)).clone()
    }

    /// The unfiltered frame in protobuf, made by `encode` the first time.
    pub fn protobuf_frame(&self, encode: impl FnOnce(&Event) -> Bytes) -> Bytes {
        self.protobuf_frame.get_or_init(|| encode(self)).clone()
    }
}

/// Encode `{"type":T,"object":{"kind":..,"apiVersion":..,...}}\n`.
pub(crate) fn encode_frame(ty: &str, rt: &ResourceType, obj: &Obj) -> Bytes {
    let mut out = Vec::with_capacity(obj.json.len() + 80);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    obj.encode_typed(rt, &mut out);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// The storage key of `name` in `namespace`: `namespace/name` for namespaced
/// types, `name` otherwise (etcd's key order).
pub(crate) fn key_of(rt: &ResourceType, namespace: &str, name: &str) -> String {
    if rt.namespaced {
        format!("{namespace}/{name}")
    } else {
        name.to_owned()
    }
}

/// Everything guarded by the store lock.
#[derive(Debug)]
pub(crate) struct State {
    /// The last resourceVersion handed out.
    pub rv: u64,
    /// Watches and snapshots from a resourceVersion ≥ `floor` can be served:
    /// every event after `floor` is still in `history`.
    pub floor: u64,
    /// Current objects per resource type, by storage key.
    pub objects: Vec<BTreeMap<String, Arc<Obj>>>,
    /// Events after `floor`, oldest first.
    pub history: VecDeque<Arc<Event>>,
}

impl State {
    /// Events of resource `idx` with rv > `after`, oldest first.
    pub fn events_after(&self, idx: usize, after: u64) -> impl Iterator<Item = &Arc<Event>> {
        let start = self.history.partition_point(|e| e.rv <= after);
        self.history
            .range(start..)
            .filter(move |e| e.resource == idx)
    }

    /// The objects of `rt` whose key starts with `prefix` and is ≥ `start`, in
    /// key order, as they were at resourceVersion `at`. `None` when the history
    /// no longer reaches back to `at`.
    pub fn snapshot(
        &self,
        rt: &ResourceType,
        at: u64,
        prefix: &str,
        start: &str,
    ) -> Option<Vec<Arc<Obj>>> {
        let current = &self.objects[rt.idx];
        let from = if start.is_empty() { prefix } else { start };
        let in_range = |k: &str| k.starts_with(prefix) && k >= from;
        let range = current
            .range::<str, _>((Bound::Included(from), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix));
        if at >= self.rv {
            return Some(range.map(|(_, v)| Arc::clone(v)).collect());
        }
        let mut out: BTreeMap<&str, Arc<Obj>> =
            range.map(|(k, v)| (k.as_str(), Arc::clone(v))).collect();
        if at < self.floor {
            return None;
        }
        // Undo newer writes, newest first, so the oldest undo of a key wins.
        let newer: Vec<&Arc<Event>> = self.events_after(rt.idx, at).collect();
        for ev in newer.into_iter().rev() {
            let key = ev.object.key.as_str();
            if !in_range(key) {
                continue;
            }
            match (&ev.ty, &ev.prev) {
                (EventType::Added, _) | (_, None) => {
                    out.remove(key);
                }
                (_, Some(prev)) => {
                    out.insert(key, Arc::clone(prev));
                }
            }
        }
        Some(out.into_values().collect())
    }
}

/// The store shared by the HTTP handlers and the in-process API.
#[derive(Debug)]
pub(crate) struct Store {
    /// Served types.
    pub resources: Resources,
    /// Events kept for resumption.
    history_cap: usize,
    /// Objects, counter and history.
    state: Mutex<State>,
    /// One live event channel per resource type.
    channels: Vec<broadcast::Sender<Arc<Event>>>,
}

impl Store {
    /// An empty store at resourceVersion 1 (etcd's first revision).
    pub fn new(resources: Resources, history_cap: usize) -> Self {
        let n = resources.len();
        Store {
            resources,
            history_cap: history_cap.max(1),
            state: Mutex::new(State {
                rv: 1,
                floor: 1,
                objects: vec![BTreeMap::new(); n],
                history: VecDeque::new(),
            }),
            channels: (0..n).map(|_| broadcast::channel(WATCH_BUFFER).0).collect(),
        }
    }

    /// Run `f` with the state locked for reading. Never held across an await.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.state.lock())
    }

    /// Run `f` with the state locked; writes go through [`Txn::commit`].
    pub fn write<R>(&self, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        let mut state = self.state.lock();
        let mut txn = Txn {
            store: self,
            state: &mut state,
        };
        f(&mut txn)
    }

    /// Subscribe to live events of `rt`. Call inside [`Store::read`] so that no
    /// event falls between the state read and the subscription.
    pub fn subscribe(&self, rt: &ResourceType) -> broadcast::Receiver<Arc<Event>> {
        self.channels[rt.idx].subscribe()
    }

    /// The last resourceVersion handed out.
    pub fn rv(&self) -> u64 {
        self.state.lock().rv
    }

    /// Forget the history: older resourceVersions become too old.
    pub fn compact(&self) {
        let mut s = self.state.lock();
        s.history.clear();
        s.floor = s.rv;
    }

    /// Lookup by storage key.
    pub fn get(&self, rt: &ResourceType, key: &str) -> Option<Arc<Obj>> {
        self.state.lock().objects[rt.idx].get(key).cloned()
    }
}

/// A locked store, handed to write operations.
pub(crate) struct Txn<'a> {
    store: &'a Store,
    /// The locked state (read freely; mutate only through `commit`).
    pub state: &'a mut State,
}

impl Txn<'_> {
    /// The current object at `key`.
    pub fn current(&self, rt: &ResourceType, key: &str) -> Option<Arc<Obj>> {
        self.state.objects[rt.idx].get(key).cloned()
    }

    /// Record one write at the next resourceVersion: store the object (or
    /// remove it for `Deleted`), log the event and wake the watchers.
    /// `body` must be canonical; its `metadata.resourceVersion` is set here.
    pub fn commit(
        &mut self,
        rt: &ResourceType,
        ty: EventType,
        namespace: &str,
        name: &str,
        mut body: Map<String, Value>,
        prev: Option<Arc<Obj>>,
    ) -> Arc<Obj> {
        let key = key_of(rt, namespace, name);
        let s = &mut *self.state;
        s.rv += 1;
        let rv = s.rv;
        meta_mut(&mut body).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let obj = Arc::new(Obj::new(
            key.clone(),
            namespace.into(),
            name.into(),
            rv,
            body,
        ));
        if ty == EventType::Deleted {
            s.objects[rt.idx].remove(&key);
        } else {
            s.objects[rt.idx].insert(key, Arc::clone(&obj));
        }
        let frame = encode_frame(ty.as_str(), rt, &obj);
        let ev = Arc::new(Event {
            rv,
            resource: rt.idx,
            ty,
            object: Arc::clone(&obj),
            prev,
            frame,
            meta_frame: OnceLock::new(),
            protobuf_frame: OnceLock::new(),
        });
        s.history.push_back(Arc::clone(&ev));
        while s.history.len() > self.store.history_cap {
            if let Some(old) = s.history.pop_front() {
                s.floor = old.rv;
            }
        }
        // An error only means nobody is watching this type right now.
        let _no_watchers = self.store.channels[rt.idx].send(ev).is_err();
        obj
    }
}
