//! The object type the upstream reflectors decode into: the object as the
//! API server sent it (its raw JSON, or read from protobuf: the value
//! decoded once, with the protobuf it came in), plus the parsed metadata
//! kube-runtime's watcher needs.

use std::{borrow::Cow, collections::BTreeMap, sync::Arc};

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    core::{ApiResource, DynamicResourceScope},
    Resource,
};
use serde::{Deserialize, Deserializer};
use serde_json::{value::RawValue, Value};
use sitegrid_apimachinery::protobuf::{
    self,
    to_json::{Decoded, SliceMessage},
};

/// One object as received from the API server.
///
/// Its body is kept as it came ([`UpstreamBody`]): JSON verbatim (compact, in the
/// server's key order), or, read from protobuf, the value decoded once (an
/// EndpointSlice as its message); the
/// projector derives views from it. Only the metadata the proxy reads is
/// parsed up front (name, namespace, resourceVersion, labels,
/// annotations): the watcher tracks resourceVersions through it.
///
/// Any JSON value decodes: one whose metadata is not `ObjectMeta` (a label
/// value that is a number, say) still yields its name, namespace and
/// resourceVersion where those are strings, and says why it is [`invalid`],
/// so that one bad object neither fails the whole list it came in nor stops
/// the watch from moving past it; the writer skips it.
///
/// [`invalid`]: UpstreamObject::invalid
#[derive(Clone, Debug)]
pub struct UpstreamObject {
    /// Parsed metadata (name, namespace, resourceVersion, ...).
    pub metadata: ObjectMeta,
    /// The whole object.
    pub body: UpstreamBody,
    /// Why the metadata did not decode, if it did not (then `metadata` holds
    /// only what could be read of name, namespace and resourceVersion).
    pub invalid: Option<Arc<str>>,
}

/// An upstream object's content.
#[derive(Clone, Debug)]
pub enum UpstreamBody {
    /// JSON text as the API server sent it.
    Json(Arc<RawValue>),
    /// Read from protobuf: the JSON value kube-apiserver would have sent,
    /// decoded once from the message (a carried object, see
    /// `sitegrid_apimachinery::protobuf::to_json`). Complete and of its
    /// kind's types by construction: every field has a place in the typed
    /// message it came from.
    Protobuf {
        /// The object as JSON.
        value: Arc<Value>,
        /// The object as the API server sent it (`k8s\0` and its
        /// envelope), while `value` is what it reads as: what the writer
        /// keeps of the object, half the size of its JSON and not written
        /// out again (`to_json::object_value` reads it back). None for a
        /// list's Service (kept as text) and once `value` was changed (an
        /// EndpointSlice converted to the snapshot's version).
        wire: Option<Bytes>,
    },
    /// `Protobuf`'s value, read as a list's Service and kept as its JSON
    /// text until it is used: a list is read a page at a time and mostly
    /// stored, and a page's decoded values would take several times the
    /// memory.
    ProtobufText(Arc<RawValue>),
    /// An EndpointSlice read from a protobuf watch event, its endpoints not
    /// yet written as JSON: the writer writes only those its views keep
    /// (see `SliceMessage`).
    ProtobufSlice {
        /// The slice, read.
        message: Arc<SliceMessage>,
        /// The object as the API server sent it, as in `Protobuf`.
        wire: Bytes,
    },
    /// A list's Endpoints or EndpointSlice read from protobuf: only the
    /// bytes it came in (`k8s\0` and its envelope), which the writer keeps,
    /// read again where it is used. Checked complete and its metadata taken
    /// when it was read; a list is read a page at a time and mostly stored,
    /// and a page of decoded messages (an allocation per endpoint's field)
    /// would take several times the memory.
    ProtobufListed(Bytes),
    /// A carried object that does not decode completely: fields this build
    /// does not know (a newer API server's), or broken bytes. The reflector
    /// reads its resource in JSON instead; `invalid` says why.
    UnreadableProtobuf,
}

impl UpstreamObject {
    /// Builds an object from JSON text (tests and the relist path use this).
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// `namespace/name`, or `name` for cluster-scoped objects: the store key,
    /// which orders objects the way kube-apiserver's etcd keys do.
    pub fn key(&self) -> String {
        object_key(
            self.metadata.namespace.as_deref(),
            self.metadata.name.as_deref().unwrap_or(""),
        )
    }

    /// The upstream resourceVersion ("" if missing).
    pub fn upstream_rv(&self) -> &str {
        self.metadata.resource_version.as_deref().unwrap_or("")
    }

    /// The object as JSON text (see [`UpstreamBody::json`]).
    pub fn json(&self) -> Cow<'_, str> {
        self.body.json()
    }

    /// The object as a JSON value (see [`UpstreamBody::value`]).
    pub fn value(&self) -> Result<Value, serde_json::Error> {
        self.body.value()
    }
}

