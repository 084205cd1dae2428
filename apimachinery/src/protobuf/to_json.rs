//! The other way: kube-apiserver's protobuf answers for Services, Endpoints
//! and EndpointSlices (`v1`, `v1beta1`), and `Status`, as the JSON it
//! would have sent for the same request. A client that lists and watches
//! in JSON can ask for protobuf, which is about half the bytes on the wire,
//! and read what it always read.
//!
//! Fields are written as Go's `encoding/json` writes them from the same Go
//! value, in its order: an `omitempty` field only when it is not empty, a
//! pointer when set, a struct always (`"creationTimestamp": null` for the
//! zero time), a list without `omitempty` as `null` when empty.
//!
//! **Completeness.** prost drops the fields a message does not know, which
//! are the fields of API versions newer than k8s-pb's (or older ones it no
//! longer has: 1.20's `spec.topologyKeys`). Rather than lose them silently,
//! every message is re-measured: re-encoded, prost writes the same bytes
//! for the fields it kept, but for two kinds of empty string that Go
//! writes and prost does not (a map entry's empty key or value, and the
//! empty `clusterName` of a 1.24 or older server), which are counted by
//! reading the bytes again for just those parts ([`Extras`]), with the
//! length prefixes of the parts that hold them (which prost, writing a part
//! shorter, may write a byte shorter): so a message written by
//! kube-apiserver or by another sitegrid proxy (prost) measures right. A message whose bytes are not all accounted for is
//! [`DecodeError::Incomplete`]: the caller reads that resource in JSON
//! instead.
//!
//! **Carried objects.** A client that keeps the objects it lists and
//! watches as `serde_json::Value`s (the proxy's cache) need not have them
//! written as JSON and parsed back: [`answer_carried`] and
//! [`watch_event_carried`] write a list or watch event whose objects are
//! JSON strings holding their protobuf ([`CARRIED_PREFIX`], or for a
//! list's items [`CARRIED_LISTED_PREFIX`], then the object in base64), and
//! [`carried_value`] turns such a string into the object's JSON value,
//! decoding it once, where the client builds its object. Its completeness
//! is checked there, so an incomplete object is found by that client, not
//! by the converter. The two prefixes let the client keep a list's items
//! (read by the page, and usually stored rather than used at once) apart
//! from a watch event's object, which it uses next. An EndpointSlice, listed
//! or watched, is read as its message ([`SliceMessage`]: a client that
//! keeps few of its endpoints writes only those).

use bytes::Bytes;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::discovery::{v1 as disc_v1, v1beta1 as disc_v1beta1};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
use prost::Message;
use serde_json::{Map, Value};

use super::MAGIC;

/// Why a protobuf answer could not be read as JSON.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not a Kubernetes protobuf object (no `k8s\0` magic).
    #[error("not a Kubernetes protobuf object")]
    NoMagic,
    /// The bytes do not decode as the message they claim to be.
    #[error("malformed protobuf: {0}")]
    Malformed(#[from] prost::DecodeError),
    /// A kind (or list kind) this reader does not convert.
    #[error("{api_version} {kind} is not a kind read from protobuf here")]
    UnknownKind {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
    },
    /// The message has fields k8s-pb's messages do not know.
    #[error("{0} has fields this build's protobuf messages have no place for ({1} bytes unread)")]
    Incomplete(String, usize),
    /// A carried object whose text is not base64.
    #[error("a carried object is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
}

/// How a carried object's JSON string begins (see the module doc).
pub const CARRIED_PREFIX: &str = "k8s-protobuf:";
/// How a carried list item's JSON string begins.
pub const CARRIED_LISTED_PREFIX: &str = "k8s-protobuf-listed:";

/// A whole protobuf answer as JSON, like [`answer`], but a list of
/// Services, Endpoints or EndpointSlices with its items carried: each a
/// string [`carried_value`] reads, made without decoding the item.
pub fn answer_carried(wire: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let (api_version, list_kind, raw) = envelope_parts(wire)?;
    let item_kind = match (api_version.as_str(), list_kind.as_str()) {
        ("v1", "ServiceList") => "Service",
        ("v1", "EndpointsList") => "Endpoints",
        ("discovery.k8s.io/v1" | "discovery.k8s.io/v1beta1", "EndpointSliceList") => {
            "EndpointSlice"
        }
        _ => {
            let value = typed_value(api_version, list_kind, &raw)?;
            return Ok(serde_json::to_vec(&value).unwrap_or_default());
        }
    };
    let list: RawList = read::<_, NoMaps>(&raw, &list_kind)?;
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(list_kind));
    out.insert("apiVersion".into(), Value::String(api_version.clone()));
    out.insert(
        "metadata".into(),
        obj(list_meta(list.metadata.unwrap_or_default())),
    );
    out.insert(
        "items".into(),
        Value::Array(
            list.items
                .iter()
                .map(|m| {
                    Value::String(carried(
                        CARRIED_LISTED_PREFIX,
                        &super::envelope(&api_version, item_kind, m),
                    ))
                })
                .collect(),
        ),
    );
    Ok(serde_json::to_vec(&Value::Object(out)).unwrap_or_default())
}

