//! A cached object as served: encoded once, plus what selectors need.

use std::sync::OnceLock;

use bytes::Bytes;
use once_cell::race::OnceBox;
use serde_json::{Map, Value};
use sitegrid_apimachinery::protobuf::{self, EncodeError};

use super::{
    encode::{
        codec::{Codec, Family, LabelWords, Packed},
        encode_body, Encoded, Wire,
    },
    kind::{ApiVersion, ResourceKind, Served},
};
use crate::{meaning::Meaning, object::object_key};

/// One object in a resource's served state, at one proxy resourceVersion.
///
/// Thousands are cached, and the resume log holds more: the key and the
/// labels share one allocation, and what few objects need (the second
/// EndpointSlice version, protobuf) is boxed on first use, so a view costs
/// its header (88 bytes, of which 16 the digest of its meaning; 104 with the
/// reference counts of its `Arc`, which glibc serves from a 112-byte chunk,
/// where 8 bytes more would take a 128-byte one) and two allocations: that
/// text and its body.
#[derive(Debug)]
pub struct View {
    /// The key (`ns/name` or `name`), then the labels (see [`ViewLabels`]),
    /// then the kind's own selectable fields, written as the labels are.
    text: Box<str>,
    /// Where the key ends and the labels start in `text`.
    labels_at: u32,
    /// Where the labels end and the kind's own selectable fields start in
    /// `text` (see [`selectable`]).
    fields_at: u32,
    /// The proxy resourceVersion this state was committed at.
    pub rv: u64,
    /// The body in the version the upstream serves (the cache's native version).
    body: Encoded,
    /// What it means to its clients: the no-op rule compares it, not the body.
    meaning: Meaning,
    /// The other encodings, made on first use (one pointer, where
    /// `OnceLock<Box<_>>` takes two words).
    lazy: OnceBox<Lazy>,
}