impl UpstreamBody {
    /// The object as JSON text (written out if it was decoded; `null` if it
    /// could not be read).
    pub fn json(&self) -> Cow<'_, str> {
        match self {
            UpstreamBody::Json(raw) | UpstreamBody::ProtobufText(raw) => Cow::Borrowed(raw.get()),
            UpstreamBody::Protobuf { value, .. } => Cow::Owned(value.to_string()),
            UpstreamBody::ProtobufSlice { message, .. } => {
                Cow::Owned(SliceMessage::clone(message).into_value().to_string())
            }
            UpstreamBody::ProtobufListed(wire) => Cow::Owned(listed_value(wire).to_string()),
            UpstreamBody::UnreadableProtobuf => Cow::Borrowed("null"),
        }
    }

    /// The object as a JSON value: parsed from its text, or the one decoded
    /// from protobuf.
    pub fn value(&self) -> Result<Value, serde_json::Error> {
        match self {
            UpstreamBody::Json(raw) | UpstreamBody::ProtobufText(raw) => {
                serde_json::from_str(raw.get())
            }
            UpstreamBody::Protobuf { value, .. } => Ok(Value::clone(value)),
            UpstreamBody::ProtobufSlice { message, .. } => {
                Ok(SliceMessage::clone(message).into_value())
            }
            UpstreamBody::ProtobufListed(wire) => Ok(listed_value(wire)),
            UpstreamBody::UnreadableProtobuf => Ok(Value::Null),
        }
    }

    /// The object as the API server sent it in protobuf (`k8s\0` and its
    /// envelope), where it is kept: an Endpoints or EndpointSlice, listed
    /// or watched, or a watch event's Service; not once converted.
    pub fn wire(&self) -> Option<&Bytes> {
        match self {
            UpstreamBody::Protobuf { wire, .. } => wire.as_ref(),
            UpstreamBody::ProtobufSlice { wire, .. } | UpstreamBody::ProtobufListed(wire) => {
                Some(wire)
            }
            _ => None,
        }
    }

    /// A decoded body as its text ([`UpstreamBody::ProtobufText`]), to be
    /// kept rather than used at once; any other as it is.
    pub fn into_text(self) -> UpstreamBody {
        match self {
            UpstreamBody::Protobuf { value, wire } => {
                match serde_json::value::to_raw_value(&*value) {
                    Ok(raw) => UpstreamBody::ProtobufText(raw.into()),
                    Err(_) => UpstreamBody::Protobuf { value, wire },
                }
            }
            UpstreamBody::ProtobufSlice { message, wire } => UpstreamBody::Protobuf {
                value: Arc::new(Arc::unwrap_or_clone(message).into_value()),
                wire: Some(wire),
            }
            .into_text(),
            other => other,
        }
    }
}

/// The store key for an object: `ns/name`, or `name` when cluster-scoped.
pub fn object_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

impl<'de> Deserialize<'de> for UpstreamObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct MetaOnly {
            #[serde(default)]
            metadata: Meta,
        }
        let raw: Box<RawValue> = Box::deserialize(deserializer)?;
        if let Some(decoded) = carried(raw.get()) {
            return Ok(from_protobuf(decoded));
        }
        let (metadata, invalid) = match serde_json::from_str::<MetaOnly>(raw.get()) {
            Ok(meta) => (meta.metadata.into(), None),
            Err(e) => (identity(raw.get()), Some(Arc::from(e.to_string()))),
        };
        Ok(UpstreamObject {
            metadata,
            body: UpstreamBody::Json(Arc::from(raw)),
            invalid,
        })
    }
}

/// A carried object decoded, if `json` is one: a JSON string beginning with
/// the prefix (base64 needs no escapes).
fn carried(json: &str) -> Option<protobuf::to_json::Carried> {
    let text = json.strip_prefix('"')?.strip_suffix('"')?;
    if text.contains('\\') {
        return None;
    }
    protobuf::to_json::carried_value(text)
}