/// One event of a protobuf watch stream as its JSON line, like
/// [`watch_event`], but the object of an `ADDED`, `MODIFIED` or `DELETED`
/// event carried, not decoded here (a `BOOKMARK` or `ERROR` is converted):
/// appended to `out` (without its newline), which is left as it was if the
/// event does not read.
pub fn watch_event_carried(frame: Bytes, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    // The object's bytes are a slice of the frame, not a copy.
    let event = EventShim::decode(frame)?;
    let event_type = event.r#type.unwrap_or_default();
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    match event_type.as_str() {
        // Written straight into the line (the type is one of these words:
        // nothing to escape).
        t @ ("ADDED" | "MODIFIED" | "DELETED") => {
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(b"\",\"object\":\"");
            push_carried(out, CARRIED_PREFIX, &raw);
            out.extend_from_slice(b"\"}");
            Ok(())
        }
        _ => {
            out.extend_from_slice(&event_line(event_type, &raw)?);
            Ok(())
        }
    }
}

/// A `WatchEvent`, its object's bytes read as a slice of the frame.
#[derive(Clone, PartialEq, prost::Message)]
struct EventShim {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    object: Option<RawExtensionShim>,
}

/// A `RawExtension`: its bytes a slice of what was read.
#[derive(Clone, PartialEq, prost::Message)]
struct RawExtensionShim {
    #[prost(bytes = "bytes", optional, tag = "1")]
    raw: Option<Bytes>,
}

/// A `runtime.Unknown` (an object's envelope): its message's bytes a slice
/// of what was read, if that was [`Bytes`].
#[derive(Clone, PartialEq, prost::Message)]
struct UnknownShim {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    raw: Option<Bytes>,
    // Not used, but read as `Unknown` reads them (a string must be UTF-8).
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
    #[prost(string, optional, tag = "4")]
    content_type: Option<String>,
}

/// `wire` (an object: `k8s\0` + envelope) as a carried object's text.
fn carried(prefix: &str, wire: &[u8]) -> String {
    let mut text = Vec::new();
    push_carried(&mut text, prefix, wire);
    // The prefix and base64: ASCII.
    String::from_utf8(text).unwrap_or_default()
}

/// Appends `wire` as a carried object's text to `out`.
fn push_carried(out: &mut Vec<u8>, prefix: &str, wire: &[u8]) {
    use base64::Engine as _;
    out.reserve(prefix.len() + wire.len().div_ceil(3) * 4);
    out.extend_from_slice(prefix.as_bytes());
    let start = out.len();
    out.resize(start + wire.len().div_ceil(3) * 4, 0);
    let written = base64::engine::general_purpose::STANDARD
        .encode_slice(wire, &mut out[start..])
        .unwrap_or_default();
    out.truncate(start + written);
}

/// A carried object read: its JSON value (a Service, Endpoints or
/// EndpointSlice, with its `kind` and `apiVersion`, as kube-apiserver would
/// have written it; an EndpointSlice as its message, see [`object`]),
/// whether it was a list's item, and the bytes it was read from.
pub struct Carried {
    /// The object, or why it does not decode completely.
    pub value: Result<Decoded, DecodeError>,
    /// Carried as a list's item ([`CARRIED_LISTED_PREFIX`]).
    pub listed: bool,
    /// The object as the API server sent it (`k8s\0` and its envelope),
    /// which [`object_value`] reads as `value` again; empty if the text was
    /// not base64.
    pub wire: Bytes,
}

/// `text` read as a carried object; None if it is not one.
pub fn carried_value(text: &str) -> Option<Carried> {
    use base64::Engine as _;
    let (encoded, listed) = match text.strip_prefix(CARRIED_LISTED_PREFIX) {
        Some(encoded) => (encoded, true),
        None => (text.strip_prefix(CARRIED_PREFIX)?, false),
    };
    let (value, wire) = match base64::engine::general_purpose::STANDARD.decode(encoded) {
        Ok(wire) => {
            let wire = Bytes::from(wire);
            (object(wire.clone()), wire)
        }
        Err(e) => (Err(e.into()), Bytes::new()),
    };
    Some(Carried {
        value,
        listed,
        wire,
    })
}

/// A list as it is carried: its metadata, and its items' messages as they are.
#[derive(Clone, PartialEq, prost::Message)]
struct RawList {
    #[prost(message, optional, tag = "1")]
    metadata: Option<meta::ListMeta>,
    #[prost(bytes = "vec", repeated, tag = "2")]
    items: Vec<Vec<u8>>,
}

/// A whole protobuf answer (`k8s\0` + envelope: an object, a list, or a
/// `Status`) as JSON bytes.
pub fn answer(wire: &[u8]) -> Result<Vec<u8>, DecodeError> {
    Ok(serde_json::to_vec(&answer_value(wire)?).unwrap_or_default())
}

/// One event of a protobuf watch stream (the bytes after its 4-byte length)
/// as the JSON line a JSON watch sends (without its newline).
pub fn watch_event(frame: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let event = meta::WatchEvent::decode(frame)?;
    let raw = event.object.and_then(|o| o.raw).unwrap_or_default();
    event_line(event.r#type.unwrap_or_default(), &raw)
}

/// A watch event's JSON line with its object (`raw`) converted.
fn event_line(event_type: String, raw: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Map::new();
    out.insert("type".into(), Value::String(event_type));
    out.insert("object".into(), answer_value(raw)?);
    Ok(serde_json::to_vec(&Value::Object(out)).unwrap_or_default())
}

/// A Service, Endpoints or EndpointSlice (`k8s\0` + envelope) as JSON,
/// complete (see the module doc); anything else is
/// [`DecodeError::UnknownKind`].
pub fn object_value(wire: &[u8]) -> Result<Value, DecodeError> {
    let (api_version, kind, raw) = envelope_parts(wire)?;
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Service" | "Endpoints")
        | ("discovery.k8s.io/v1" | "discovery.k8s.io/v1beta1", "EndpointSlice") => {
            typed_value(api_version, kind, &raw)
        }
        _ => Err(DecodeError::UnknownKind { api_version, kind }),
    }
}