// The header's size decides the chunk every cached view takes (above).
const _: () = assert!(std::mem::size_of::<View>() <= 88);

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
    /// Encodes `obj` (a full object of `kind` as JSON) at resourceVersion
    /// `rv`, with `codec` (the cache's: its views read back through it).
    pub fn new(codec: &Codec, kind: ResourceKind, obj: &Map<String, Value>, rv: u64) -> View {
        let meta = obj.get("metadata");
        let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
        let namespace = text("namespace").filter(|s| !s.is_empty());
        let name = text("name").unwrap_or_default();
        let mut key = object_key(namespace, name);
        let key_len = key.len();
        write_labels(codec.words(), meta.and_then(|m| m.get("labels")), &mut key);
        let labels_end = key.len();
        let fields = selectable(kind, obj);
        write_pairs(
            codec.words(),
            fields.iter().map(|(k, v)| [*k, v.as_str()]).collect(),
            &mut key,
        );
        // Names are at most 253 bytes, namespaces 63, labels a few KiB: the
        // offsets fit.
        let at = |i: usize| u32::try_from(i).unwrap_or(0);
        View {
            labels_at: at(key_len),
            fields_at: at(labels_end),
            text: key.into_boxed_str(),
            rv,
            body: encode_body(codec, kind, obj, rv),
            meaning: Meaning::of(kind, obj),
            lazy: OnceBox::new(),
        }
    }

    /// The same object at another resourceVersion (a DELETED event's copy).
    pub fn with_rv(&self, rv: u64) -> View {
        View {
            text: self.text.clone(),
            labels_at: self.labels_at,
            fields_at: self.fields_at,
            rv,
            body: self.body.with_rv(rv),
            meaning: self.meaning,
            lazy: OnceBox::new(),
        }
    }

    fn lazy(&self) -> &Lazy {
        // Racing first uses may each make one; one is kept, the others
        // dropped (both empty).
        self.lazy.get_or_init(Box::default)
    }

    /// `metadata.labels`, for label selectors, read through `codec` (the
    /// cache's that made this view).
    pub fn labels<'a>(&'a self, codec: &'a Codec) -> ViewLabels<'a> {
        ViewLabels {
            text: (self.text)
                .get(self.labels_at as usize..self.fields_at as usize)
                .unwrap_or_default(),
            words: codec.words(),
        }
    }

    /// `ns/name` or `name`: the store key, in kube-apiserver's list order.
    pub fn key(&self) -> &str {
        self.text.get(..self.labels_at as usize).unwrap_or_default()
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        let key = self.key();
        // Neither a namespace nor a name holds a `/` (kube-apiserver
        // refuses one in either): the key's one `/`, if any, ends the
        // namespace.
        key.split_once('/').map_or(key, |(_, name)| name)
    }

    /// The object's namespace (None for cluster-scoped kinds).
    pub fn namespace(&self) -> Option<&str> {
        self.key().split_once('/').map(|(namespace, _)| namespace)
    }

    /// What it means to its clients (`crate::meaning`): equal for two views
    /// of one object when a client has no use for the change between them.
    pub(crate) fn meaning(&self) -> Meaning {
        self.meaning
    }

    /// The body in `version`, for a view stored in `native`: the stored
    /// encoding, or the EndpointSlice conversion to the other version,
    /// computed once and shared (only slices are served in two versions).
    pub fn body(&self, codec: &Codec, version: ApiVersion, native: ApiVersion) -> &Encoded {
        if version == native {
            return &self.body;
        }
        self.lazy().other.get_or_init(|| {
            let mut value = self.body.to_value();
            version.convert_slice(&mut value);
            match value {
                Value::Object(map) => {
                    encode_body(codec, ResourceKind::EndpointSlices, &map, self.rv)
                }
                _ => self.body.clone(),
            }
        })
    }

    /// The protobuf message of this state as `served` (its JSON body in
    /// `native`'s terms converted once, then shared by every client).
    pub fn message(
        &self,
        codec: &Codec,
        served: Served,
        native: ApiVersion,
    ) -> Result<Bytes, EncodeError> {
        let (packed, fresh) = self.kept_message(codec, served, native)?;
        // The encoding just made is sent as it is, not unpacked again.
        Ok(fresh.map_or_else(|| packed.unpack(), Bytes::from))
    }

    /// The protobuf message of this state as `served`, as the view keeps it
    /// (encoded on first use, like [`View::message`]), for a reader that
    /// unpacks it where it wants it.
    pub fn packed_message(
        &self,
        codec: &Codec,
        served: Served,
        native: ApiVersion,
    ) -> Result<&Packed, EncodeError> {
        self.kept_message(codec, served, native)
            .map(|(packed, _)| packed)
    }

    /// The kept message, encoded from the JSON body and kept if this is its
    /// first use (the encoding then returned beside it).
    fn kept_message(
        &self,
        codec: &Codec,
        served: Served,
        native: ApiVersion,
    ) -> Result<(&Packed, Option<Vec<u8>>), EncodeError> {
        let slot = &self.lazy().protobuf[served.version.index()];
        if let Some(packed) = slot.get() {
            return Ok((packed, None));
        }
        let body = self.body(codec, served.version, native).bytes();
        let encoded = protobuf::message(served.message(), &body)?;
        // A racing encoder may have won: both encodings are equal.
        let packed =
            slot.get_or_init(|| codec.pack(Family::served(served.kind, Wire::Protobuf), &encoded));
        Ok((packed, Some(encoded)))
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

    /// A field for field selectors, as kube-apiserver exposes it (read
    /// through `codec`, the cache's that made this view).
    pub fn field<'a>(&'a self, codec: &'a Codec, field: &str) -> Option<&'a str> {
        match field {
            "metadata.name" => Some(self.name()),
            "metadata.namespace" => Some(self.namespace().unwrap_or_default()),
            _ => {
                let fields = ViewLabels {
                    text: self.text.get(self.fields_at as usize..).unwrap_or_default(),
                    words: codec.words(),
                };
                fields.iter().find(|(k, _)| *k == field).map(|(_, v)| v)
            }
        }
    }
}

/// An object's labels, as a view keeps them after its key:
/// `key\0value\0key\0value`, sorted by key, a key or value its cache writes
/// as one byte ([`LabelWords`]) written so. A `BTreeMap` would cost a
/// ~500-byte node even for one label, and boxed strings two allocations per
/// label, on every cached object.
#[derive(Debug, Clone, Copy)]
pub struct ViewLabels<'a> {
    text: &'a str,
    words: &'a LabelWords,
}

/// Appends `metadata.labels` to `out` in [`ViewLabels`]' form, with `words`'
/// one-byte forms (string values only).
fn write_labels(words: &LabelWords, labels: Option<&Value>, out: &mut String) {
    let pairs: Vec<[&str; 2]> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some([k.as_str(), v.as_str()?]))
        .collect();
    write_pairs(words, pairs, out);
}

