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

use serde_json::{Map, Value};

use crate::ResourceKind;

/// Top-level fields the store's kind decides (absent in a list's items).
const TYPE_META: [&str; 2] = ["kind", "apiVersion"];
/// Metadata fields that carry no meaning for a client of the view.
const NOT_MEANINGFUL: [&str; 3] = ["resourceVersion", "generation", "managedFields"];
/// The endpoints controller's timestamp of the change behind a write.
const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// Whether `old` and `new` (views of one object of `kind`) differ only in
/// what the rule above lets pass without an event.
pub(super) fn same_meaning(
    kind: ResourceKind,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) -> bool {
    let fields = |m: &'_ Map<String, Value>| {
        m.keys()
            .filter(|k| !TYPE_META.contains(&k.as_str()))
            .count()
    };
    fields(old) == fields(new)
        && old
            .iter()
            .filter(|(key, _)| !TYPE_META.contains(&key.as_str()))
            .all(|(key, a)| match (key.as_str(), new.get(key)) {
                (_, None) => false,
                ("metadata", Some(b)) => same_metadata(kind, a, b),
                (_, Some(b)) => a == b,
            })
}

fn same_metadata(kind: ResourceKind, a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    // Annotations are compared on their own (absent is none).
    let others = |m: &'_ Map<String, Value>| {
        m.iter()
            .filter(|(k, _)| k.as_str() != "annotations" && !NOT_MEANINGFUL.contains(&k.as_str()))
            .count()
    };
    others(a) == others(b)
        && a.iter()
            .filter(|(k, _)| k.as_str() != "annotations" && !NOT_MEANINGFUL.contains(&k.as_str()))
            .all(|(key, x)| b.get(key) == Some(x))
        && same_annotations(kind, a.get("annotations"), b.get("annotations"))
}

fn same_annotations(kind: ResourceKind, a: Option<&Value>, b: Option<&Value>) -> bool {
    let ignored = match kind {
        ResourceKind::Endpoints | ResourceKind::EndpointSlices => Some(TRIGGER_TIME),
        _ => None,
    };
    let kept = |v: Option<&Value>| -> Option<Map<String, Value>> {
        match v {
            None | Some(Value::Null) => Some(Map::new()),
            Some(Value::Object(m)) => Some(
                m.iter()
                    .filter(|(k, _)| Some(k.as_str()) != ignored)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            Some(_) => None,
        }
    };
    match (kept(a), kept(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
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
}