/// An object read from protobuf: its JSON value, or for an EndpointSlice
/// the message itself, its endpoints still to be written.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// The object as JSON.
    Value(Value),
    /// An EndpointSlice (v1 or v1beta1).
    Slice(SliceMessage),
}

impl Decoded {
    /// The object as JSON, whole.
    pub fn into_value(self) -> Value {
        match self {
            Decoded::Value(v) => v,
            Decoded::Slice(s) => s.into_value(),
        }
    }
}

/// An EndpointSlice read from protobuf (complete, see the module doc), its
/// endpoints not yet written as JSON: a reader that keeps some of them (a
/// node's proxy keeps its own site's, a few of a Service spread over many)
/// reads what it chooses by from the message ([`SliceMessage::endpoints`])
/// and writes only those it keeps ([`SliceMessage::into_value_keeping`]),
/// as they would read in the whole value.
#[derive(Debug, Clone)]
pub struct SliceMessage {
    /// `metadata` as JSON, written when the message was read (its labels
    /// are read at once).
    metadata: Value,
    /// Boxed: a message is large beside a value.
    slice: Box<SliceVersion>,
}

#[derive(Debug, Clone)]
enum SliceVersion {
    V1(disc_v1::EndpointSlice),
    V1beta1(disc_v1beta1::EndpointSlice),
}

/// What a filter reads of an endpoint, as it reads in the endpoint's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointFacts<'a> {
    /// Its node: `nodeName`, or (v1beta1) the `kubernetes.io/hostname`
    /// topology label.
    pub node: Option<&'a str>,
    /// `conditions.ready`, ready when unset (as the discovery API says).
    pub ready: bool,
    /// `targetRef.uid`, unless empty.
    pub pod_uid: Option<&'a str>,
}

impl SliceMessage {
    /// The object's `metadata`, as JSON.
    pub fn metadata(&self) -> &Value {
        &self.metadata
    }

    /// Each endpoint's facts, in order.
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointFacts<'_>> {
        let (v1, v1beta1): (&[disc_v1::Endpoint], &[disc_v1beta1::Endpoint]) = match &*self.slice {
            SliceVersion::V1(s) => (&s.endpoints, &[]),
            SliceVersion::V1beta1(s) => (&[], &s.endpoints),
        };
        v1.iter()
            .map(facts_v1)
            .chain(v1beta1.iter().map(facts_v1beta1))
    }

    /// The whole object as JSON: what [`object_value`] reads of its bytes.
    pub fn into_value(self) -> Value {
        self.into_value_keeping(|_| true)
    }

    /// The object as JSON with only the endpoints `keep` accepts (in order;
    /// a list emptied by it stays an empty list).
    pub fn into_value_keeping(self, mut keep: impl FnMut(&EndpointFacts<'_>) -> bool) -> Value {
        let (api_version, fields) = match *self.slice {
            SliceVersion::V1(s) => (
                "discovery.k8s.io/v1",
                slice_v1_parts(self.metadata, s, &mut keep),
            ),
            SliceVersion::V1beta1(s) => (
                "discovery.k8s.io/v1beta1",
                slice_v1beta1_parts(self.metadata, s, &mut keep),
            ),
        };
        let mut out = Map::with_capacity(2 + fields.len());
        out.insert("kind".into(), Value::String("EndpointSlice".into()));
        out.insert("apiVersion".into(), Value::String(api_version.into()));
        out.extend(fields);
        Value::Object(out)
    }
}

/// A Service, Endpoints or EndpointSlice (`k8s\0` + envelope), an
/// EndpointSlice as its message ([`SliceMessage`]), the others as JSON
/// ([`object_value`]).
pub fn object(wire: Bytes) -> Result<Decoded, DecodeError> {
    let (api_version, kind, raw) = envelope(wire)?;
    let k = kind.as_str();
    let slice = match (api_version.as_str(), k) {
        ("discovery.k8s.io/v1", "EndpointSlice") => message_v1(&raw, k)?,
        ("discovery.k8s.io/v1beta1", "EndpointSlice") => message_v1beta1(&raw, k)?,
        ("v1", "Service" | "Endpoints") => {
            return typed_value(api_version, kind, &raw).map(Decoded::Value)
        }
        _ => return Err(DecodeError::UnknownKind { api_version, kind }),
    };
    Ok(Decoded::Slice(slice))
}

/// The `apiVersion`, `kind` and message of an object on the wire (`k8s\0`
/// and its `runtime.Unknown` envelope).
pub fn envelope_parts(wire: &[u8]) -> Result<(String, String, Bytes), DecodeError> {
    envelope(wire)
}

/// [`envelope_parts`] of any bytes: the message is a slice of `wire` when
/// it is [`Bytes`], a copy when it is a slice.
fn envelope(mut wire: impl bytes::Buf) -> Result<(String, String, Bytes), DecodeError> {
    if !wire.chunk().starts_with(MAGIC) {
        return Err(DecodeError::NoMagic);
    }
    wire.advance(MAGIC.len());
    let unknown = UnknownShim::decode(wire)?;
    let TypeMeta { api_version, kind } = unknown.type_meta.unwrap_or_default();
    Ok((
        api_version.unwrap_or_default(),
        kind.unwrap_or_default(),
        unknown.raw.unwrap_or_default(),
    ))
}

