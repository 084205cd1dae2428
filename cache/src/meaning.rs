//! Which changes a client of a served view can use: the rule that keeps
//! no-op events off the edge link.
//!
//! A change of an upstream object whose new view differs from the served
//! one only in the fields below is not a change of the view: the previous
//! view stays served, with its resourceVersion, and no event is sent.
//!
//! - `metadata.resourceVersion`: the proxy numbers its own states.
//! - `metadata.generation`: kube-apiserver bumps it on every write of an
//!   EndpointSlice, also when the endpoints that changed are ones this view
//!   filters out. A filtered view's generation already differs from the API
//!   server's object: the EndpointSlice controller is its only reader, and it
//!   reads the API server, not the proxy.
//! - `metadata.managedFields`: who last wrote which field and when; server-
//!   side apply reads it on the API server, never from a cache.
//! - `kind` and `apiVersion` at the top: a list's items lack them, a watch
//!   event's object carries them, and the store's kind decides them anyway;
//!   without this every object's first change after a list would be an
//!   event, whatever it changed.
//! - For Endpoints and EndpointSlices, the annotation
//!   `endpoints.kubernetes.io/last-change-trigger-time`: the endpoints
//!   controller stamps every write with the time of the pod change behind
//!   it. kube-proxy only reads it to measure how long programming a change
//!   took (`network_programming_duration_seconds`): for a change its view
//!   does not contain there is nothing to program, and when the view does
//!   change, the new annotation comes with it.
//!
//! Everything else counts, for every kind: labels, other annotations,
//! endpoints (addresses, conditions, hints, node names), ports, spec and
//! status. What a client can observe: a list, get or watch through the
//! proxy shows the generation, managedFields and trigger time of the last
//! state that changed its view, not the API server's newest. Lists, gets,
//! watches and resumed watches agree with each other. A node proxy behind a
//! site proxy applies the same rule to the site's views and serves what a
//! node proxy talking to the API server serves, up to these stamps: when a
//! node joins the site, its recomputed view may carry the site proxy's
//! older ones.
//!
//! The rule is kept as a digest of what a view means ([`Meaning`]), made
//! once with the view: deciding whether a change is one compares two
//! digests, without reading the served view back. Two views whose
//! meanings are equal by the rule have equal digests (objects' keys in any
//! order, absent annotations as none); two that differ have different ones
//! but with a chance of about 2^-128 (XXH3's 128 bits over an unambiguous
//! canonical form, seeded at random per process). XXH3 is not a
//! cryptographic hash; whoever could craft two states of an object that
//! collide may write that object, and so could change what is served
//! anyway.

use std::{cell::RefCell, sync::OnceLock};

use serde_json::{Map, Number, Value};
use twox_hash::XxHash3_128;

use crate::{encode::with_scratch, ResourceKind};

/// Top-level fields the store's kind decides (absent in a list's items).
const TYPE_META: [&str; 2] = ["kind", "apiVersion"];
/// Metadata fields that carry no meaning for a client of the view.
const NOT_MEANINGFUL: [&str; 3] = ["resourceVersion", "generation", "managedFields"];
/// The endpoints controller's timestamp of the change behind a write.
const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// What a view of an object of some kind means to its clients (see the
/// module doc): equal for two views when the rule lets the change from one
/// to the other pass without an event, and (but for the digest's chance)
/// only then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meaning([u64; 2]);

impl Meaning {
    /// The meaning of `obj`, a full object of `kind` as JSON.
    pub(crate) fn of(kind: ResourceKind, obj: &Map<String, Value>) -> Meaning {
        let digest = with_scratch(&CANONICAL, |out| {
            write_top(out, kind, obj);
            XxHash3_128::oneshot_with_seed(seed(), out)
        });
        // Two words: an alignment of 8 keeps the view's header compact.
        Meaning([digest as u64, (digest >> 64) as u64])
    }
}

thread_local! {
    /// Where a view's canonical form is written before it is hashed.
    static CANONICAL: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// This process's seed: digests are compared within one process only.
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        std::hash::RandomState::new().build_hasher().finish()
    })
}

// The canonical form: each value behind a tag byte, strings and containers
// behind their lengths (no two values write the same bytes), objects'
// entries sorted by key (a JSON object's order carries no meaning, and the
// protobuf and JSON upstreams order fields differently).

fn write_top(out: &mut Vec<u8>, kind: ResourceKind, obj: &Map<String, Value>) {
    let entries = obj.iter().filter(|(k, _)| !TYPE_META.contains(&k.as_str()));
    write_entries(out, entries, |out, key, value| match (key, value) {
        ("metadata", Value::Object(meta)) => write_metadata(out, kind, meta),
        _ => write_value(out, value),
    });
}

