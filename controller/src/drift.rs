//! Deciding whether a child must be applied at all.
//!
//! Server-side apply of an unchanged object is harmless but is still an API
//! write (and, on some API servers, a new `managedFields` timestamp). The
//! controller resyncs every grid periodically, so it only applies a child when
//! the live object differs from what it would apply:
//!
//! - every field the controller sets has the same value live ([`contains`]:
//!   maps may hold more keys, e.g. defaults the API server filled in; lists
//!   must match element by element), and
//! - the live object carries the hash of the same desired object in
//!   [`APPLIED_HASH_ANNOTATION`], so a field the controller *stopped* setting
//!   (which [`contains`] cannot see) still leads to an apply that removes it.
//!
//! The annotation lives on the generated child, never on the grid: the grid's
//! spec is the user's (or their GitOps tool's) alone.
//!
//! A child without that annotation was made by someone else: SuperEdge's
//! application-grid-controller, whose children sitegrid takes over (same
//! names, labels and owner references). Such a child is adopted by applying
//! to it only when that changes nothing its pods run from
//! ([`adoption_blocker`]); otherwise taking it over would roll its pods, so it
//! is left alone until the grid matches it or the user asks for the roll
//! with [`ADOPT_ANNOTATION`].

use serde_json::Value;

/// Annotation on every generated child: the FNV-1a 64 hash (hex) of the
/// object the controller last applied.
pub const APPLIED_HASH_ANNOTATION: &str = "sitegrid.io/applied-hash";

/// Annotation a user puts on a child sitegrid has never applied, with the
/// value [`ADOPT_ROLL`], to let sitegrid take it over even though its pods
/// restart (see [`adoption_blocker`]).
pub const ADOPT_ANNOTATION: &str = "sitegrid.io/adopt";

/// The value of [`ADOPT_ANNOTATION`] that allows the roll.
pub const ADOPT_ROLL: &str = "roll";

/// Why a child sitegrid never applied cannot be adopted in place: the first
/// field under `fields` (JSON pointers, e.g. `/spec/template`) whose value in
/// `desired` is not what `live` has, as a dotted path with both values.
///
/// `None` when the child carries [`APPLIED_HASH_ANNOTATION`] (sitegrid made
/// or adopted it: changes roll as the grid says), when the user allowed the
/// roll ([`ADOPT_ANNOTATION`]), or when every field is contained in the live
/// object (applying keeps the pods: fields the API server defaulted, or that
/// the other controller set and sitegrid does not, stay as they are).
pub fn adoption_blocker(live: &Value, desired: &Value, fields: &[&str]) -> Option<Difference> {
    let annotations = live.pointer("/metadata/annotations");
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    if annotation(APPLIED_HASH_ANNOTATION).is_some()
        || annotation(ADOPT_ANNOTATION) == Some(ADOPT_ROLL)
    {
        return None;
    }
    fields.iter().find_map(|pointer| {
        let want = desired.pointer(pointer)?;
        let path = pointer.trim_start_matches('/').replace('/', ".");
        let have = live.pointer(pointer).unwrap_or(&Value::Null);
        first_difference(have, want, path)
    })
}

/// A field whose desired value is not in the live object.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// Where, as kubectl's JSONPath-like dotted path (`spec.template.spec.containers[0].image`).
    pub path: String,
    /// The live value (`null` when absent).
    pub live: Value,
    /// The value the grid asks for.
    pub desired: Value,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {} but the grid has {}",
            self.path,
            short(&self.live),
            short(&self.desired)
        )
    }
}

/// A value as JSON, cut to a readable length.
fn short(value: &Value) -> String {
    const MAX: usize = 80;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// The first place where `want` is not contained in `have` (as [`contains`]
/// decides), below `path`.
fn first_difference(have: &Value, want: &Value, path: String) -> Option<Difference> {
    let differ = || {
        Some(Difference {
            path: path.clone(),
            live: have.clone(),
            desired: want.clone(),
        })
    };
    match (have, want) {
        (Value::Object(have), Value::Object(want)) => want.iter().find_map(|(key, w)| {
            let at = if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                format!("{path}.{key}")
            } else {
                format!("{path}[{key}]")
            };
            match have.get(key) {
                Some(h) => first_difference(h, w, at),
                None if is_empty_collection(w) || w.is_null() => None,
                None => first_difference(&Value::Null, w, at),
            }
        }),
        (Value::Array(h), Value::Array(w)) if h.len() == w.len() => h
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (h, w))| first_difference(h, w, format!("{path}[{i}]"))),
        _ if contains(have, want) => None,
        _ => differ(),
    }
}

/// The hash recorded in [`APPLIED_HASH_ANNOTATION`] for `desired`.
///
/// `desired` is serialized by `serde_json`, whose output for the same value
/// is the same bytes (maps are ordered), so the hash is stable across runs.
pub fn desired_hash(desired: &Value) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = desired.to_string();
    let hash = bytes
        .as_bytes()
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME));
    format!("{hash:016x}")
}

/// Adds [`APPLIED_HASH_ANNOTATION`] for `desired` to `desired` itself.
pub fn stamp(desired: &mut Value) {
    let hash = desired_hash(desired);
    if let Some(metadata) = desired.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(APPLIED_HASH_ANNOTATION.to_owned(), Value::String(hash));
        }
    }
}