fn answer_value(wire: &[u8]) -> Result<Value, DecodeError> {
    let (api_version, kind, raw) = envelope_parts(wire)?;
    typed_value(api_version, kind, &raw)
}

/// The message `raw` of `kind` as JSON, with its `kind` and `apiVersion`.
fn typed_value(api_version: String, kind: String, raw: &Bytes) -> Result<Value, DecodeError> {
    let k = kind.as_str();
    let fields = match (api_version.as_str(), k) {
        ("v1", "Service") => service(read::<_, ServiceShim>(raw, k)?),
        ("v1", "Endpoints") => endpoints(read::<_, EndpointsShim>(raw, k)?),
        ("discovery.k8s.io/v1", "EndpointSlice") => slice_v1(read::<_, SliceShim>(raw, k)?),
        ("discovery.k8s.io/v1beta1", "EndpointSlice") => {
            slice_v1beta1(read::<_, SliceShim>(raw, k)?)
        }
        ("v1", "Status") => status(read::<_, NoMaps>(raw, k)?),
        ("v1", "ServiceList") => {
            let l: core::ServiceList = read::<_, ServiceListShim>(raw, k)?;
            list(l.metadata, l.items, service)
        }
        ("v1", "EndpointsList") => {
            let l: core::EndpointsList = read::<_, EndpointsListShim>(raw, k)?;
            list(l.metadata, l.items, endpoints)
        }
        ("discovery.k8s.io/v1", "EndpointSliceList") => {
            let l: disc_v1::EndpointSliceList = read::<_, SliceListShim>(raw, k)?;
            list(l.metadata, l.items, slice_v1)
        }
        ("discovery.k8s.io/v1beta1", "EndpointSliceList") => {
            let l: disc_v1beta1::EndpointSliceList = read::<_, SliceListShim>(raw, k)?;
            list(l.metadata, l.items, slice_v1beta1)
        }
        _ => return Err(DecodeError::UnknownKind { api_version, kind }),
    };
    let mut out = Map::with_capacity(2 + fields.len());
    out.insert("kind".into(), Value::String(kind));
    out.insert("apiVersion".into(), Value::String(api_version));
    out.extend(fields);
    Ok(Value::Object(out))
}

/// Decodes `raw` as `kind`'s message `M`, complete (see the module doc):
/// what prost writes of it, plus what Go writes that prost does not (found
/// by reading `raw` again as `X`: `M`'s map entries and removed fields, with
/// their presence, and the lengths of the parts that hold them), must be
/// all of `raw`.
fn read<M: Message + Default, X: Extras>(raw: &Bytes, kind: &str) -> Result<M, DecodeError> {
    let m = M::decode(&raw[..])?;
    let kept = m.encoded_len();
    // Of a canonical encoding (Go's, prost's) prost writes no more than it
    // read (it only leaves empty strings out): when it already accounts for
    // all of it there is nothing of Go's to count, and the second reading
    // is saved. A crafted message whose over-long varints make up for
    // fields prost dropped passed the whole count before too.
    if kept == raw.len() {
        return Ok(m);
    }
    // Read from `Bytes`, the parts are slices of `raw`, not copies.
    let measured = kept + X::decode(raw.clone()).map_or(0, |x| x.shrink());
    if measured == raw.len() {
        Ok(m)
    } else {
        Err(DecodeError::Incomplete(
            kind.to_owned(),
            raw.len().abs_diff(measured),
        ))
    }
}

/// The parts of a message Go may write and prost would not: each is an
/// empty string written in 2 bytes (a key and a zero length). Go writes a
/// map entry's key and value even when empty, where prost leaves an empty
/// one out; a 1.24 or older server writes `ObjectMeta.clusterName` (field
/// 15, gone from the API in 1.25, so from k8s-pb) empty in every object.
/// Whether a message came from Go or from prost (another sitegrid proxy),
/// these count what it really holds. The parts that hold them (a map entry,
/// the metadata, an endpoint, a list's item) are read as their bytes: each
/// is prefixed with its length, which prost, writing it shorter, may write
/// in a byte fewer (127 and 128 take one byte and two).
trait Extras: Message + Default {
    /// How many bytes fewer prost writes of these bytes.
    fn shrink(&self) -> usize;
}

/// How many bytes fewer prost writes of a part that Go wrote as `part`
/// (read as `X`), the prefix of its length included.
fn part<X: Extras>(part: &Bytes) -> usize {
    let inner = X::decode(part.clone()).map_or(0, |x| x.shrink());
    let len = |n: usize| prost::encoding::encoded_len_varint(n as u64);
    inner + len(part.len()) - len(part.len().saturating_sub(inner))
}

fn parts<X: Extras>(parts: &[Bytes]) -> usize {
    parts.iter().map(part::<X>).sum()
}

fn optional<X: Extras>(p: &Option<Bytes>) -> usize {
    p.as_ref().map_or(0, part::<X>)
}

/// Two bytes for an empty string that was written.
fn written_empty(s: &Option<Bytes>) -> usize {
    2 * usize::from(s.as_ref().is_some_and(Bytes::is_empty))
}

/// A map entry, its key and value present only when written.
#[derive(Clone, PartialEq, prost::Message)]
struct EntryShim {
    #[prost(bytes = "bytes", optional, tag = "1")]
    key: Option<Bytes>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    value: Option<Bytes>,
}

impl Extras for EntryShim {
    fn shrink(&self) -> usize {
        written_empty(&self.key) + written_empty(&self.value)
    }
}