/// A carried object, decoded: its metadata taken from the value; a list's
/// Service kept as text, a list's Endpoints or EndpointSlice as its bytes
/// alone, a watch event's object with its bytes.
fn from_protobuf(carried: protobuf::to_json::Carried) -> UpstreamObject {
    let protobuf::to_json::Carried {
        value,
        listed,
        wire,
    } = carried;
    let decoded = match value {
        Ok(decoded) => decoded,
        Err(e) => {
            return UpstreamObject {
                metadata: ObjectMeta::default(),
                body: UpstreamBody::UnreadableProtobuf,
                invalid: Some(Arc::from(e.to_string())),
            }
        }
    };
    let (metadata, kept_as_sent) = match &decoded {
        Decoded::Slice(message) => (meta_of(message.metadata()), true),
        Decoded::Value(v) => (
            v.get("metadata").map(meta_of).unwrap_or_default(),
            v.get("kind").and_then(Value::as_str) == Some("Endpoints"),
        ),
    };
    // The writer keeps an Endpoints or EndpointSlice as the bytes it came
    // in, half the size of its JSON, whether listed or watched: a list's is
    // handed on as those bytes alone. A list's Service is kept as text
    // until its view is made: its bytes are of no further use and go
    // first, so as not to leave a gap among the page's kept texts.
    let body = match (listed, decoded) {
        (true, _) if kept_as_sent => UpstreamBody::ProtobufListed(wire),
        (true, decoded) => {
            drop(wire);
            UpstreamBody::Protobuf {
                value: Arc::new(decoded.into_value()),
                wire: None,
            }
            .into_text()
        }
        (false, Decoded::Slice(message)) => UpstreamBody::ProtobufSlice {
            message: Arc::new(message),
            wire,
        },
        (false, decoded) => UpstreamBody::Protobuf {
            value: Arc::new(decoded.into_value()),
            wire: Some(wire),
        },
    };
    UpstreamObject {
        metadata,
        body,
        invalid: None,
    }
}

/// A listed object's bytes read again: checked complete when they were
/// first read, so they decode (`null` if they somehow did not).
fn listed_value(wire: &[u8]) -> Value {
    protobuf::to_json::object_value(wire).unwrap_or(Value::Null)
}

/// The metadata the proxy reads, from a decoded object's (whose types are
/// right: it was written from a typed message).
fn meta_of(m: &Value) -> ObjectMeta {
    let text = |field: &str| m.get(field).and_then(Value::as_str).map(str::to_owned);
    let map = |field: &str| {
        m.get(field).and_then(Value::as_object).map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
    };
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        resource_version: text("resourceVersion"),
        labels: map("labels"),
        annotations: map("annotations"),
        ..ObjectMeta::default()
    }
}

/// The metadata the proxy reads (the watcher, the store keys, the node
/// membership, the topology): the rest is skipped unparsed, managedFields
/// above all, which is most of a real object's metadata. The writer reads
/// each object whole with its typed struct anyway, so metadata of the
/// wrong type elsewhere is still caught (and skipped) there.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> ObjectMeta {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            resource_version: m.resource_version,
            labels: m.labels,
            annotations: m.annotations,
            ..ObjectMeta::default()
        }
    }
}

/// Name, namespace and resourceVersion of an object whose metadata does not
/// decode, as far as they are strings.
fn identity(json: &str) -> ObjectMeta {
    #[derive(Deserialize)]
    struct Loose {
        #[serde(default)]
        metadata: serde_json::Map<String, serde_json::Value>,
    }
    let Ok(loose) = serde_json::from_str::<Loose>(json) else {
        return ObjectMeta::default();
    };
    let text = |field: &str| {
        loose
            .metadata
            .get(field)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        resource_version: text("resourceVersion"),
        ..ObjectMeta::default()
    }
}

impl Resource for UpstreamObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_raw_json_and_parses_metadata() {
        let o = UpstreamObject::from_json(
            r#"{"metadata":{"name":"web","namespace":"default","resourceVersion":"347"},"subsets":[]}"#,
        )
        .unwrap();
        assert_eq!(o.key(), "default/web");
        assert_eq!(o.upstream_rv(), "347");
        assert!(o.json().contains("\"subsets\":[]"));
    }

    #[test]
    fn decodes_inside_watch_events_and_lists() {
        let ev: kube::core::WatchEvent<UpstreamObject> = serde_json::from_str(
            r#"{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","resourceVersion":"5"}}}"#,
        )
        .unwrap();
        match ev {
            kube::core::WatchEvent::Added(o) => assert_eq!(o.key(), "n1"),
            other => panic!("unexpected {other:?}"),
        }
        let list: kube::core::ObjectList<UpstreamObject> = serde_json::from_str(
            r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a","resourceVersion":"1"}}]}"#,
        )
        .unwrap();
        assert_eq!(list.items[0].key(), "a");
    }

    #[test]
    fn metadata_of_the_wrong_type_is_flagged_not_refused() {
        let list: kube::core::ObjectList<UpstreamObject> = serde_json::from_str(
            r#"{"metadata":{"resourceVersion":"9"},"items":[
                {"metadata":{"name":"bad","namespace":"ns","resourceVersion":"3","labels":{"app":5}}},
                5,
                {"metadata":{"name":"good","resourceVersion":"4"}}]}"#,
        )
        .unwrap();
        let [bad, five, good] = &list.items[..] else {
            panic!("{list:?}")
        };
        assert_eq!((bad.key(), bad.upstream_rv()), ("ns/bad".to_owned(), "3"));
        assert!(bad.invalid.as_deref().unwrap().contains("invalid type"));
        assert!(five.invalid.is_some());
        assert_eq!(five.key(), "");
        assert!(good.invalid.is_none());
    }
}
