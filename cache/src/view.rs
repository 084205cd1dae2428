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
use crate::object::object_key;

/// One object in a resource's served state, at one proxy resourceVersion.
///
/// Thousands are cached, and the resume log holds more: the key and the
/// labels share one allocation, and what few objects need (the second
/// EndpointSlice version, protobuf) is boxed on first use, so a view costs
/// its header (88 bytes) and two allocations: that text and its body.
#[derive(Debug)]
pub struct View {
    /// The key (`ns/name` or `name`), then the labels (see [`ViewLabels`]).
    text: Box<str>,
    /// Where the name starts in `text` (0: cluster-scoped).
    name_at: u32,
    /// Where the key ends and the labels start in `text`.
    labels_at: u32,
    /// `spec.unschedulable` (nodes' extra field selector).
    pub unschedulable: bool,
    /// The proxy resourceVersion this state was committed at.
    pub rv: u64,
    /// The body in the version the upstream serves (the cache's native version).
    body: Encoded,
    /// The other encodings, made on first use.
    lazy: OnceLock<Box<Lazy>>,
}

/// What a view encodes only when a client asks for it.
#[derive(Debug, Default)]
struct Lazy {
    /// The body in the other EndpointSlice version.
    other: OnceLock<Encoded>,
    /// The protobuf message per served API version (kept compressed, like
    /// the body).
    protobuf: [OnceLock<Packed>; 2],
}

