//! A cached object as served: encoded once, plus what selectors need.

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Map, Value};
use sitegrid_apimachinery::protobuf::{self, EncodeError};

use super::{
    encode::{
        encode_body,
        packed::{Packed, Shelf},
        Encoded, Wire,
    },
    kind::{ApiVersion, ResourceKind, Served},
};
use crate::upstream::object_key;

/// One object in a resource's served state, at one proxy resourceVersion.
///
/// Thousands are cached, and the resume log holds more: its fields are kept
/// to one allocation each (the key with the name inside it, the labels in
/// one string; the second EndpointSlice version boxed, as most objects never
/// need it).
#[derive(Debug)]
pub struct View {
    /// `ns/name` or `name`: the store key, in kube-apiserver's list order.
    key: Box<str>,
    /// Where the name starts in `key` (0: cluster-scoped).
    name_at: u32,
    /// `metadata.labels`, for label selectors.
    pub labels: ViewLabels,
    /// `spec.unschedulable` (nodes' extra field selector).
    pub unschedulable: bool,
    /// The proxy resourceVersion this state was committed at.
    pub rv: u64,
    /// The body in the version the upstream serves (the cache's native version).
    body: Encoded,
    /// The body in the other EndpointSlice version, converted on first use.
    other: OnceLock<Box<Encoded>>,
    /// The protobuf message per served API version, encoded on first use
    /// (kept compressed, like the body).
    protobuf: [OnceLock<Packed>; 2],
}

impl View {
    /// Encodes `obj` (a full object of `kind` as JSON) at resourceVersion `rv`.
    pub fn new(kind: ResourceKind, obj: &Map<String, Value>, rv: u64) -> View {
        let meta = obj.get("metadata");
        let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
        let namespace = text("namespace").filter(|s| !s.is_empty());
        let name = text("name").unwrap_or_default();
        let key = object_key(namespace, name);
        let labels = ViewLabels::from_json(meta.and_then(|m| m.get("labels")));
        let unschedulable = obj
            .get("spec")
            .and_then(|s| s.get("unschedulable"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        View {
            // Names are at most 253 bytes, namespaces 63: the offset fits.
            name_at: u32::try_from(key.len() - name.len()).unwrap_or(0),
            key: key.into_boxed_str(),
            labels,
            unschedulable,
            rv,
            body: encode_body(kind, obj, rv),
            other: OnceLock::new(),
            protobuf: Default::default(),
        }
    }

    /// The same object at another resourceVersion (a DELETED event's copy).
    pub fn with_rv(&self, rv: u64) -> View {
        View {
            key: self.key.clone(),
            name_at: self.name_at,
            labels: self.labels.clone(),
            unschedulable: self.unschedulable,
            rv,
            body: self.body.with_rv(rv),
            other: OnceLock::new(),
            protobuf: Default::default(),
        }
    }

    /// `ns/name` or `name`: the store key, in kube-apiserver's list order.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        self.key.get(self.name_at as usize..).unwrap_or_default()
    }

    /// The object's namespace (None for cluster-scoped kinds).
    pub fn namespace(&self) -> Option<&str> {
        let slash = (self.name_at as usize).checked_sub(1)?;
        self.key.get(..slash)
    }

    /// Whether the content (everything but the resourceVersion) equals `other`'s.
    pub fn same_content(&self, other: &View) -> bool {
        self.body.same_content(&other.body)
    }

    /// The body in `version`, for a view stored in `native`: the stored
    /// encoding, or the EndpointSlice conversion to the other version,
    /// computed once and shared (only slices are served in two versions).
    pub fn body(&self, version: ApiVersion, native: ApiVersion) -> &Encoded {
        if version == native {
            return &self.body;
        }
        self.other.get_or_init(|| {
            let mut value = self.body.to_value();
            version.convert_slice(&mut value);
            Box::new(match value {
                Value::Object(map) => encode_body(ResourceKind::EndpointSlices, &map, self.rv),
                _ => self.body.clone(),
            })
        })
    }

    /// The protobuf message of this state as `served` (its JSON body in
    /// `native`'s terms converted once, then shared by every client).
    pub fn message(&self, served: Served, native: ApiVersion) -> Result<Bytes, EncodeError> {
        let slot = &self.protobuf[served.version.index()];
        if let Some(packed) = slot.get() {
            return Ok(packed.unpack());
        }
        let body = self.body(served.version, native).bytes();
        let encoded = protobuf::message(served.message(), &body)?;
        // A racing encoder may have won: both encodings are equal.
        slot.get_or_init(|| Packed::pack(Shelf::of(served.kind, Wire::Protobuf), &encoded));
        Ok(Bytes::from(encoded))
    }

    /// Its JSON body in the native version, with its resourceVersion.
    pub fn native_body(&self) -> Bytes {
        self.body.bytes()
    }

    /// Its JSON body in the native version, parsed.
    pub fn native_body_value(&self) -> Value {
        self.body.to_value()
    }

    /// The size of its JSON body in the native version.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// A field for field selectors, as kube-apiserver exposes it.
    pub fn field(&self, field: &str) -> Option<String> {
        match field {
            "metadata.name" => Some(self.name().to_owned()),
            "metadata.namespace" => Some(self.namespace().unwrap_or_default().to_owned()),
            "spec.unschedulable" => Some(self.unschedulable.to_string()),
            _ => None,
        }
    }
}

/// An object's labels in one allocation: `key\0value\0key\0value`, sorted
/// by key. A `BTreeMap` would cost a ~500-byte node even for one label, and
/// boxed strings two allocations per label, on every cached object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewLabels(Box<str>);

impl ViewLabels {
    /// Reads `metadata.labels` (string values only; a label holding a NUL,
    /// which the API server never accepts, is left out).
    pub fn from_json(labels: Option<&Value>) -> ViewLabels {
        let mut pairs: Vec<(&str, &str)> = labels
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
            .filter(|(k, v)| !k.contains('\0') && !v.contains('\0'))
            .collect();
        pairs.sort();
        let mut joined =
            String::with_capacity(pairs.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i > 0 {
                joined.push('\0');
            }
            joined.push_str(k);
            joined.push('\0');
            joined.push_str(v);
        }
        ViewLabels(joined.into_boxed_str())
    }

    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut parts = self.0.split('\0').filter(|_| !self.0.is_empty());
        std::iter::from_fn(move || Some((parts.next()?, parts.next()?)))
    }
}