/// `ObjectMeta`: labels, annotations and the removed `clusterName`.
#[derive(Clone, PartialEq, prost::Message)]
struct MetaShim {
    #[prost(bytes = "bytes", repeated, tag = "11")]
    labels: Vec<Bytes>,
    #[prost(bytes = "bytes", repeated, tag = "12")]
    annotations: Vec<Bytes>,
    #[prost(bytes = "bytes", optional, tag = "15")]
    cluster_name: Option<Bytes>,
}

impl Extras for MetaShim {
    fn shrink(&self) -> usize {
        parts::<EntryShim>(&self.labels)
            + parts::<EntryShim>(&self.annotations)
            + written_empty(&self.cluster_name)
    }
}

/// `ServiceSpec`: its selector.
#[derive(Clone, PartialEq, prost::Message)]
struct SpecShim {
    #[prost(bytes = "bytes", repeated, tag = "2")]
    selector: Vec<Bytes>,
}

impl Extras for SpecShim {
    fn shrink(&self) -> usize {
        parts::<EntryShim>(&self.selector)
    }
}

#[derive(Clone, PartialEq, prost::Message)]
struct ServiceShim {
    #[prost(bytes = "bytes", optional, tag = "1")]
    metadata: Option<Bytes>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    spec: Option<Bytes>,
}

impl Extras for ServiceShim {
    fn shrink(&self) -> usize {
        optional::<MetaShim>(&self.metadata) + optional::<SpecShim>(&self.spec)
    }
}

#[derive(Clone, PartialEq, prost::Message)]
struct EndpointsShim {
    #[prost(bytes = "bytes", optional, tag = "1")]
    metadata: Option<Bytes>,
}

impl Extras for EndpointsShim {
    fn shrink(&self) -> usize {
        optional::<MetaShim>(&self.metadata)
    }
}

/// An EndpointSlice endpoint's topology map: `topology` in `v1beta1`,
/// `deprecatedTopology` in `v1`, field 5 in both.
#[derive(Clone, PartialEq, prost::Message)]
struct EndpointShim {
    #[prost(bytes = "bytes", repeated, tag = "5")]
    topology: Vec<Bytes>,
}

impl Extras for EndpointShim {
    fn shrink(&self) -> usize {
        parts::<EntryShim>(&self.topology)
    }
}

#[derive(Clone, PartialEq, prost::Message)]
struct SliceShim {
    #[prost(bytes = "bytes", optional, tag = "1")]
    metadata: Option<Bytes>,
    #[prost(bytes = "bytes", repeated, tag = "2")]
    endpoints: Vec<Bytes>,
}

impl Extras for SliceShim {
    fn shrink(&self) -> usize {
        optional::<MetaShim>(&self.metadata) + parts::<EndpointShim>(&self.endpoints)
    }
}

/// A list of `$item`s: its items are field 2.
macro_rules! list_shim {
    ($name:ident, $item:ty) => {
        #[derive(Clone, PartialEq, prost::Message)]
        struct $name {
            #[prost(bytes = "bytes", repeated, tag = "2")]
            items: Vec<Bytes>,
        }

        impl Extras for $name {
            fn shrink(&self) -> usize {
                parts::<$item>(&self.items)
            }
        }
    };
}

list_shim!(ServiceListShim, ServiceShim);
list_shim!(EndpointsListShim, EndpointsShim);
list_shim!(SliceListShim, SliceShim);

/// A message without maps (`Status`).
#[derive(Clone, PartialEq, prost::Message)]
struct NoMaps {}

impl Extras for NoMaps {
    fn shrink(&self) -> usize {
        0
    }
}

fn list<T>(
    metadata: Option<meta::ListMeta>,
    items: Vec<T>,
    item: fn(T) -> Map<String, Value>,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "metadata".into(),
        obj(list_meta(metadata.unwrap_or_default())),
    );
    out.insert(
        "items".into(),
        Value::Array(items.into_iter().map(|i| obj(item(i))).collect()),
    );
    out
}

fn obj(m: Map<String, Value>) -> Value {
    Value::Object(m)
}

/// Writes `v` under `k` unless it is empty (`omitempty` on a string).
fn put_str(m: &mut Map<String, Value>, k: &str, v: Option<String>) {
    if let Some(v) = v.filter(|v| !v.is_empty()) {
        m.insert(k.into(), Value::String(v));
    }
}

/// Writes a pointer field when set.
fn put_opt<T: Into<Value>>(m: &mut Map<String, Value>, k: &str, v: Option<T>) {
    if let Some(v) = v {
        m.insert(k.into(), v.into());
    }
}

/// Writes a number unless it is zero (`omitempty`).
fn put_num<T: Into<Value> + Default + PartialEq>(
    m: &mut Map<String, Value>,
    k: &str,
    v: Option<T>,
) {
    if let Some(v) = v.filter(|v| *v != T::default()) {
        m.insert(k.into(), v.into());
    }
}

/// Writes a list unless it is empty (`omitempty`).
fn put_list(m: &mut Map<String, Value>, k: &str, v: Vec<Value>) {
    if !v.is_empty() {
        m.insert(k.into(), Value::Array(v));
    }
}

fn strings(v: Vec<String>) -> Vec<Value> {
    v.into_iter().map(Value::String).collect()
}

/// Writes a string map unless it is empty (`omitempty`).
fn put_map(m: &mut Map<String, Value>, k: &str, v: std::collections::BTreeMap<String, String>) {
    if !v.is_empty() {
        m.insert(
            k.into(),
            Value::Object(v.into_iter().map(|(k, v)| (k, Value::String(v))).collect()),
        );
    }
}