impl View {
    /// Encodes `obj` (a full object of `kind` as JSON) at resourceVersion `rv`.
    pub fn new(kind: ResourceKind, obj: &Map<String, Value>, rv: u64) -> View {
        let meta = obj.get("metadata");
        let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
        let namespace = text("namespace").filter(|s| !s.is_empty());
        let name = text("name").unwrap_or_default();
        let mut key = object_key(namespace, name);
        let key_len = key.len();
        write_labels(meta.and_then(|m| m.get("labels")), &mut key);
        let unschedulable = obj
            .get("spec")
            .and_then(|s| s.get("unschedulable"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        // Names are at most 253 bytes, namespaces 63, labels a few KiB: the
        // offsets fit.
        let at = |i: usize| u32::try_from(i).unwrap_or(0);
        View {
            name_at: at(key_len - name.len()),
            labels_at: at(key_len),
            text: key.into_boxed_str(),
            unschedulable,
            rv,
            body: encode_body(kind, obj, rv),
            lazy: OnceLock::new(),
        }
    }

    /// The same object at another resourceVersion (a DELETED event's copy).
    pub fn with_rv(&self, rv: u64) -> View {
        View {
            text: self.text.clone(),
            name_at: self.name_at,
            labels_at: self.labels_at,
            unschedulable: self.unschedulable,
            rv,
            body: self.body.with_rv(rv),
            lazy: OnceLock::new(),
        }
    }

    fn lazy(&self) -> &Lazy {
        self.lazy.get_or_init(Box::default)
    }

    /// `metadata.labels`, for label selectors.
    pub fn labels(&self) -> ViewLabels<'_> {
        ViewLabels(self.text.get(self.labels_at as usize..).unwrap_or_default())
    }

    /// `ns/name` or `name`: the store key, in kube-apiserver's list order.
    pub fn key(&self) -> &str {
        self.text.get(..self.labels_at as usize).unwrap_or_default()
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        self.key().get(self.name_at as usize..).unwrap_or_default()
    }

    /// The object's namespace (None for cluster-scoped kinds).
    pub fn namespace(&self) -> Option<&str> {
        let slash = (self.name_at as usize).checked_sub(1)?;
        self.key().get(..slash)
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
        self.lazy().other.get_or_init(|| {
            let mut value = self.body.to_value();
            version.convert_slice(&mut value);
            match value {
                Value::Object(map) => encode_body(ResourceKind::EndpointSlices, &map, self.rv),
                _ => self.body.clone(),
            }
        })
    }

    /// The protobuf message of this state as `served` (its JSON body in
    /// `native`'s terms converted once, then shared by every client).
    pub fn message(&self, served: Served, native: ApiVersion) -> Result<Bytes, EncodeError> {
        let slot = &self.lazy().protobuf[served.version.index()];
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

/// An object's labels, as a view keeps them after its key:
/// `key\0value\0key\0value`, sorted by key, a [well-known](WORDS) key or
/// value written as one byte. A `BTreeMap` would cost a ~500-byte node even
/// for one label, and boxed strings two allocations per label, on every
/// cached object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewLabels<'a>(&'a str);

/// Label keys and values that most objects of the cached kinds carry, each
/// kept as one control byte (its index + 1), which no label holds: the API
/// server accepts only `[-A-Za-z0-9_./]` in them. Every EndpointSlice has
/// the first two keys and the first value; with them, its labels take 11
/// bytes rather than 101.
const WORDS: [&str; 31] = [
    "endpointslice.kubernetes.io/managed-by",
    "kubernetes.io/service-name",
    "endpointslice-controller.k8s.io",
    "endpointslicemirroring-controller.k8s.io",
    "service.kubernetes.io/headless",
    "service.kubernetes.io/service-proxy-name",
    "superedge.io/grid-selector",
    "superedge.io/grid-uniq-key",
    "superedge.io/grid-ns",
    "location",
    "app",
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "k8s-app",
    "component",
    "provider",
    "kubernetes",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "linux",
    "amd64",
    "arm64",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// `word`'s one-byte form, if it is well known.
fn short(word: &str) -> Option<char> {
    let at = WORDS.iter().position(|w| *w == word)?;
    char::from_u32(at as u32 + 1)
}

/// A key or value as kept: a well-known one's byte read back.
fn long(part: &str) -> &str {
    match part.as_bytes() {
        [b] if (1..=WORDS.len() as u8).contains(b) => WORDS[(*b - 1) as usize],
        _ => part,
    }
}

/// Appends `metadata.labels` to `out` in [`ViewLabels`]' form (string values
/// only; a label holding a control character, which the API server never
/// accepts, is left out).
fn write_labels(labels: Option<&Value>, out: &mut String) {
    let clean = |s: &str| !s.bytes().any(|b| b < 0x20);
    // Each key and value with its one-byte form, if it has one (found once).
    fn word(s: &str) -> (&str, Option<char>) {
        (s, short(s))
    }
    let mut pairs: Vec<[(&str, Option<char>); 2]> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .filter(|(k, v)| clean(k) && clean(v))
        .map(|(k, v)| [word(k), word(v)])
        .collect();
    // Keys are unique: by key is by label.
    pairs.sort_by(|a, b| a[0].0.cmp(b[0].0));
    let len = |(s, c): &(&str, Option<char>)| c.map_or(s.len(), char::len_utf8);
    out.reserve_exact(pairs.iter().map(|[k, v]| len(k) + len(v) + 2).sum());
    for (i, pair) in pairs.iter().enumerate() {
        for (j, (s, c)) in pair.iter().enumerate() {
            if i + j > 0 {
                out.push('\0');
            }
            match c {
                Some(c) => out.push(*c),
                None => out.push_str(s),
            }
        }
    }
}

impl<'a> ViewLabels<'a> {
    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let text = self.0;
        let mut parts = text.split('\0').filter(|_| !text.is_empty()).map(long);
        std::iter::from_fn(move || Some((parts.next()?, parts.next()?)))
    }
}

impl sitegrid_apimachinery::selector::Labels for ViewLabels<'_> {
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
        let view = |labels: Value| {
            View::new(
                ResourceKind::Services,
                json!({"metadata": {"name": "web", "namespace": "ns", "labels": labels}})
                    .as_object()
                    .unwrap(),
                1,
            )
        };
        let with = view(json!({"b": "2", "a": "", "n": 3, "c/d": "x"}));
        let labels = with.labels();
        assert_eq!(with.key(), "ns/web", "the labels follow the key");
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
        assert_eq!(view(Value::Null).labels().iter().count(), 0);
        let odd = view(json!({"k\0": "v", "ok": "v\0", "t": "a\tb", "\u{1}": "v", "x": "y"}));
        assert_eq!(odd.labels().iter().collect::<Vec<_>>(), [("x", "y")]);
        assert_eq!(odd.key(), "ns/web");
    }

    #[test]
    fn well_known_labels_read_back_as_they_were() {
        let labels = json!({
            "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            "app": "location",
            "location-x": "app",
            "x": "linux-amd64",
        });
        let view = View::new(
            ResourceKind::EndpointSlices,
            json!({"metadata": {"name": "web-1", "namespace": "ns", "labels": labels}})
                .as_object()
                .unwrap(),
            1,
        );
        let mut expected: Vec<(&str, &str)> = labels
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
            .collect();
        expected.sort();
        assert_eq!(view.labels().iter().collect::<Vec<_>>(), expected);
        let found = view.labels();
        assert_eq!(found.get("kubernetes.io/service-name"), Some("web"));
        assert_eq!(found.get("app"), Some("location"));
        assert_eq!(found.get("location"), None, "a value is not a key");
        assert_eq!(view.key(), "ns/web-1");
        let written_out: usize = expected.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        let kept = view.text.len() - view.key().len();
        assert!(
            kept < written_out / 2,
            "the well-known words take a byte each: {kept} of {written_out} bytes, {:?}",
            view.text
        );
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
