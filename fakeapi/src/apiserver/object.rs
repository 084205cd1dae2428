//! A stored object: its JSON value without `kind`/`apiVersion` plus those
//! bytes encoded once, so lists, GETs and watch frames only copy slices.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Map, Value};
use sitegrid_apimachinery::duration::format_rfc3339;
pub(crate) use sitegrid_apimachinery::duration::now_rfc3339;
use sitegrid_apimachinery::protobuf::{self, Kind};
use sitegrid_apimachinery::Status;

use super::resource::ResourceType;

/// One object as stored at one resourceVersion. Immutable once built; shared
/// through `Arc` by the store, the event history and open watches.
#[derive(Debug)]
pub(crate) struct Obj {
    /// Storage key, the sort order of lists: `namespace/name`, or `name` for
    /// cluster-scoped types (etcd's order).
    pub key: String,
    /// `metadata.namespace`, empty for cluster-scoped types.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// The object without `kind` and `apiVersion`, `metadata` first.
    pub body: Map<String, Value>,
    /// `body` as compact JSON (how list items are sent).
    pub json: Bytes,
    /// `metadata` alone as compact JSON, made on first use (what
    /// `PartialObjectMetadata` carries) and then shared like `json`.
    meta_json: OnceLock<Bytes>,
    /// The object as its protobuf message (what a protobuf list carries as
    /// an item and an envelope wraps), made on first use and then shared;
    /// the error if its JSON does not read as the kind's type.
    message: OnceLock<Result<Bytes, String>>,
}

impl Obj {
    /// Build from a body whose metadata is already final.
    pub fn new(
        key: String,
        namespace: String,
        name: String,
        rv: u64,
        body: Map<String, Value>,
    ) -> Self {
        // Serializing a Map of Values cannot fail (all keys are strings).
        let json = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        Obj {
            key,
            namespace,
            name,
            rv,
            body,
            json,
            meta_json: OnceLock::new(),
            message: OnceLock::new(),
        }
    }

    /// The object as `kind`'s protobuf message (an object keeps its type:
    /// `kind` is its resource's), encoded once. An object whose JSON does
    /// not read as the type (one written through this server's loose
    /// validation) is a `500`, as kube-apiserver answers an object it
    /// cannot encode.
    pub fn message(&self, kind: Kind) -> Result<Bytes, Status> {
        self.message
            .get_or_init(|| {
                protobuf::message(kind, &self.json)
                    .map(Bytes::from)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|e| Status::internal_error(format!("{}: {e}", self.key)))
    }

    /// The object on the protobuf wire: its message in the envelope.
    pub fn envelope(&self, rt: &ResourceType, kind: Kind) -> Result<Bytes, Status> {
        Ok(protobuf::envelope(
            &rt.api_version,
            rt.kind,
            &self.message(kind)?,
        ))
    }

    /// `metadata` as compact JSON (`{}` if the body has none), encoded once.
    pub fn meta_json(&self) -> &Bytes {
        self.meta_json
            .get_or_init(|| match self.body.get("metadata") {
                // Serializing a Value cannot fail.
                Some(meta) => Bytes::from(serde_json::to_vec(meta).unwrap_or_default()),
                None => Bytes::from_static(b"{}"),
            })
    }

    /// `metadata.labels`, if any.
    pub fn labels(&self) -> Option<&Map<String, Value>> {
        self.body.get("metadata")?.get("labels")?.as_object()
    }

    /// The object with `kind` and `apiVersion` first, as JSON bytes.
    pub fn encode_typed(&self, rt: &ResourceType, out: &mut Vec<u8>) {
        encode_typed(rt.kind, &rt.api_version, &self.json, out);
    }

    /// The object with `kind` and `apiVersion`, as a value.
    pub fn to_typed_value(&self, rt: &ResourceType) -> Value {
        let mut m = Map::with_capacity(self.body.len() + 2);
        m.insert("kind".into(), Value::String(rt.kind.into()));
        m.insert("apiVersion".into(), Value::String(rt.api_version.clone()));
        for (k, v) in &self.body {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    /// A copy with `metadata.resourceVersion` set to `rv` (what a DELETED event carries).
    pub fn at_rv(&self, rv: u64) -> Obj {
        let mut body = self.body.clone();
        if let Some(Value::Object(meta)) = body.get_mut("metadata") {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        Obj::new(
            self.key.clone(),
            self.namespace.clone(),
            self.name.clone(),
            rv,
            body,
        )
    }
}

/// Write `{"kind":K,"apiVersion":V,<rest of json>` for a compact JSON object.
pub(crate) fn encode_typed(kind: &str, api_version: &str, json: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"kind\":");
    push_json_str(kind, out);
    out.extend_from_slice(b",\"apiVersion\":");
    push_json_str(api_version, out);
    if json.len() > 2 {
        out.push(b',');
        out.extend_from_slice(&json[1..]);
    } else {
        out.push(b'}');
    }
}

/// The annotation that marks the bookmark ending a watch-list's initial
/// events (apimachinery `metav1.InitialEventsAnnotationKey`).
pub(crate) const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// The `metadata` of a BOOKMARK's object at `rv`: `creationTimestamp: null`
/// where the release still writes an unset time as null, and the
/// initial-events-end annotation on the bookmark that ends a watch-list's
/// initial events.
pub(crate) fn bookmark_metadata(
    rv: u64,
    null_creation_timestamp: bool,
    initial_events_end: bool,
) -> String {
    let mut meta = format!("{{\"resourceVersion\":\"{rv}\"");
    if null_creation_timestamp {
        meta.push_str(",\"creationTimestamp\":null");
    }
    if initial_events_end {
        meta.push_str(",\"annotations\":{\"");
        meta.push_str(INITIAL_EVENTS_END);
        meta.push_str("\":\"true\"}");
    }
    meta.push('}');
    meta
}

/// Append `s` as a JSON string literal.
pub(crate) fn push_json_str(s: &str, out: &mut Vec<u8>) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s).ok();
}

/// ObjectMeta fields in the order kube-apiserver writes them.
const META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Put `metadata` first in the body and its fields in apiserver order; fields
/// this server does not know keep their relative order after the known ones.
pub(crate) fn canonicalize(mut body: Map<String, Value>) -> Map<String, Value> {
    body.shift_remove("kind");
    body.shift_remove("apiVersion");
    let mut meta = match body.shift_remove("metadata") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut ordered = Map::with_capacity(meta.len());
    for k in META_ORDER {
        if let Some(v) = meta.shift_remove(*k) {
            ordered.insert((*k).to_owned(), v);
        }
    }
    ordered.extend(meta);
    let mut out = Map::with_capacity(body.len() + 1);
    out.insert("metadata".into(), Value::Object(ordered));
    out.extend(body);
    out
}

/// `metadata` of a body as a mutable map, created if missing.
pub(crate) fn meta_mut(body: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let entry = body
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        // Just replaced by an object above.
        _ => unreachable!("metadata was just made an object"),
    }
}

