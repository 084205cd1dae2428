//! One resource's served state: the objects, a bounded event log for resume,
//! and the live broadcast that fans events out to watchers.

use std::{
    borrow::Borrow,
    cmp::Ordering,
    collections::{BTreeSet, VecDeque},
    ops::Bound,
    sync::Arc,
    time::{Duration, Instant},
};

use parking_lot::{Mutex, RwLock};
use tokio::sync::broadcast;

use super::{
    lists::{EncodedLists, ListKey, SharedList},
    Event, EventType, View,
};

/// The served state of one resource. Readers call its methods through
/// [`Cache::store`](super::Cache::store); only the cache's writer commits.
pub struct Store {
    state: RwLock<State>,
    live: broadcast::Sender<Arc<Event>>,
    pins: Mutex<VecDeque<Pin>>,
    /// Whole lists at the current version (see [`crate::lists`]); dropped
    /// by every commit under the state's write lock.
    lists: Mutex<EncodedLists>,
}

/// The objects a paged list was read from, kept for its continue tokens.
///
/// kube-apiserver keeps five minutes of etcd history for continue tokens; a
/// store's log holds what its bounds allow, which under churn may be less
/// than a client takes to read a large list page by page (a node proxy's
/// relist from a site proxy asks pages of 30): every continue would get 410
/// and the relist would start over for as long as the churn lasts. A list's
/// later pages are read from the very objects its first page was read from
/// instead: pointers to views the store shares, so a pin costs a word per
/// object plus the views that change while it is kept.
struct Pin {
    rv: u64,
    prefix: String,
    objects: Arc<[Arc<View>]>,
    used: Instant,
}

/// Lists kept for their continue tokens at once (the oldest goes first).
const MAX_PINS: usize = 8;
/// How long a list is kept after its last page was read.
const PIN_TTL: Duration = Duration::from_secs(120);

struct State {
    objects: BTreeSet<Keyed>,
    log: VecDeque<Arc<Event>>,
    log_capacity: usize,
    /// The bytes the logged events may pin, about (see [`weight`]).
    log_bytes_limit: usize,
    /// The bytes the logged events pin now, about.
    log_bytes: usize,
    /// Events with rv ≤ this may have left the log.
    compacted_rv: u64,
    /// The rv of the newest event (or the proxy's start rv).
    last_rv: u64,
}

/// A change the writer commits (its rv is already assigned).
#[derive(Debug)]
pub struct Change {
    /// Added, modified or deleted.
    pub event_type: EventType,
    /// The new state (the last state, at the deletion's rv, for DELETED).
    pub object: Arc<View>,
}

/// What a new watcher starts from.
pub struct Subscription {
    /// Logged events after the requested version (empty for a fresh start).
    pub replay: Vec<Arc<Event>>,
    /// The current objects, for a watch that starts with ADDED events.
    pub initial: Vec<Arc<View>>,
    /// Live events committed after the subscription.
    pub live: broadcast::Receiver<Arc<Event>>,
    /// The resource's newest rv at subscription time.
    pub rv: u64,
}

/// A store's state as the snapshot keeps it: shared views, no copies.
pub struct StoreExport {
    /// The served objects, in key order.
    pub objects: Vec<Arc<View>>,
    /// The newest logged events, oldest first.
    pub log: Vec<Arc<Event>>,
    /// Versions at or below this one are not covered by `log`.
    pub compacted_rv: u64,
    /// The newest version.
    pub last_rv: u64,
}

/// How big a resource's cache is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Objects served.
    pub objects: usize,
    /// Events kept for watch resume.
    pub log_events: usize,
    /// The bytes those events pin, about.
    pub log_bytes: usize,
    /// The bytes of the whole lists kept for the current version.
    pub list_bytes: usize,
}

/// What a logged event pins, about: its state's JSON body, the JSON watch
/// frame made from it once a watcher asks (as long again), the protobuf
/// message and frame once a protobuf watcher (kube-proxy) asks (about half
/// as long each), and the bookkeeping. (Its previous state is the previous
/// event's, or a served object's.)
fn weight(event: &Event) -> usize {
    3 * event.object.body_len() + 256
}

/// The requested version is older than the log holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The newest rv that can no longer be served (the apiserver prints oldest-1).
    pub compacted_rv: u64,
}

