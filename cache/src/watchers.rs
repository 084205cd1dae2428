//! The open watches: each watch registers itself, records the last
//! resourceVersion it has dealt with, and unregisters on drop. The one count
//! of open watches (`watchers_open` and `/debug/cache` read it).

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::kind::{PerKind, ResourceKind};

/// What a watch asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherInfo {
    /// The watched resource.
    pub resource: ResourceKind,
    /// The namespace, for a namespaced watch.
    pub namespace: Option<String>,
    /// The `labelSelector` as the client sent it.
    pub label_selector: Option<String>,
    /// The `fieldSelector` as the client sent it.
    pub field_selector: Option<String>,
}

/// One registered watch.
struct Watcher {
    info: WatcherInfo,
    /// Last resourceVersion dealt with; 0 until the first [`WatcherHandle::set_sent`].
    sent: AtomicU64,
    opened: Instant,
}

/// Every open watch. Registration and removal take a short lock; progress
/// updates are a single atomic store.
#[derive(Default)]
pub struct WatcherRegistry {
    next_id: AtomicU64,
    watchers: Mutex<HashMap<u64, Arc<Watcher>>>,
}

/// A watch's entry in the [`WatcherRegistry`]; dropping it removes the entry.
pub struct WatcherHandle {
    id: u64,
    watcher: Arc<Watcher>,
    registry: Arc<WatcherRegistry>,
}

/// A watch as seen at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherSnapshot {
    /// Registration order; unique for the process's lifetime.
    pub id: u64,
    /// What the watch asked for.
    pub info: WatcherInfo,
    /// Last resourceVersion dealt with, if any yet.
    pub sent_rv: Option<u64>,
    /// How long the watch has been open.
    pub age: Duration,
}

impl WatcherRegistry {
    /// Adds a watch; it stays listed until the handle is dropped.
    pub fn register(self: &Arc<Self>, info: WatcherInfo) -> WatcherHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let watcher = Arc::new(Watcher {
            info,
            sent: AtomicU64::new(0),
            opened: Instant::now(),
        });
        self.watchers.lock().insert(id, watcher.clone());
        WatcherHandle {
            id,
            watcher,
            registry: self.clone(),
        }
    }

    /// The open watches, oldest first.
    pub fn snapshot(&self) -> Vec<WatcherSnapshot> {
        let watchers: Vec<(u64, Arc<Watcher>)> = self
            .watchers
            .lock()
            .iter()
            .map(|(id, w)| (*id, w.clone()))
            .collect();
        // Copied outside the lock so registering watches never waits on a scrape.
        let now = Instant::now();
        let mut out: Vec<WatcherSnapshot> = watchers
            .into_iter()
            .map(|(id, w)| WatcherSnapshot {
                id,
                info: w.info.clone(),
                sent_rv: match w.sent.load(Ordering::Relaxed) {
                    0 => None,
                    rv => Some(rv),
                },
                age: now.saturating_duration_since(w.opened),
            })
            .collect();
        out.sort_by_key(|w| w.id);
        out
    }

    /// Open watches per resource.
    pub fn count(&self) -> PerKind<usize> {
        let mut counts = PerKind::<usize>::default();
        for w in self.watchers.lock().values() {
            counts[w.info.resource] += 1;
        }
        counts
    }
}

impl WatcherHandle {
    /// Records the resourceVersion of the last event this watch has dealt with:
    /// sent, or skipped because it did not match the watch's selectors (a
    /// bookmark counts too), so a quiet filtered watch does not look lagging.
    pub fn set_sent(&self, rv: u64) {
        self.watcher.sent.store(rv, Ordering::Relaxed);
    }
}

impl Drop for WatcherHandle {
    fn drop(&mut self) {
        self.registry.watchers.lock().remove(&self.id);
    }
}

impl std::fmt::Debug for WatcherHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatcherHandle")
            .field("id", &self.id)
            .field("resource", &self.watcher.info.resource)
            .finish()
    }
}