/// Sets `protocol: TCP` on every port (`spec.ports[*]` of a Service,
/// `containers[*].ports[*]`) that has none.
///
/// TCP is the API server's default, so the object means the same; but
/// `protocol` is part of the key of those lists for server-side apply, and
/// Kubernetes 1.20 refuses an applied list element that omits a key field.
pub fn fill_port_protocols(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if key == "ports" {
                    for port in child.as_array_mut().into_iter().flatten() {
                        if let Some(port) = port.as_object_mut() {
                            let is_port =
                                port.contains_key("port") || port.contains_key("containerPort");
                            if is_port && !port.contains_key("protocol") {
                                port.insert("protocol".into(), Value::String("TCP".into()));
                            }
                        }
                    }
                } else {
                    fill_port_protocols(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(fill_port_protocols),
        _ => {}
    }
}

/// Whether `live` already is what applying the stamped `desired` would make it.
pub fn up_to_date(stamped_desired: &Value, live: &Value) -> bool {
    let hash_of = |v: &Value| {
        v.pointer("/metadata/annotations")
            .and_then(|a| a.get(APPLIED_HASH_ANNOTATION))
            .cloned()
    };
    hash_of(stamped_desired).is_some()
        && hash_of(stamped_desired) == hash_of(live)
        && contains(live, stamped_desired)
}

/// Whether every field set in `want` has the same value in `have`.
///
/// Objects: each key of `want` must be present in `have` with a contained
/// value (an empty object or list in `want` also matches an absent key, as the
/// API server drops empty collections). Lists: same length, element-wise
/// contained. Numbers compare by value; other scalars must be equal.
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(have), Value::Object(want)) => {
            want.iter().all(|(key, w)| match have.get(key) {
                Some(h) => contains(h, w),
                None => is_empty_collection(w) || w.is_null(),
            })
        }
        (Value::Array(have), Value::Array(want)) => {
            have.len() == want.len() && have.iter().zip(want).all(|(h, w)| contains(h, w))
        }
        (Value::Number(h), Value::Number(w)) => h.as_f64() == w.as_f64(),
        (h, w) => h == w,
    }
}

fn is_empty_collection(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stamped(v: Value) -> Value {
        let mut v = v;
        stamp(&mut v);
        v
    }

    #[test]
    fn live_object_with_server_defaults_is_up_to_date() {
        let desired = stamped(json!({
            "metadata": {"name": "a", "labels": {"x": "1"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        }));
        let mut live = desired.clone();
        live["metadata"]["uid"] = json!("u");
        live["metadata"]["resourceVersion"] = json!("7");
        live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        live["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        live["status"] = json!({"replicas": 2});
        assert!(up_to_date(&desired, &live));
    }

    #[test]
    fn changed_value_extra_list_item_or_foreign_edit_need_an_apply() {
        let desired = stamped(
            json!({"metadata": {"name": "a"}, "spec": {"replicas": 2, "ports": [{"port": 80}]}}),
        );
        let mut scaled = desired.clone();
        scaled["spec"]["replicas"] = json!(5);
        assert!(!up_to_date(&desired, &scaled));
        let mut more_ports = desired.clone();
        more_ports["spec"]["ports"] = json!([{"port": 80}, {"port": 81}]);
        assert!(!up_to_date(&desired, &more_ports));
    }

    #[test]
    fn a_field_no_longer_desired_is_seen_through_the_hash() {
        let old = json!({"metadata": {"name": "a", "labels": {"x": "1", "gone": "y"}}});
        let new = json!({"metadata": {"name": "a", "labels": {"x": "1"}}});
        // The new desired object is contained in the old one: only the hash tells them apart.
        assert!(contains(&old, &new));
        assert!(!up_to_date(&stamped(new), &stamped(old)));
    }

    #[test]
    fn a_child_never_applied_by_the_controller_is_not_up_to_date() {
        let desired = stamped(json!({"metadata": {"name": "a"}}));
        assert!(!up_to_date(&desired, &json!({"metadata": {"name": "a"}})));
    }

    #[test]
    fn empty_collections_match_absent_keys_and_numbers_compare_by_value() {
        assert!(contains(
            &json!({"a": 1.0}),
            &json!({"a": 1, "b": {}, "c": []})
        ));
        assert!(!contains(&json!({}), &json!({"a": 0})));
    }

    #[test]
    fn ports_without_protocol_get_tcp_and_others_keep_theirs() {
        let mut v = json!({"spec": {
            "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}],
            "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8080}]}]}}
        }});
        fill_port_protocols(&mut v);
        assert_eq!(v["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(v["spec"]["ports"][1]["protocol"], "UDP");
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"],
            "TCP"
        );
    }

    #[test]
    fn hash_is_stable_and_depends_on_content() {
        let a = json!({"metadata": {"name": "a"}});
        assert_eq!(desired_hash(&a), desired_hash(&a.clone()));
        assert_ne!(
            desired_hash(&a),
            desired_hash(&json!({"metadata": {"name": "b"}}))
        );
        assert_eq!(desired_hash(&a).len(), 16);
    }
}
