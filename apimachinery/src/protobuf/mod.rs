//! Kubernetes' protobuf wire format for the kinds sitegrid serves, as
//! kube-apiserver writes it: objects (`k8s\0` + a `runtime.Unknown` envelope
//! around the message), lists, length-prefixed watch events, and errors
//! (`Status`). The messages are k8s-pb's (prost); an object's JSON is read
//! with k8s-openapi's types and converted field by field (`core`,
//! `discovery`, `meta`), writing fields as Kubernetes' Go code does.
//!
//! Lists and watch frames are built around items that are already encoded, so
//! a server can encode each object once and share the bytes.

mod core;
mod discovery;
mod meta;
mod networking;
pub mod to_json;

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, WireType};
use prost::Message as _;

use crate::Status;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime as pb_runtime;

pub use k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta;
pub use meta::list_meta;

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// The 4 bytes before every protobuf-encoded object.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Which message an object's JSON becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `v1.Service`.
    Service,
    /// `v1.Endpoints`.
    Endpoints,
    /// `v1.Node`.
    Node,
    /// `discovery.k8s.io/v1.EndpointSlice`.
    EndpointSliceV1,
    /// `discovery.k8s.io/v1beta1.EndpointSlice`.
    EndpointSliceV1beta1,
    /// `networking.k8s.io/v1.ServiceCIDR`.
    ServiceCidrV1,
    /// `networking.k8s.io/v1beta1.ServiceCIDR`.
    ServiceCidrV1beta1,
}

/// Why an object could not be encoded.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the object as protobuf: {0}")]
pub struct EncodeError(#[from] serde_json::Error);

/// The object (its JSON as the API serves it; `kind` and `apiVersion` may be
/// absent) as its bare message: what a list carries as an item, and what
/// [`envelope`] wraps.
pub fn message(kind: Kind, json: &[u8]) -> Result<Vec<u8>, EncodeError> {
    Ok(match kind {
        Kind::Service => core::service(serde_json::from_slice(json)?).encode_to_vec(),
        Kind::Endpoints => core::endpoints(serde_json::from_slice(json)?).encode_to_vec(),
        Kind::Node => core::node(serde_json::from_slice(json)?).encode_to_vec(),
        Kind::EndpointSliceV1 => discovery::slice_v1(serde_json::from_slice(json)?).encode_to_vec(),
        Kind::EndpointSliceV1beta1 => {
            discovery::slice_v1beta1(serde_json::from_slice(json)?).encode_to_vec()
        }
        Kind::ServiceCidrV1 => {
            networking::service_cidr_v1(serde_json::from_slice(json)?).encode_to_vec()
        }
        Kind::ServiceCidrV1beta1 => {
            networking::service_cidr_v1beta1(serde_json::from_slice(json)?).encode_to_vec()
        }
    })
}

/// Whether `value` reads as `kind`: what [`message`] would accept, checked
/// on JSON that is already parsed and without encoding anything (a cache
/// checks every object it takes in, and has parsed it anyway).
pub fn readable(kind: Kind, value: &serde_json::Value) -> Result<(), EncodeError> {
    unknown_fields(kind, value).map(drop)
}

/// The fields of `value` that `kind`'s message has no place for, as paths
/// (`spec.someNewField`, `endpoints.0.hints.forRegions`): fields of API
/// versions newer than the types this library is built with, which
/// [`message`] would silently drop. Empty when the encoding is complete.
/// Errors as [`readable`].
pub fn unknown_fields(kind: Kind, value: &serde_json::Value) -> Result<Vec<String>, EncodeError> {
    use k8s_openapi::api::{core::v1 as core_v1, networking::v1 as networking_v1};
    let mut unknown = Vec::new();
    let note = |path: serde_ignored::Path<'_>| {
        // serde_ignored writes `?` for each `Option` passed through.
        let path = path
            .to_string()
            .split('.')
            .filter(|segment| *segment != "?")
            .collect::<Vec<_>>()
            .join(".");
        // The envelope's fields: the message carries them in `runtime.Unknown`.
        if path != "kind" && path != "apiVersion" {
            unknown.push(path);
        }
    };
    match kind {
        Kind::Service => drop(serde_ignored::deserialize::<_, _, core_v1::Service>(
            value, note,
        )?),
        Kind::Endpoints => drop(serde_ignored::deserialize::<_, _, core_v1::Endpoints>(
            value, note,
        )?),
        Kind::Node => drop(serde_ignored::deserialize::<_, _, core_v1::Node>(
            value, note,
        )?),
        Kind::EndpointSliceV1 | Kind::EndpointSliceV1beta1 => {
            drop(serde_ignored::deserialize::<_, _, discovery::Slice>(
                value, note,
            )?)
        }
        Kind::ServiceCidrV1 | Kind::ServiceCidrV1beta1 => drop(serde_ignored::deserialize::<
            _,
            _,
            networking_v1::ServiceCIDR,
        >(value, note)?),
    }
    Ok(unknown)
}

