//! The proxy's cache: per-resource served state, built by the projector from
//! the upstream reflectors' events.

mod event;
mod projector;
mod store;
mod view;

use std::time::{SystemTime, UNIX_EPOCH};

pub use event::{Event, EventType};
pub use projector::{Projector, UpstreamEvent};
pub use store::{Change, ResourceStore, Subscription, TooOld};
use tokio::sync::watch;
pub use view::{View, ViewLabels};

use crate::resource::{ApiVersion, ResourceKind};

/// Sizes of the bounded buffers.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Events kept per resource for watch resume.
    pub log_capacity: usize,
    /// Events a watcher may fall behind by before it is ended with 410.
    pub watcher_buffer: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            log_capacity: 10_000,
            watcher_buffer: 1_000,
        }
    }
}

/// Every cached resource plus the proxy-wide resourceVersion clock.
pub struct Cache {
    stores: [ResourceStore; 4],
    /// The first resourceVersion of this process; every earlier one is from a previous run.
    pub start_rv: u64,
    rv: watch::Sender<u64>,
}

impl Cache {
    /// An empty cache. EndpointSlices are stored in `slice_version`, the version
    /// the upstream serves.
    pub fn new(config: CacheConfig, slice_version: ApiVersion) -> Cache {
        Self::with_start_rv(config, slice_version, start_rv_now())
    }

    /// An empty cache whose versions start after `start_rv`.
    pub fn with_start_rv(config: CacheConfig, slice_version: ApiVersion, start_rv: u64) -> Cache {
        let store = |kind| {
            let native = if kind == ResourceKind::EndpointSlices {
                slice_version
            } else {
                ApiVersion::V1
            };
            ResourceStore::new(
                kind,
                native,
                start_rv,
                config.log_capacity,
                config.watcher_buffer,
            )
        };
        Cache {
            stores: ResourceKind::ALL.map(store),
            start_rv,
            rv: watch::channel(start_rv).0,
        }
    }

    /// The store of one resource.
    pub fn store(&self, kind: ResourceKind) -> &ResourceStore {
        &self.stores[kind.index()]
    }

    /// Records which EndpointSlice version the upstream serves; called once,
    /// after discovery and before the reflectors start.
    pub fn set_slice_version(&self, version: ApiVersion) {
        self.store(ResourceKind::EndpointSlices).set_native(version);
    }

    /// The newest resourceVersion handed out, across resources.
    pub fn current_rv(&self) -> u64 {
        *self.rv.borrow()
    }

    /// Records that versions up to `rv` have been committed.
    pub(crate) fn advance_rv(&self, rv: u64) {
        self.rv.send_if_modified(|cur| {
            let moved = rv > *cur;
            if moved {
                *cur = rv;
            }
            moved
        });
    }

    /// Waits until the clock reaches `rv`; false if it did not within `limit`.
    pub async fn wait_for_rv(&self, rv: u64, limit: std::time::Duration) -> bool {
        let mut rx = self.rv.subscribe();
        let reached = tokio::time::timeout(limit, rx.wait_for(|cur| *cur >= rv)).await;
        matches!(reached, Ok(Ok(_)))
    }

    /// Whether every resource has synced.
    pub fn is_synced(&self) -> bool {
        self.stores.iter().all(ResourceStore::is_synced)
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

#[cfg(test)]
mod tests;