impl Store {
    /// An empty store whose versions start after `start_rv`, logging up to
    /// `log_capacity` events and about `log_bytes_limit` bytes of them (the
    /// newest event is always kept).
    pub(super) fn new(
        start_rv: u64,
        log_capacity: usize,
        log_bytes_limit: usize,
        live_capacity: usize,
    ) -> Self {
        Store {
            state: RwLock::new(State {
                objects: BTreeSet::new(),
                log: VecDeque::with_capacity(log_capacity.min(1024)),
                log_capacity: log_capacity.max(1),
                log_bytes_limit,
                log_bytes: 0,
                compacted_rv: start_rv,
                last_rv: start_rv,
            }),
            live: broadcast::channel(live_capacity.max(1)).0,
            pins: Mutex::new(VecDeque::new()),
            lists: Mutex::new(EncodedLists::default()),
        }
    }

    /// The whole list `key` at the current version, made once and shared
    /// from the second time it is asked (see [`crate::lists`]): its chunks
    /// if made, else the first caller makes them (from a snapshot taken
    /// then, so at this version or a newer one) and the others wait;
    /// `None` the first time.
    pub fn shared_list(&self, key: ListKey) -> Option<SharedList> {
        // Under the state's lock, as commits drop the lists: a list found
        // here is of the version current now, or is being made from a
        // snapshot not older.
        let _st = self.state.read();
        self.lists.lock().get_or_add(key)
    }

    /// Keeps `objects`, the scope `prefix` at `rv` a paged list was read
    /// from, for its continue tokens (see [`Pin`]).
    pub fn pin(&self, rv: u64, prefix: &str, objects: Arc<[Arc<View>]>) {
        let now = Instant::now();
        let mut pins = self.pins.lock();
        pins.retain(|p| {
            now.duration_since(p.used) < PIN_TTL && !(p.rv == rv && p.prefix == prefix)
        });
        if pins.len() >= MAX_PINS {
            pins.pop_front();
        }
        pins.push_back(Pin {
            rv,
            prefix: prefix.to_owned(),
            objects,
            used: now,
        });
    }

    /// The objects a paged list of `prefix` read at `rv`, if still kept.
    pub fn pinned(&self, rv: u64, prefix: &str) -> Option<Arc<[Arc<View>]>> {
        let now = Instant::now();
        let mut pins = self.pins.lock();
        pins.retain(|p| now.duration_since(p.used) < PIN_TTL);
        let pin = pins.iter_mut().find(|p| p.rv == rv && p.prefix == prefix)?;
        pin.used = now;
        Some(pin.objects.clone())
    }

    /// Applies a batch atomically: readers see all of it or none of it.
    /// `logged: false` (the state before the resource is first served) keeps
    /// no events for resume: a watch from before it gets 410.
    pub(super) fn commit(&self, changes: Vec<Change>, logged: bool) {
        if changes.is_empty() {
            return;
        }
        let mut st = self.state.write();
        let stale_lists = self.lists.lock().clear();
        for change in changes {
            let rv = change.object.rv;
            let prev = match change.event_type {
                EventType::Deleted => st.objects.take(change.object.key()),
                _ => st.objects.replace(Keyed(change.object.clone())),
            }
            .map(|k| k.0);
            let event = Arc::new(Event::new(rv, change.event_type, change.object, prev));
            st.last_rv = rv;
            if logged {
                let w = weight(&event);
                while st.log.len() >= st.log_capacity
                    || (!st.log.is_empty() && st.log_bytes + w > st.log_bytes_limit)
                {
                    let Some(old) = st.log.pop_front() else { break };
                    st.compacted_rv = old.rv;
                    st.log_bytes -= weight(&old);
                }
                st.log_bytes += w;
                st.log.push_back(event.clone());
            } else {
                st.compacted_rv = rv;
            }
            // No receiver is fine: nobody is watching. Sent under the lock so a
            // subscriber never misses or duplicates an event (see `subscribe`).
            let _ = self.live.send(event);
        }
        // Freed outside the lock (a LIST still sending one keeps its own).
        drop(st);
        drop(stale_lists);
    }

    /// The objects and the newest logged events — at most `max_events`, and
    /// at most about `max_bytes` of bodies (the newest one always) — for a
    /// snapshot.
    pub(super) fn export(&self, max_events: usize, max_bytes: usize) -> StoreExport {
        let st = self.state.read();
        let mut bytes = 0;
        let kept = st
            .log
            .iter()
            .rev()
            .take(max_events)
            .take_while(|e| {
                let first = bytes == 0;
                bytes += e.object.body_len() + e.prev.as_ref().map_or(0, |p| p.body_len());
                first || bytes <= max_bytes
            })
            .count();
        let skipped = st.log.len() - kept;
        let compacted_rv = match skipped {
            0 => st.compacted_rv,
            n => st.log[n - 1].rv,
        };
        StoreExport {
            objects: st.objects.iter().map(|k| k.0.clone()).collect(),
            log: st.log.range(skipped..).cloned().collect(),
            compacted_rv,
            last_rv: st.last_rv,
        }
    }

