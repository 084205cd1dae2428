//! The few fields the probe reads from a LIST body or a watch frame, decoded
//! with serde (everything else in the object is skipped, not built), or from
//! a protobuf watch frame with prost (only the object's `metadata` decoded).

use std::collections::HashMap;

use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde::Deserialize;
use sitegrid_apimachinery::protobuf::to_json::envelope_parts;

use super::stamp::{SENT, SEQ};

/// One watch event line.
#[derive(Debug, Deserialize)]
pub struct WatchFrame {
    /// ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
    #[serde(rename = "type")]
    pub kind: String,
    /// The object (a `Status` for ERROR).
    #[serde(default)]
    pub object: Item,
}

impl WatchFrame {
    /// A watch frame: a JSON line, or with `protobuf` a protobuf frame
    /// without its length; None if it does not decode.
    pub fn read(frame: &[u8], protobuf: bool) -> Option<WatchFrame> {
        if protobuf {
            Self::from_protobuf(frame)
        } else {
            serde_json::from_slice(frame).ok()
        }
    }

    /// A protobuf watch frame (without its 4-byte length): a
    /// `metav1.WatchEvent` whose object is an object on the wire (a
    /// `Status` for ERROR).
    fn from_protobuf(frame: &[u8]) -> Option<WatchFrame> {
        let event = meta::WatchEvent::decode(frame).ok()?;
        let kind = event.r#type.unwrap_or_default();
        let wire = event.object.and_then(|o| o.raw).unwrap_or_default();
        let (_, _, raw) = envelope_parts(&wire).ok()?;
        let object = if kind == "ERROR" {
            let status = meta::Status::decode(&raw[..]).ok()?;
            Item {
                metadata: Meta::default(),
                code: status.code.and_then(|c| u16::try_from(c).ok()),
            }
        } else {
            let m = Metadata::decode(&raw[..])
                .ok()?
                .metadata
                .unwrap_or_default();
            Item {
                metadata: Meta {
                    name: m.name.unwrap_or_default(),
                    namespace: m.namespace.unwrap_or_default(),
                    resource_version: m.resource_version.unwrap_or_default(),
                    annotations: Some(m.annotations.into_iter().collect()),
                },
                code: None,
            }
        };
        Some(WatchFrame { kind, object })
    }
}

/// The first field of every object's message, its `ObjectMeta`; prost
/// skips the others unread.
#[derive(Clone, PartialEq, Message)]
struct Metadata {
    #[prost(message, optional, tag = "1")]
    metadata: Option<meta::ObjectMeta>,
}

/// A LIST body.
#[derive(Debug, Deserialize)]
pub struct ListBody {
    /// The list's metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// The objects.
    #[serde(default)]
    pub items: Vec<Item>,
}

/// An object as the probe sees it.
#[derive(Debug, Default, Deserialize)]
pub struct Item {
    /// Its metadata.
    #[serde(default)]
    pub metadata: Meta,
    /// A `Status`'s HTTP code (ERROR events).
    #[serde(default)]
    pub code: Option<u16>,
}

/// Object or list metadata.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// The object's name.
    #[serde(default)]
    pub name: String,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: String,
    /// Its resourceVersion.
    #[serde(default)]
    pub resource_version: String,
    /// Its annotations.
    #[serde(default)]
    pub annotations: Option<HashMap<String, String>>,
}

impl Meta {
    /// The churn stamp: (sequence number, send time in UNIX ns); (0, 0) if
    /// the object was never changed by the churn.
    pub fn stamp(&self) -> (u64, u64) {
        let get = |k: &str| {
            self.annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (get(SEQ), get(SENT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_stamp_of_a_watch_event_and_the_code_of_an_error() {
        let line = br#"{"type":"MODIFIED","object":{"kind":"EndpointSlice","metadata":{"name":"a","namespace":"default","resourceVersion":"12","annotations":{"loadtest.sitegrid.io/seq":"3","loadtest.sitegrid.io/sent-unix-ns":"99"}},"endpoints":[]}}"#;
        let f: WatchFrame = serde_json::from_slice(line).unwrap();
        assert_eq!(f.kind, "MODIFIED");
        assert_eq!(f.object.metadata.stamp(), (3, 99));
        assert_eq!(f.object.metadata.resource_version, "12");
        let err = br#"{"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired","code":410}}"#;
        let f: WatchFrame = serde_json::from_slice(err).unwrap();
        assert_eq!(f.object.code, Some(410));
        assert_eq!(f.object.metadata.stamp(), (0, 0));
    }

    /// The frames as the proxy and the in-memory API server write them
    /// (apimachinery's encoder), read back with k8s-pb's messages.
    #[test]
    fn reads_the_stamp_and_the_code_from_protobuf_watch_frames() {
        use sitegrid_apimachinery::{protobuf, Status};
        let slice = br#"{"metadata":{"name":"a","namespace":"default","resourceVersion":"12","annotations":{"loadtest.sitegrid.io/seq":"3","loadtest.sitegrid.io/sent-unix-ns":"99"}},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}]}"#;
        let message = protobuf::message(protobuf::Kind::EndpointSliceV1, slice).unwrap();
        let object = protobuf::envelope("discovery.k8s.io/v1", "EndpointSlice", &message);
        let frame = protobuf::watch_event("MODIFIED", &object);
        let f = WatchFrame::read(&frame[4..], true).unwrap();
        assert_eq!(f.kind, "MODIFIED");
        assert_eq!(
            (
                f.object.metadata.namespace.as_str(),
                f.object.metadata.name.as_str()
            ),
            ("default", "a")
        );
        assert_eq!(f.object.metadata.stamp(), (3, 99));
        assert_eq!(f.object.metadata.resource_version, "12");
        let error =
            protobuf::watch_event("ERROR", &protobuf::status(&Status::expired("list again")));
        let f = WatchFrame::read(&error[4..], true).unwrap();
        assert_eq!((f.kind.as_str(), f.object.code), ("ERROR", Some(410)));
        assert!(WatchFrame::read(b"not protobuf", true).is_none());
    }
}