fn write_metadata(out: &mut Vec<u8>, kind: ResourceKind, meta: &Map<String, Value>) {
    let entries = meta
        .iter()
        .filter(|(k, _)| k.as_str() != "annotations" && !NOT_MEANINGFUL.contains(&k.as_str()));
    write_entries(out, entries, |out, _, value| write_value(out, value));
    // Annotations on their own, after the entries: absent or null is none.
    let ignored = match kind {
        ResourceKind::Endpoints | ResourceKind::EndpointSlices => Some(TRIGGER_TIME),
        _ => None,
    };
    match meta.get("annotations") {
        None | Some(Value::Null) => write_entries(out, std::iter::empty(), |_, _, _| {}),
        Some(Value::Object(annotations)) => {
            let kept = annotations
                .iter()
                .filter(|(k, _)| Some(k.as_str()) != ignored);
            write_entries(out, kept, |out, _, value| write_value(out, value));
        }
        Some(other) => {
            out.push(b'!');
            write_value(out, other);
        }
    }
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(b'n'),
        Value::Bool(b) => out.push(if *b { b't' } else { b'f' }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, b's', s),
        Value::Array(items) => {
            out.push(b'[');
            write_len(out, items.len());
            for item in items {
                write_value(out, item);
            }
        }
        Value::Object(map) => {
            write_entries(out, map.iter(), |out, _, value| write_value(out, value))
        }
    }
}

/// An object's entries, sorted by key, each value written by `value`.
fn write_entries<'a>(
    out: &mut Vec<u8>,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    value: impl Fn(&mut Vec<u8>, &str, &Value),
) {
    let mut sorted: Vec<(&str, &Value)> = entries.map(|(k, v)| (k.as_str(), v)).collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    write_len(out, sorted.len());
    for (key, v) in sorted {
        write_str(out, b'k', key);
        value(out, key, v);
    }
}

/// A number as serde_json compares them: an integer and a float are
/// different numbers, and 0.0 is -0.0.
fn write_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(u) = n.as_u64() {
        out.push(b'u');
        out.extend_from_slice(&u.to_le_bytes());
    } else if let Some(i) = n.as_i64() {
        out.push(b'i');
        out.extend_from_slice(&i.to_le_bytes());
    } else {
        let f = n.as_f64().unwrap_or_default();
        out.push(b'd');
        out.extend_from_slice(&(f + 0.0).to_bits().to_le_bytes());
    }
}