impl sitegrid_apimachinery::selector::Labels for ViewLabels {
    fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sitegrid_apimachinery::selector::Labels;

    use super::*;

    #[test]
    fn labels_are_read_back_sorted_and_found_by_key() {
        let labels = ViewLabels::from_json(Some(&json!({"b": "2", "a": "", "n": 3, "c/d": "x"})));
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [("a", ""), ("b", "2"), ("c/d", "x")]
        );
        assert_eq!(
            (labels.get("a"), labels.get("b"), labels.get("c/d")),
            (Some(""), Some("2"), Some("x"))
        );
        assert_eq!(
            (labels.get("n"), labels.get("z"), labels.get("2")),
            (None, None, None)
        );
        assert_eq!(ViewLabels::from_json(None).iter().count(), 0);
        let odd = ViewLabels::from_json(Some(&json!({"k\0": "v", "ok": "v\0", "x": "y"})));
        assert_eq!(odd.iter().collect::<Vec<_>>(), [("x", "y")]);
    }

    #[test]
    fn name_and_namespace_come_from_the_key() {
        let obj = |v: Value| View::new(ResourceKind::Services, v.as_object().unwrap(), 1);
        let namespaced = obj(json!({"metadata": {"name": "web", "namespace": "default"}}));
        assert_eq!(
            (namespaced.key(), namespaced.name(), namespaced.namespace()),
            ("default/web", "web", Some("default"))
        );
        let cluster = obj(json!({"metadata": {"name": "node-1", "namespace": ""}}));
        assert_eq!(
            (cluster.key(), cluster.name(), cluster.namespace()),
            ("node-1", "node-1", None)
        );
        let nameless = obj(json!({"metadata": {}}));
        assert_eq!(
            (nameless.key(), nameless.name(), nameless.namespace()),
            ("", "", None)
        );
    }
}
