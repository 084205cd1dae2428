//! The few fields the probe reads from a LIST body or a watch frame, decoded
//! with serde (everything else in the object is skipped, not built).

use std::collections::HashMap;

use serde::Deserialize;

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
}