fn write_str(out: &mut Vec<u8>, tag: u8, s: &str) {
    out.push(tag);
    write_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn write_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as u64).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ResourceKind::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test objects are objects"),
        }
    }

    fn same_meaning(
        kind: ResourceKind,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> bool {
        Meaning::of(kind, old) == Meaning::of(kind, new)
    }

    fn slice(generation: u64, time: &str, addresses: &[&str]) -> Map<String, Value> {
        map(json!({
            "metadata": {"name": "s", "namespace": "default", "resourceVersion": generation.to_string(),
                "generation": generation, "labels": {"kubernetes.io/service-name": "svc"},
                "annotations": {TRIGGER_TIME: time},
                "managedFields": [{"manager": "kube-controller-manager", "time": time}]},
            "addressType": "IPv4",
            "endpoints": addresses.iter().map(|a| json!({"addresses": [a]})).collect::<Vec<_>>(),
        }))
    }

    #[test]
    fn generation_managed_fields_and_trigger_time_alone_are_no_change() {
        let old = slice(1, "2026-11-28T10:00:00Z", &["10.0.0.1"]);
        let new = slice(2, "2026-11-28T10:00:05Z", &["10.0.0.1"]);
        assert!(same_meaning(EndpointSlices, &old, &new));
        assert!(same_meaning(Endpoints, &old, &new));
        // For other kinds the trigger-time annotation is an annotation like any.
        assert!(!same_meaning(Services, &old, &new));
        let mut services_new = new.clone();
        services_new["metadata"]["annotations"] = old["metadata"]["annotations"].clone();
        assert!(same_meaning(Services, &old, &services_new));
    }

    #[test]
    fn what_a_client_uses_is_a_change() {
        let old = slice(1, "t1", &["10.0.0.1"]);
        for changed in [
            slice(2, "t2", &["10.0.0.2"]),
            slice(2, "t2", &["10.0.0.1", "10.0.0.2"]),
            slice(2, "t2", &[]),
        ] {
            assert!(!same_meaning(EndpointSlices, &old, &changed));
        }
        let mut labelled = slice(2, "t2", &["10.0.0.1"]);
        labelled["metadata"]["labels"]["extra"] = json!("x");
        assert!(!same_meaning(EndpointSlices, &old, &labelled));
        let mut annotated = slice(2, "t2", &["10.0.0.1"]);
        annotated["metadata"]["annotations"]["other"] = json!("x");
        assert!(!same_meaning(EndpointSlices, &old, &annotated));
        let mut ported = slice(2, "t2", &["10.0.0.1"]);
        ported.insert("ports".into(), json!([{"port": 80}]));
        assert!(!same_meaning(EndpointSlices, &old, &ported));
        let mut hinted = slice(2, "t2", &["10.0.0.1"]);
        hinted["endpoints"][0]["hints"] = json!({"forZones": [{"name": "a"}]});
        assert!(!same_meaning(EndpointSlices, &old, &hinted));
    }

    #[test]
    fn a_listed_object_then_its_watch_event_differ_in_type_meta_only() {
        // Listed: no kind or apiVersion. Its next watch event: both, and a
        // change elsewhere in the slice (the generation moved).
        let listed = slice(1, "t1", &["10.0.0.1"]);
        let mut watched = slice(2, "t1", &["10.0.0.1"]);
        watched.insert("kind".into(), json!("EndpointSlice"));
        watched.insert("apiVersion".into(), json!("discovery.k8s.io/v1"));
        assert!(same_meaning(EndpointSlices, &listed, &watched));
        assert!(same_meaning(EndpointSlices, &watched, &listed));
        let mut moved = watched.clone();
        moved["endpoints"][0]["addresses"] = json!(["10.0.0.2"]);
        assert!(!same_meaning(EndpointSlices, &listed, &moved));
    }

    #[test]
    fn a_trigger_time_that_comes_or_goes_alone_is_no_change() {
        let mut bare = slice(1, "t1", &["10.0.0.1"]);
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        let stamped = slice(2, "t2", &["10.0.0.1"]);
        assert!(same_meaning(EndpointSlices, &bare, &stamped));
        assert!(same_meaning(EndpointSlices, &stamped, &bare));
        let mut other = stamped.clone();
        other["metadata"]["annotations"]["other"] = json!("x");
        assert!(!same_meaning(EndpointSlices, &bare, &other));
        assert!(!same_meaning(EndpointSlices, &other, &bare));
    }

    #[test]
    fn the_order_of_an_objects_keys_is_no_change() {
        // The same slice as the protobuf upstream orders it and as the JSON
        // one does (a kind read in JSON again after protobuf relists as this).
        let from_protobuf = map(json!({
            "metadata": {"name": "s", "namespace": "default", "labels": {"a": "1", "b": "2"}},
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true}, "nodeName": "n1"}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            "addressType": "IPv4",
        }));
        let from_json = map(json!({
            "addressType": "IPv4",
            "metadata": {"labels": {"b": "2", "a": "1"}, "namespace": "default", "name": "s"},
            "endpoints": [{"nodeName": "n1", "conditions": {"serving": true, "ready": true}, "addresses": ["10.0.0.1"]}],
            "ports": [{"protocol": "TCP", "port": 80, "name": "http"}],
        }));
        assert!(same_meaning(EndpointSlices, &from_protobuf, &from_json));
        // An array's order is meaningful.
        let mut swapped = from_json.clone();
        swapped["endpoints"][0]["addresses"] = json!(["10.0.0.1", "10.0.0.2"]);
        let mut other = from_json.clone();
        other["endpoints"][0]["addresses"] = json!(["10.0.0.2", "10.0.0.1"]);
        assert!(!same_meaning(EndpointSlices, &swapped, &other));
    }

    #[test]
    fn values_that_print_alike_are_told_apart() {
        let base = slice(1, "t1", &["10.0.0.1"]);
        let with = |field: &str, value: Value| {
            let mut m = base.clone();
            m.insert(field.into(), value);
            m
        };
        // Strings split differently, a string and a number, an integer and a
        // float, null and false, an empty array and an empty object: every
        // pair is a change.
        let pairs = [
            (json!(["ab", "c"]), json!(["a", "bc"])),
            (json!("1"), json!(1)),
            (json!(1), json!(1.0)),
            (json!(null), json!(false)),
            (json!([]), json!({})),
            (json!({"a": "b"}), json!({"ab": ""})),
            (json!([[], []]), json!([[[]]])),
        ];
        for (a, b) in pairs {
            assert!(
                !same_meaning(EndpointSlices, &with("x", a.clone()), &with("x", b.clone())),
                "{a} and {b}"
            );
        }
        // A key that moves into metadata is a change too.
        let mut moved = base.clone();
        moved["metadata"]["addressType"] = json!("IPv4");
        moved.shift_remove("addressType");
        assert!(!same_meaning(EndpointSlices, &base, &moved));
    }

    #[test]
    fn absent_null_and_empty_annotations_are_alike() {
        let mut absent = slice(1, "t1", &["10.0.0.1"]);
        let meta = absent["metadata"].as_object_mut().unwrap();
        meta.shift_remove("annotations");
        let mut null = absent.clone();
        null["metadata"]["annotations"] = Value::Null;
        let mut empty = absent.clone();
        empty["metadata"]["annotations"] = json!({});
        assert!(same_meaning(Services, &absent, &null));
        assert!(same_meaning(Services, &absent, &empty));
        // Annotations that are not an object (an object that does not read as
        // its kind) compare as they are.
        let mut odd = absent.clone();
        odd["metadata"]["annotations"] = json!("x");
        assert!(!same_meaning(Services, &absent, &odd));
        assert!(same_meaning(Services, &odd, &odd.clone()));
    }
}