/// A `metav1.Time` as Go writes it: RFC 3339 in UTC, whole seconds; the
/// zero time (or none) as `null`.
fn time(t: Option<meta::Time>) -> Value {
    let secs = t.as_ref().and_then(|t| t.seconds).unwrap_or_default();
    // Go's zero time is year 1; seconds before 1970 never occur in the API.
    if secs <= 0 {
        return Value::Null;
    }
    match jiff::Timestamp::from_second(secs) {
        Ok(ts) => Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        Err(_) => Value::Null,
    }
}

fn object_meta(m: Option<meta::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = Map::with_capacity(16);
    put_str(&mut out, "name", m.name);
    put_str(&mut out, "generateName", m.generate_name);
    put_str(&mut out, "namespace", m.namespace);
    put_str(&mut out, "selfLink", m.self_link);
    put_str(&mut out, "uid", m.uid);
    put_str(&mut out, "resourceVersion", m.resource_version);
    put_num(&mut out, "generation", m.generation);
    out.insert("creationTimestamp".into(), time(m.creation_timestamp));
    if m.deletion_timestamp.is_some() {
        out.insert("deletionTimestamp".into(), time(m.deletion_timestamp));
    }
    put_opt(
        &mut out,
        "deletionGracePeriodSeconds",
        m.deletion_grace_period_seconds,
    );
    put_map(&mut out, "labels", m.labels);
    put_map(&mut out, "annotations", m.annotations);
    put_list(
        &mut out,
        "ownerReferences",
        m.owner_references
            .into_iter()
            .map(|o| {
                let mut r = Map::with_capacity(6);
                r.insert(
                    "apiVersion".into(),
                    o.api_version.unwrap_or_default().into(),
                );
                r.insert("kind".into(), o.kind.unwrap_or_default().into());
                r.insert("name".into(), o.name.unwrap_or_default().into());
                r.insert("uid".into(), o.uid.unwrap_or_default().into());
                put_opt(&mut r, "controller", o.controller);
                put_opt(&mut r, "blockOwnerDeletion", o.block_owner_deletion);
                obj(r)
            })
            .collect(),
    );
    put_list(&mut out, "finalizers", strings(m.finalizers));
    put_list(
        &mut out,
        "managedFields",
        m.managed_fields
            .into_iter()
            .map(|e| {
                let mut r = Map::new();
                put_str(&mut r, "manager", e.manager);
                put_str(&mut r, "operation", e.operation);
                put_str(&mut r, "apiVersion", e.api_version);
                if e.time.is_some() {
                    r.insert("time".into(), time(e.time));
                }
                put_str(&mut r, "fieldsType", e.fields_type);
                if let Some(f) = e.fields_v1 {
                    // The field set is JSON the API server keeps as it got it.
                    let raw = f.raw.unwrap_or_default();
                    r.insert(
                        "fieldsV1".into(),
                        serde_json::from_slice(&raw).unwrap_or(Value::Object(Map::new())),
                    );
                }
                put_str(&mut r, "subresource", e.subresource);
                obj(r)
            })
            .collect(),
    );
    obj(out)
}