/// A string field of `metadata`.
pub(crate) fn meta_str<'a>(body: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    body.get("metadata")?.get(field)?.as_str()
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn rfc3339(secs: u64) -> String {
    format_rfc3339(i64::try_from(secs).unwrap_or(i64::MAX))
}

/// A fresh pseudo-random 64-bit number (splitmix64 over time and a counter);
/// unique enough for uids and generated names, no crypto claims.
pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = nanos.wrapping_add(
        COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID string.
pub(crate) fn new_uid() -> String {
    uuid_from(random_u64(), random_u64())
}

/// A version-4-shaped UUID string made of `a` and `b`'s bits.
pub(crate) fn uuid_from(a: u64, b: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

/// Five characters for `generateName`, from the alphabet apiserver uses.
pub(crate) fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize];
            n /= ALPHABET.len() as u64;
            c as char
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_273_943), "2026-11-21T15:12:23Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn canonical_order_and_typed_encoding() {
        let v = json!({"spec":{"a":1},"apiVersion":"v1","kind":"Service",
            "metadata":{"labels":{"x":"y"},"resourceVersion":"3","name":"web","namespace":"default","extra":1}});
        let Value::Object(m) = v else { unreachable!() };
        let body = canonicalize(m);
        let obj = Obj::new(
            "default/web".into(),
            "default".into(),
            "web".into(),
            3,
            body,
        );
        assert_eq!(
            std::str::from_utf8(&obj.json).unwrap(),
            r#"{"metadata":{"name":"web","namespace":"default","resourceVersion":"3","labels":{"x":"y"},"extra":1},"spec":{"a":1}}"#
        );
        let mut out = Vec::new();
        encode_typed("Service", "v1", &obj.json, &mut out);
        let parsed: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(parsed["kind"], "Service");
        assert!(std::str::from_utf8(&out)
            .unwrap()
            .starts_with(r#"{"kind":"Service","apiVersion":"v1","metadata""#));
        let mut empty = Vec::new();
        encode_typed("X", "v1", b"{}", &mut empty);
        assert_eq!(empty, br#"{"kind":"X","apiVersion":"v1"}"#);
    }

    #[test]
    fn uids_differ() {
        let a = new_uid();
        assert_eq!(a.len(), 36);
        assert_ne!(a, new_uid());
        assert_eq!(name_suffix().len(), 5);
    }
}