/// Appends a length-delimited field `tag` holding `len` bytes (the bytes follow).
fn put_len_field(out: &mut BytesMut, tag: u32, len: usize) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// The size of a length-delimited field `tag` holding `len` bytes.
fn len_field_size(tag: u32, len: usize) -> usize {
    prost::encoding::key_len(tag) + encoded_len_varint(len as u64) + len
}

/// `k8s\0` + `runtime.Unknown{typeMeta{apiVersion, kind}, raw, contentEncoding "", contentType ""}`
/// around `raw_len` bytes that `write_raw` appends: a whole object on the wire.
fn wrapped(
    api_version: &str,
    kind: &str,
    raw_len: usize,
    write_raw: impl FnOnce(&mut BytesMut),
) -> Bytes {
    let type_meta = pb_runtime::TypeMeta {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
    }
    .encode_to_vec();
    let size = MAGIC.len()
        + len_field_size(1, type_meta.len())
        + len_field_size(2, raw_len)
        + 2 * len_field_size(3, 0);
    let mut out = BytesMut::with_capacity(size);
    out.put_slice(MAGIC);
    put_len_field(&mut out, 1, type_meta.len());
    out.put_slice(&type_meta);
    put_len_field(&mut out, 2, raw_len);
    let before = out.len();
    write_raw(&mut out);
    debug_assert_eq!(
        out.len() - before,
        raw_len,
        "the raw bytes are as long as announced"
    );
    // contentEncoding and contentType: empty, and written (Go value fields).
    put_len_field(&mut out, 3, 0);
    put_len_field(&mut out, 4, 0);
    out.freeze()
}

/// An object on the wire: [`message`] bytes in the envelope with its `apiVersion` and `kind`.
pub fn envelope(api_version: &str, kind: &str, message: &[u8]) -> Bytes {
    wrapped(api_version, kind, message.len(), |out| {
        out.put_slice(message)
    })
}

/// A list on the wire: `<Kind>List{metadata, items}` built from the items'
/// [`message`] bytes (concatenated, not re-encoded), in the envelope.
pub fn list<'a, I>(api_version: &str, list_kind: &str, meta: &pb_meta::ListMeta, items: I) -> Bytes
where
    I: Iterator<Item = &'a [u8]> + Clone,
{
    let frame = ListFrame::new(api_version, list_kind, meta, items.clone().map(<[u8]>::len));
    let mut out = BytesMut::with_capacity(frame.len);
    out.put_slice(&frame.head);
    for item in items {
        put_list_item(&mut out, item);
    }
    out.put_slice(&frame.tail);
    out.freeze()
}

/// A list on the wire split around its items, so a server can send the items
/// it already holds without first copying them into one buffer: `head`, then
/// each item written by [`put_list_item`], then `tail`.
#[derive(Debug, Clone)]
pub struct ListFrame {
    /// The magic, the envelope up to its `raw` bytes, and the list's metadata.
    pub head: Bytes,
    /// The envelope's fields after `raw`.
    pub tail: Bytes,
    /// The whole list's length in bytes, items included.
    pub len: usize,
}