    /// Fills a new store with a snapshot's state (before anyone reads it).
    pub(super) fn restore(&self, export: StoreExport) {
        let mut st = self.state.write();
        let _stale = self.lists.lock().clear();
        st.objects = export.objects.into_iter().map(Keyed).collect();
        st.log_bytes = export.log.iter().map(|e| weight(e)).sum();
        st.log = export.log.into();
        st.compacted_rv = export.compacted_rv;
        st.last_rv = export.last_rv;
    }

    /// One object by key.
    pub fn get(&self, key: &str) -> Option<Arc<View>> {
        self.state.read().objects.get(key).map(|k| k.0.clone())
    }

    /// The newest rv of this resource.
    pub fn last_rv(&self) -> u64 {
        self.state.read().last_rv
    }

    /// Objects whose key starts with `prefix` (`ns/` or `""`), in key order, and the rv they are current at.
    pub fn snapshot(&self, prefix: &str) -> (Vec<Arc<View>>, u64) {
        let st = self.state.read();
        let items = in_scope(&st.objects, prefix).map(|k| k.0.clone()).collect();
        (items, st.last_rv)
    }

    /// The objects as they were at `rv` (rolled back through the log), for
    /// `resourceVersionMatch=Exact` and continue tokens.
    // A view's key never changes; only its lazily made encodings do.
    #[allow(clippy::mutable_key_type)]
    pub fn snapshot_at(&self, rv: u64, prefix: &str) -> Result<Vec<Arc<View>>, TooOld> {
        let st = self.state.read();
        if rv < st.compacted_rv {
            return Err(TooOld {
                compacted_rv: st.compacted_rv,
            });
        }
        let mut objects: BTreeSet<Keyed> = in_scope(&st.objects, prefix).cloned().collect();
        for ev in st.log.iter().rev().take_while(|e| e.rv > rv) {
            if !ev.object.key().starts_with(prefix) {
                continue;
            }
            match &ev.prev {
                Some(prev) => objects.replace(Keyed(prev.clone())),
                None => objects.take(ev.object.key()),
            };
        }
        Ok(objects.into_iter().map(|k| k.0).collect())
    }

    /// Starts a watch. `from: None` starts with the current objects; `Some(rv)`
    /// replays every logged event after `rv` (or fails if the log no longer reaches back).
    pub fn subscribe(&self, from: Option<u64>) -> Result<Subscription, TooOld> {
        let st = self.state.read();
        // Subscribing under the read lock while commits send under the write
        // lock means the replay and the live stream neither overlap nor gap.
        let live = self.live.subscribe();
        let (replay, initial) = match from {
            None => (Vec::new(), st.objects.iter().map(|k| k.0.clone()).collect()),
            Some(rv) if rv < st.compacted_rv => {
                return Err(TooOld {
                    compacted_rv: st.compacted_rv,
                })
            }
            Some(rv) => {
                let start = st.log.partition_point(|e| e.rv <= rv);
                (st.log.range(start..).cloned().collect(), Vec::new())
            }
        };
        Ok(Subscription {
            replay,
            initial,
            live,
            rv: st.last_rv,
        })
    }

    /// How many objects and logged events, and the bytes the log pins.
    pub fn sizes(&self) -> Sizes {
        let st = self.state.read();
        Sizes {
            objects: st.objects.len(),
            log_events: st.log.len(),
            log_bytes: st.log_bytes,
            list_bytes: self.lists.lock().bytes(),
        }
    }
}

/// A served object in the store's set, ordered and found by its key: the
/// key is the view's own, not a second copy in a map (a string allocation
/// and 24 bytes of B-tree per cached object).
#[derive(Debug, Clone)]
struct Keyed(Arc<View>);

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.0.key() == other.0.key()
    }
}

impl Eq for Keyed {}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.key().cmp(other.0.key())
    }
}

impl Borrow<str> for Keyed {
    fn borrow(&self) -> &str {
        self.0.key()
    }
}

/// The objects whose key starts with `prefix`, in key order.
// A view's key never changes; only its lazily made encodings do.
#[allow(clippy::mutable_key_type)]
fn in_scope<'a>(objects: &'a BTreeSet<Keyed>, prefix: &'a str) -> impl Iterator<Item = &'a Keyed> {
    // Every key is in the scope "" (a cluster-wide list, as kube-proxy's):
    // not reading each key then spares a LIST a cache miss per object.
    objects
        .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
        .take_while(move |k| prefix.is_empty() || k.0.key().starts_with(prefix))
}