fn list_meta(m: meta::ListMeta) -> Map<String, Value> {
    let mut out = Map::new();
    put_str(&mut out, "selfLink", m.self_link);
    put_str(&mut out, "resourceVersion", m.resource_version);
    put_str(&mut out, "continue", m.r#continue);
    put_opt(&mut out, "remainingItemCount", m.remaining_item_count);
    out
}

fn object_reference(r: core::ObjectReference) -> Value {
    let mut out = Map::with_capacity(7);
    put_str(&mut out, "kind", r.kind);
    put_str(&mut out, "namespace", r.namespace);
    put_str(&mut out, "name", r.name);
    put_str(&mut out, "uid", r.uid);
    put_str(&mut out, "apiVersion", r.api_version);
    put_str(&mut out, "resourceVersion", r.resource_version);
    put_str(&mut out, "fieldPath", r.field_path);
    obj(out)
}

fn service(s: core::Service) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(s.metadata));
    let spec = s.spec.unwrap_or_default();
    let mut sp = Map::new();
    put_list(
        &mut sp,
        "ports",
        spec.ports
            .into_iter()
            .map(|p| {
                let mut r = Map::new();
                put_str(&mut r, "name", p.name);
                put_str(&mut r, "protocol", p.protocol);
                put_opt(&mut r, "appProtocol", p.app_protocol);
                r.insert("port".into(), p.port.unwrap_or_default().into());
                let t = p.target_port.unwrap_or_default();
                r.insert(
                    "targetPort".into(),
                    if t.r#type == Some(1) {
                        t.str_val.unwrap_or_default().into()
                    } else {
                        t.int_val.unwrap_or_default().into()
                    },
                );
                put_num(&mut r, "nodePort", p.node_port);
                obj(r)
            })
            .collect(),
    );
    put_map(&mut sp, "selector", spec.selector);
    put_str(&mut sp, "clusterIP", spec.cluster_ip);
    put_list(&mut sp, "clusterIPs", strings(spec.cluster_ips));
    put_str(&mut sp, "type", spec.r#type);
    put_list(&mut sp, "externalIPs", strings(spec.external_ips));
    put_str(&mut sp, "sessionAffinity", spec.session_affinity);
    put_str(&mut sp, "loadBalancerIP", spec.load_balancer_ip);
    put_list(
        &mut sp,
        "loadBalancerSourceRanges",
        strings(spec.load_balancer_source_ranges),
    );
    put_str(&mut sp, "externalName", spec.external_name);
    put_str(
        &mut sp,
        "externalTrafficPolicy",
        spec.external_traffic_policy,
    );
    put_num(&mut sp, "healthCheckNodePort", spec.health_check_node_port);
    if spec.publish_not_ready_addresses == Some(true) {
        sp.insert("publishNotReadyAddresses".into(), true.into());
    }
    if let Some(c) = spec.session_affinity_config {
        let mut r = Map::new();
        if let Some(ip) = c.client_ip {
            let mut i = Map::new();
            put_opt(&mut i, "timeoutSeconds", ip.timeout_seconds);
            r.insert("clientIP".into(), obj(i));
        }
        sp.insert("sessionAffinityConfig".into(), obj(r));
    }
    put_list(&mut sp, "ipFamilies", strings(spec.ip_families));
    put_opt(&mut sp, "ipFamilyPolicy", spec.ip_family_policy);
    put_opt(
        &mut sp,
        "allocateLoadBalancerNodePorts",
        spec.allocate_load_balancer_node_ports,
    );
    put_opt(&mut sp, "loadBalancerClass", spec.load_balancer_class);
    put_opt(
        &mut sp,
        "internalTrafficPolicy",
        spec.internal_traffic_policy,
    );
    put_opt(&mut sp, "trafficDistribution", spec.traffic_distribution);
    out.insert("spec".into(), obj(sp));
    let status = s.status.unwrap_or_default();
    let mut st = Map::new();
    let mut lb = Map::new();
    put_list(
        &mut lb,
        "ingress",
        status
            .load_balancer
            .unwrap_or_default()
            .ingress
            .into_iter()
            .map(|i| {
                let mut r = Map::new();
                put_str(&mut r, "ip", i.ip);
                put_str(&mut r, "hostname", i.hostname);
                put_opt(&mut r, "ipMode", i.ip_mode);
                put_list(
                    &mut r,
                    "ports",
                    i.ports
                        .into_iter()
                        .map(|p| {
                            let mut q = Map::new();
                            q.insert("port".into(), p.port.unwrap_or_default().into());
                            q.insert("protocol".into(), p.protocol.unwrap_or_default().into());
                            put_opt(&mut q, "error", p.error);
                            obj(q)
                        })
                        .collect(),
                );
                obj(r)
            })
            .collect(),
    );
    st.insert("loadBalancer".into(), obj(lb));
    put_list(
        &mut st,
        "conditions",
        status
            .conditions
            .into_iter()
            .map(|c| {
                let mut r = Map::new();
                r.insert("type".into(), c.r#type.unwrap_or_default().into());
                r.insert("status".into(), c.status.unwrap_or_default().into());
                put_num(&mut r, "observedGeneration", c.observed_generation);
                r.insert("lastTransitionTime".into(), time(c.last_transition_time));
                r.insert("reason".into(), c.reason.unwrap_or_default().into());
                r.insert("message".into(), c.message.unwrap_or_default().into());
                obj(r)
            })
            .collect(),
    );
    out.insert("status".into(), obj(st));
    out
}

fn endpoints(e: core::Endpoints) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(e.metadata));
    let addresses = |list: Vec<core::EndpointAddress>| -> Vec<Value> {
        list.into_iter()
            .map(|a| {
                let mut r = Map::new();
                r.insert("ip".into(), a.ip.unwrap_or_default().into());
                put_str(&mut r, "hostname", a.hostname);
                put_opt(&mut r, "nodeName", a.node_name);
                if let Some(t) = a.target_ref {
                    r.insert("targetRef".into(), object_reference(t));
                }
                obj(r)
            })
            .collect()
    };
    put_list(
        &mut out,
        "subsets",
        e.subsets
            .into_iter()
            .map(|s| {
                let mut r = Map::new();
                put_list(&mut r, "addresses", addresses(s.addresses));
                put_list(
                    &mut r,
                    "notReadyAddresses",
                    addresses(s.not_ready_addresses),
                );
                put_list(
                    &mut r,
                    "ports",
                    s.ports
                        .into_iter()
                        .map(|p| {
                            let mut q = Map::new();
                            put_str(&mut q, "name", p.name);
                            q.insert("port".into(), p.port.unwrap_or_default().into());
                            put_str(&mut q, "protocol", p.protocol);
                            put_opt(&mut q, "appProtocol", p.app_protocol);
                            obj(q)
                        })
                        .collect(),
                );
                obj(r)
            })
            .collect(),
    );
    out
}

/// A list Go writes as `null` when empty (no `omitempty`).
fn list_or_null(v: Vec<Value>) -> Value {
    if v.is_empty() {
        Value::Null
    } else {
        Value::Array(v)
    }
}

fn hints(for_zones: Vec<Option<String>>, for_nodes: Vec<Option<String>>) -> Value {
    let named = |names: Vec<Option<String>>| -> Vec<Value> {
        names
            .into_iter()
            .map(|n| {
                let mut r = Map::new();
                r.insert("name".into(), n.unwrap_or_default().into());
                obj(r)
            })
            .collect()
    };
    let mut h = Map::new();
    put_list(&mut h, "forZones", named(for_zones));
    put_list(&mut h, "forNodes", named(for_nodes));
    obj(h)
}