/// The fields of an object of `kind` that field selectors may name besides
/// `metadata.name` and `metadata.namespace`, as kube-apiserver's field sets
/// give them (`ResourceKind::selectable_fields`).
fn selectable(kind: ResourceKind, obj: &Map<String, Value>) -> Vec<(&'static str, String)> {
    let spec = |k: &str| obj.get("spec").and_then(|s| s.get(k));
    let text = |k: &str| {
        spec(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match kind {
        ResourceKind::Nodes => {
            let unschedulable = spec("unschedulable").and_then(Value::as_bool);
            vec![(
                "spec.unschedulable",
                unschedulable.unwrap_or(false).to_string(),
            )]
        }
        ResourceKind::Services => vec![
            ("spec.clusterIP", text("clusterIP")),
            ("spec.type", text("type")),
        ],
        ResourceKind::Endpoints | ResourceKind::EndpointSlices | ResourceKind::ServiceCidrs => {
            Vec::new()
        }
    }
}

/// Appends `pairs` to `out` in [`ViewLabels`]' form, sorted by key, with
/// `words`' one-byte forms; a pair holding a control character, which the API
/// server never accepts in a label, is left out.
fn write_pairs(words: &LabelWords, mut pairs: Vec<[&str; 2]>, out: &mut String) {
    let clean = |s: &str| !s.bytes().any(|b| b < 0x20);
    pairs.retain(|[k, v]| clean(k) && clean(v));
    // Keys are unique: by key is by label.
    pairs.sort_by(|a, b| a[0].cmp(b[0]));
    // Each key and value with its one-byte form, if it has one (looked up once).
    let parts: Vec<(&str, Option<char>)> = pairs
        .iter()
        .flatten()
        .map(|s| (*s, words.short(s)))
        .collect();
    let len = |(s, c): &(&str, Option<char>)| c.map_or(s.len(), char::len_utf8);
    out.reserve_exact(parts.iter().map(|p| len(p) + 1).sum());
    for (i, (s, c)) in parts.iter().enumerate() {
        if i > 0 {
            out.push('\0');
        }
        match c {
            Some(c) => out.push(*c),
            None => out.push_str(s),
        }
    }
}

impl<'a> ViewLabels<'a> {
    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let (text, words) = (self.text, self.words);
        let mut parts = text
            .split('\0')
            .filter(|_| !text.is_empty())
            .map(|p| words.long(p));
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

    fn view(codec: &Codec, kind: ResourceKind, name: &str, labels: Value) -> View {
        View::new(
            codec,
            kind,
            json!({"metadata": {"name": name, "namespace": "ns", "labels": labels}})
                .as_object()
                .unwrap(),
            1,
        )
    }

    #[test]
    fn labels_are_read_back_sorted_and_found_by_key() {
        let codec = Codec::default();
        let with = view(
            &codec,
            ResourceKind::Services,
            "web",
            json!({"b": "2", "a": "", "n": 3, "c/d": "x"}),
        );
        let labels = with.labels(&codec);
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
        let none = view(&codec, ResourceKind::Services, "web", Value::Null);
        assert_eq!(none.labels(&codec).iter().count(), 0);
        let odd = view(
            &codec,
            ResourceKind::Services,
            "web",
            json!({"k\0": "v", "ok": "v\0", "t": "a\tb", "\u{1}": "v", "x": "y"}),
        );
        assert_eq!(odd.labels(&codec).iter().collect::<Vec<_>>(), [("x", "y")]);
        assert_eq!(odd.key(), "ns/web");
    }

    #[test]
    fn labels_many_objects_share_take_a_byte_each_and_read_back_as_they_were() {
        let codec = Codec::default();
        let labels = |i: usize| {
            json!({
                "kubernetes.io/service-name": format!("web-{i}"),
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                "location": "app",
                "app": "location",
            })
        };
        let views: Vec<View> = (0..20)
            .map(|i| {
                view(
                    &codec,
                    ResourceKind::EndpointSlices,
                    &format!("web-{i}-x"),
                    labels(i),
                )
            })
            .collect();
        for (i, v) in views.iter().enumerate() {
            let mut expected: Vec<(String, String)> = labels(i)
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            expected.sort();
            let got: Vec<(String, String)> = v
                .labels(&codec)
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            assert_eq!(got, expected, "view {i}");
        }
        let last = &views[19];
        let found = last.labels(&codec);
        assert_eq!(found.get("kubernetes.io/service-name"), Some("web-19"));
        assert_eq!(found.get("app"), Some("location"));
        assert_eq!(found.get("location"), Some("app"));
        assert_eq!(
            found.get("endpointslice-controller.k8s.io"),
            None,
            "a value is not a key"
        );
        // The words every slice shares are a byte each from the second slice
        // on; the name that is each one's own is written out.
        let kept = |v: &View| v.text.len() - v.key().len();
        let written_out: usize = labels(19)
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| k.len() + v.as_str().unwrap().len() + 2)
            .sum();
        assert!(
            kept(last) < written_out / 4,
            "{} of {written_out} bytes: {:?}",
            kept(last),
            last.text
        );
        assert!(
            kept(&views[0]) > 3 * kept(last),
            "the first one is written out, but for the words it repeats itself"
        );
    }

    #[test]
    fn name_and_namespace_come_from_the_key() {
        let codec = Codec::default();
        let obj = |v: Value| View::new(&codec, ResourceKind::Services, v.as_object().unwrap(), 1);
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
