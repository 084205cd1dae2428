//! Protobuf framing of cached objects and events, over
//! `sitegrid_apimachinery::protobuf`: the envelope a resource's objects travel
//! in, and the frames of BOOKMARK and ERROR events.

use std::collections::BTreeMap;

use bytes::Bytes;
use sitegrid_apimachinery::{protobuf, Status};

use crate::kind::Served;

/// A whole object of `served` on the wire: its message in the envelope.
pub fn object(served: Served, message: &[u8]) -> Bytes {
    protobuf::envelope(served.api_version(), served.kind.kind(), message)
}

/// A watch frame of `event_type` around an object's message.
pub fn watch_frame(event_type: &str, served: Served, message: &[u8]) -> Bytes {
    protobuf::watch_event(event_type, &object(served, message))
}

/// A BOOKMARK frame at `rv` with `annotations`.
pub fn bookmark_frame(served: Served, rv: u64, annotations: &BTreeMap<String, String>) -> Bytes {
    let object = protobuf::bookmark(
        served.message(),
        served.api_version(),
        served.kind.kind(),
        &rv.to_string(),
        annotations,
    );
    protobuf::watch_event("BOOKMARK", &object)
}

/// An ERROR frame carrying `status`.
pub fn error_frame(status: &Status) -> Bytes {
    protobuf::watch_event("ERROR", &protobuf::status(status))
}