/// `slice_v1` and `slice_v1beta1`: the same fields in the same order but
/// for the endpoint's topology (`$topology`, written with the endpoint `$e`
/// into its JSON `$r` after `targetRef`) and where its node is named
/// (`$node`, of the endpoint `$f`). Each version gets its slice as JSON
/// (`$name`), as a [`SliceMessage`] (`$message`, its `SliceVersion`
/// `$variant`), the same JSON with only the endpoints a filter keeps and
/// its metadata already written (`$parts`), and what the filter reads of an
/// endpoint (`$facts`).
macro_rules! slice_version {
    ($name:ident, $message:ident, $variant:ident, $parts:ident, $facts:ident, $m:ident,
     |$f:ident| $node:expr, |$e:ident, $r:ident| $topology:block) => {
        fn $name(mut s: $m::EndpointSlice) -> Map<String, Value> {
            let metadata = object_meta(s.metadata.take());
            $parts(metadata, s, &mut |_| true)
        }

        fn $message(raw: &Bytes, kind: &str) -> Result<SliceMessage, DecodeError> {
            let mut s: $m::EndpointSlice = read::<_, SliceShim>(raw, kind)?;
            Ok(SliceMessage {
                metadata: object_meta(s.metadata.take()),
                slice: Box::new(SliceVersion::$variant(s)),
            })
        }

        fn $facts($f: &$m::Endpoint) -> EndpointFacts<'_> {
            EndpointFacts {
                node: $node,
                ready: $f.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
                pod_uid: $f
                    .target_ref
                    .as_ref()
                    .and_then(|t| t.uid.as_deref())
                    .filter(|u| !u.is_empty()),
            }
        }

        fn $parts(
            metadata: Value,
            s: $m::EndpointSlice,
            keep: &mut dyn FnMut(&EndpointFacts<'_>) -> bool,
        ) -> Map<String, Value> {
            let mut out = Map::with_capacity(4);
            out.insert("metadata".into(), metadata);
            out.insert(
                "addressType".into(),
                s.address_type.unwrap_or_default().into(),
            );
            // Go writes an empty list as null; one the filter emptied stays a list.
            let endpoints = if s.endpoints.is_empty() {
                Value::Null
            } else {
                Value::Array(
                    s.endpoints
                        .into_iter()
                        .filter(|e| keep(&$facts(e)))
                        .map(|$e| {
                            let mut $r = Map::with_capacity(8);
                            $r.insert("addresses".into(), list_or_null(strings($e.addresses)));
                            let c = $e.conditions.unwrap_or_default();
                            let mut conditions = Map::with_capacity(3);
                            put_opt(&mut conditions, "ready", c.ready);
                            put_opt(&mut conditions, "serving", c.serving);
                            put_opt(&mut conditions, "terminating", c.terminating);
                            $r.insert("conditions".into(), obj(conditions));
                            put_opt(&mut $r, "hostname", $e.hostname);
                            if let Some(t) = $e.target_ref {
                                $r.insert("targetRef".into(), object_reference(t));
                            }
                            $topology
                            if let Some(h) = $e.hints {
                                $r.insert(
                                    "hints".into(),
                                    hints(
                                        h.for_zones.into_iter().map(|z| z.name).collect(),
                                        h.for_nodes.into_iter().map(|n| n.name).collect(),
                                    ),
                                );
                            }
                            obj($r)
                        })
                        .collect(),
                )
            };
            out.insert("endpoints".into(), endpoints);
            let ports = s
                .ports
                .into_iter()
                .map(|p| {
                    let mut r = Map::with_capacity(4);
                    put_opt(&mut r, "name", p.name);
                    put_opt(&mut r, "protocol", p.protocol);
                    put_opt(&mut r, "port", p.port);
                    put_opt(&mut r, "appProtocol", p.app_protocol);
                    obj(r)
                })
                .collect();
            out.insert("ports".into(), list_or_null(ports));
            out
        }
    };
}

slice_version!(
    slice_v1,
    message_v1,
    V1,
    slice_v1_parts,
    facts_v1,
    disc_v1,
    |e| e.node_name.as_deref(),
    |e, r| {
        put_map(&mut r, "deprecatedTopology", e.deprecated_topology);
        put_opt(&mut r, "nodeName", e.node_name);
        put_opt(&mut r, "zone", e.zone);
    }
);

// v1beta1 names the node in `nodeName` (1.20 and later) or in the
// hostname topology label.
slice_version!(
    slice_v1beta1,
    message_v1beta1,
    V1beta1,
    slice_v1beta1_parts,
    facts_v1beta1,
    disc_v1beta1,
    |e| e
        .node_name
        .as_deref()
        .or_else(|| e.topology.get("kubernetes.io/hostname").map(String::as_str)),
    |e, r| {
        put_map(&mut r, "topology", e.topology);
        put_opt(&mut r, "nodeName", e.node_name);
    }
);

fn status(s: meta::Status) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "metadata".into(),
        obj(list_meta(s.metadata.unwrap_or_default())),
    );
    put_str(&mut out, "status", s.status);
    put_str(&mut out, "message", s.message);
    put_str(&mut out, "reason", s.reason);
    if let Some(d) = s.details {
        let mut r = Map::new();
        put_str(&mut r, "name", d.name);
        put_str(&mut r, "group", d.group);
        put_str(&mut r, "kind", d.kind);
        put_str(&mut r, "uid", d.uid);
        put_list(
            &mut r,
            "causes",
            d.causes
                .into_iter()
                .map(|c| {
                    let mut q = Map::new();
                    put_str(&mut q, "reason", c.reason);
                    put_str(&mut q, "message", c.message);
                    put_str(&mut q, "field", c.field);
                    obj(q)
                })
                .collect(),
        );
        put_num(&mut r, "retryAfterSeconds", d.retry_after_seconds);
        out.insert("details".into(), obj(r));
    }
    put_num(&mut out, "code", s.code);
    out
}