impl ListFrame {
    /// The frame of a list whose item messages are `item_lens` bytes long.
    pub fn new(
        api_version: &str,
        list_kind: &str,
        meta: &pb_meta::ListMeta,
        item_lens: impl Iterator<Item = usize>,
    ) -> ListFrame {
        let meta = meta.encode_to_vec();
        let items_len: usize = item_lens.map(list_item_len).sum();
        let raw_len = len_field_size(1, meta.len()) + items_len;
        let whole = wrapped(api_version, list_kind, raw_len, |out| {
            put_len_field(out, 1, meta.len());
            out.put_slice(&meta);
            // Stand-in bytes where the items go; the frame is cut around them.
            out.put_bytes(0, items_len);
        });
        let items_end = whole.len() - ENVELOPE_TAIL_LEN;
        let items_start = items_end - items_len;
        ListFrame {
            head: whole.slice(..items_start),
            tail: whole.slice(items_end..),
            len: whole.len(),
        }
    }
}

/// The envelope's fields after `raw`: empty `contentEncoding` and `contentType`.
const ENVELOPE_TAIL_LEN: usize = 4;

/// Appends one item of a [`ListFrame`]'s list: its message as field `items`.
pub fn put_list_item(out: &mut BytesMut, message: &[u8]) {
    put_list_item_head(out, message.len());
    out.put_slice(message);
}

/// What goes before a list item of `len` bytes (its field's key and
/// length), for a caller that writes the item itself.
pub fn put_list_item_head(out: &mut BytesMut, len: usize) {
    put_len_field(out, 2, len);
}

/// The bytes [`put_list_item`] appends for a message of `len` bytes.
pub fn list_item_len(len: usize) -> usize {
    len_field_size(2, len)
}

/// One watch frame: the 4-byte big-endian length of a `metav1.WatchEvent{type, object{raw}}`
/// and the event, whose object is an [`envelope`].
pub fn watch_event(event_type: &str, envelope: &[u8]) -> Bytes {
    let raw_ext = len_field_size(1, envelope.len());
    let event_len = len_field_size(1, event_type.len()) + len_field_size(2, raw_ext);
    let mut out = BytesMut::with_capacity(4 + event_len);
    // Watch events are far below 4 GiB (objects are limited to about 1.5 MiB).
    out.put_u32(u32::try_from(event_len).unwrap_or(u32::MAX));
    put_len_field(&mut out, 1, event_type.len());
    out.put_slice(event_type.as_bytes());
    put_len_field(&mut out, 2, raw_ext);
    put_len_field(&mut out, 1, envelope.len());
    out.put_slice(envelope);
    out.freeze()
}

/// The object of a BOOKMARK (or of the end of the initial events): the kind
/// with only `metadata.resourceVersion` and `annotations`, in the envelope.
pub fn bookmark(
    kind: Kind,
    api_version: &str,
    kind_name: &str,
    resource_version: &str,
    annotations: &BTreeMap<String, String>,
) -> Bytes {
    let mut meta = serde_json::json!({ "resourceVersion": resource_version });
    if !annotations.is_empty() {
        meta["annotations"] = serde_json::json!(annotations);
    }
    let json = serde_json::json!({ "metadata": meta }).to_string();
    // The JSON above is made here and reads back as every kind: cannot fail.
    let message = message(kind, json.as_bytes()).unwrap_or_default();
    envelope(api_version, kind_name, &message)
}

/// A `Status` (an error answer) on the wire.
pub fn status(s: &Status) -> Bytes {
    let details = s.details.as_ref().map(|d| pb_meta::StatusDetails {
        name: Some(d.name.clone()),
        group: Some(d.group.clone()),
        kind: Some(d.kind.clone()),
        uid: Some(String::new()),
        causes: d
            .causes
            .iter()
            .map(|c| pb_meta::StatusCause {
                reason: Some(c.reason.clone()),
                message: Some(c.message.clone()),
                field: Some(c.field.clone()),
            })
            .collect(),
        retry_after_seconds: Some(
            d.retry_after_seconds
                .map_or(0, |secs| i32::try_from(secs).unwrap_or(i32::MAX)),
        ),
    });
    let status = pb_meta::Status {
        metadata: Some(pb_meta::ListMeta {
            self_link: Some(String::new()),
            resource_version: Some(String::new()),
            r#continue: Some(s.metadata.continue_.clone().unwrap_or_default()),
            remaining_item_count: None,
        }),
        status: Some(s.status.clone()),
        message: Some(s.message.clone()),
        reason: Some(s.reason.clone().unwrap_or_default()),
        details,
        code: Some(i32::from(s.code)),
    }
    .encode_to_vec();
    envelope("v1", "Status", &status)
}
