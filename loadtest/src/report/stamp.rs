//! The stamp a churn change carries: its sequence number and its send time,
//! as annotations, so a watcher on the same host computes the latency from
//! the object alone (whatever path it came through).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

/// Annotation holding the change's sequence number (global, increasing).
pub const SEQ: &str = "loadtest.sitegrid.io/seq";
/// Annotation holding the change's send time, nanoseconds since the UNIX epoch.
pub const SENT: &str = "loadtest.sitegrid.io/sent-unix-ns";

/// Now, in nanoseconds since the UNIX epoch (the clock every process on the
/// host shares; 0 if the clock is before 1970).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Writes `seq` and `sent_ns` into `obj`'s annotations.
pub fn stamp(obj: &mut Value, seq: u64, sent_ns: u64) {
    let meta = &mut obj["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = json!({});
    }
    meta["annotations"][SEQ] = json!(seq.to_string());
    meta["annotations"][SENT] = json!(sent_ns.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_adds_both_annotations_and_keeps_others() {
        let mut obj = json!({"metadata": {"name": "a", "annotations": {"x": "y"}}});
        stamp(&mut obj, 7, 42);
        assert_eq!(obj["metadata"]["annotations"][SEQ], "7");
        assert_eq!(obj["metadata"]["annotations"][SENT], "42");
        assert_eq!(obj["metadata"]["annotations"]["x"], "y");
        let mut bare = json!({"metadata": {"name": "b"}});
        stamp(&mut bare, 1, 2);
        assert_eq!(bare["metadata"]["annotations"][SEQ], "1");
    }
}
