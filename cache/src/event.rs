//! A change to a resource's served state, its watch frame encoded once per
//! wire format and API version.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
pub use sitegrid_apimachinery::watch::EventType;

use sitegrid_apimachinery::protobuf::EncodeError;

use super::{
    encode::{codec::Codec, json, proto, Wire},
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
    /// The watch frame per wire format and served version, encoded on first use.
    frames: [[OnceLock<Bytes>; 2]; 2],
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
            frames: Default::default(),
        }
    }

    /// The watch frame for `served` in `wire` (the store keeps objects in
    /// `native`), encoded once and shared by every watcher.
    pub fn frame(
        &self,
        codec: &Codec,
        served: Served,
        native: ApiVersion,
        wire: Wire,
    ) -> Result<Bytes, EncodeError> {
        let slot = &self.frames[wire as usize][served.version.index()];
        if let Some(frame) = slot.get() {
            return Ok(frame.clone());
        }
        let event_type = self.event_type.as_str();
        let frame = match wire {
            Wire::Json => json::watch_frame(
                event_type,
                served,
                self.object.body(codec, served.version, native),
            ),
            Wire::Protobuf => proto::watch_frame(
                event_type,
                served,
                &self.object.message(codec, served, native)?,
            ),
        };
        Ok(slot.get_or_init(|| frame).clone())
    }
}
