//! A change to a resource's served state, encoded once per API version.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
pub use sitegrid_apimachinery::watch::EventType;

use super::{
    encode::watch_frame,
    kind::{ApiVersion, Served},
    View,
};

/// One committed change, shared by every watcher through an `Arc`.
#[derive(Debug)]
pub struct Event {
    /// The proxy resourceVersion of the change.
    pub rv: u64,
    /// Added, modified or deleted.
    pub event_type: EventType,
    /// The new state (for DELETED: the last state, carrying the deletion's rv).
    pub object: Arc<View>,
    /// The state before (None for ADDED): for selector transitions and
    /// reconstructing older snapshots.
    pub prev: Option<Arc<View>>,
    /// The watch frame per served version, encoded on first use.
    frames: [OnceLock<Bytes>; 2],
}

impl Event {
    /// A new event.
    pub fn new(
        rv: u64,
        event_type: EventType,
        object: Arc<View>,
        prev: Option<Arc<View>>,
    ) -> Event {
        Event {
            rv,
            event_type,
            object,
            prev,
            frames: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The JSON watch frame for `served` (the store keeps objects in
    /// `native`), encoded once and shared by every watcher.
    pub fn frame(&self, served: Served, native: ApiVersion) -> Bytes {
        self.frames[served.version.index()]
            .get_or_init(|| {
                watch_frame(
                    self.event_type.as_str(),
                    served,
                    self.object.body(served.version, native),
                )
            })
            .clone()
    }
}
