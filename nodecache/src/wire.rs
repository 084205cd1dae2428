//! Reading the API server's answers to the kubelet, in the format they came
//! in (JSON, or protobuf, which the kubelet asks for first): lists, single
//! objects and watch events, each object kept as the bytes the API server
//! sent (a JSON object with its `kind` and `apiVersion`; a protobuf message
//! without its envelope) with the [`Facts`] read from it.

use bytes::Bytes;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde::Deserialize;
use serde_json::{value::RawValue, Value};
use sitegrid_apimachinery::{protobuf::MAGIC, watch::EventType};

use crate::{
    facts::{self, Facts},
    resource::KeptResource,
};

/// The annotation of the bookmark that ends a watch-list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// How an answer is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Format {
    /// The format of a `Content-Type` (parameters such as `;stream=watch`
    /// and `;charset=utf-8` aside); `None` for anything else (a Table, YAML).
    pub fn of_content_type(content_type: &str) -> Option<Format> {
        let mut parts = content_type.split(';').map(str::trim);
        let media = parts.next()?.to_ascii_lowercase();
        // `as=Table` and friends are not the objects themselves.
        if parts.any(|p| p.to_ascii_lowercase().starts_with("as=")) {
            return None;
        }
        match media.as_str() {
            "application/json" => Some(Format::Json),
            "application/vnd.kubernetes.protobuf" => Some(Format::Protobuf),
            _ => None,
        }
    }

    /// The `Content-Type` of an object or a list.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Protobuf => sitegrid_apimachinery::protobuf::MEDIA_TYPE,
        }
    }

    /// The `Content-Type` of a watch stream.
    pub fn watch_content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Protobuf => sitegrid_apimachinery::protobuf::WATCH_MEDIA_TYPE,
        }
    }
}

/// An answer that does not read as what it claims to be.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Not JSON of the expected shape.
    #[error("not a JSON {0}: {1}")]
    Json(&'static str, String),
    /// Not protobuf of the expected shape.
    #[error("not a protobuf {0}: {1}")]
    Protobuf(&'static str, String),
    /// An object without a name.
    #[error("an object without metadata.name")]
    Unnamed,
}

/// A kept object: the bytes as the API server sent them, and what they say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// A JSON object with `kind` and `apiVersion`, or a protobuf message
    /// without its envelope.
    pub bytes: Bytes,
    /// How `bytes` are encoded.
    pub format: Format,
    /// What they say.
    pub facts: Facts,
}

/// A list answer.
#[derive(Debug, Clone)]
pub struct List {
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// Whether it is one page of several (`metadata.continue` set).
    pub continued: bool,
    /// The items, in the order sent.
    pub items: Vec<Item>,
}

/// One event of a watch stream.
#[derive(Debug, Clone)]
pub enum Event {
    /// An object added, modified or deleted.
    Object(EventType, Box<Item>),
    /// A bookmark at this resourceVersion; `initial_end` when it ends a
    /// watch-list's initial events.
    Bookmark {
        /// Its `metadata.resourceVersion`.
        resource_version: String,
        /// Annotated `k8s.io/initial-events-end: "true"`.
        initial_end: bool,
    },
    /// An `ERROR` event (the stream ends after it).
    Error,
}

/// Reads a list answer of `resource`.
pub fn list(resource: KeptResource, format: Format, body: &[u8]) -> Result<List, WireError> {
    match format {
        Format::Json => {
            #[derive(Deserialize)]
            struct ListMeta {
                #[serde(rename = "resourceVersion", default)]
                resource_version: String,
                #[serde(rename = "continue", default)]
                continue_: String,
            }
            #[derive(Deserialize)]
            struct JsonList<'a> {
                metadata: ListMeta,
                #[serde(borrow, default)]
                items: Option<Vec<&'a RawValue>>,
            }
            let parsed: JsonList<'_> =
                serde_json::from_slice(body).map_err(|e| WireError::Json("list", e.to_string()))?;
            let items = parsed
                .items
                .unwrap_or_default()
                .into_iter()
                .map(|raw| json_item(resource, raw.get().as_bytes()))
                .collect::<Result<_, _>>()?;
            Ok(List {
                resource_version: parsed.metadata.resource_version,
                continued: !parsed.metadata.continue_.is_empty(),
                items,
            })
        }
        Format::Protobuf => {
            let raw = unwrap_envelope(body, "list")?;
            let mut out = List {
                resource_version: String::new(),
                continued: false,
                items: Vec::new(),
            };
            for (tag, value) in fields(&raw).map_err(|e| WireError::Protobuf("list", e))? {
                match tag {
                    1 => {
                        let m = meta::ListMeta::decode(value)
                            .map_err(|e| WireError::Protobuf("list metadata", e.to_string()))?;
                        out.resource_version = m.resource_version.unwrap_or_default();
                        out.continued = m.r#continue.is_some_and(|c| !c.is_empty());
                    }
                    2 => out.items.push(protobuf_item(resource, value)?),
                    _ => {}
                }
            }
            Ok(out)
        }
    }
}

/// Reads a single-object answer (a GET) of `resource`.
pub fn object(resource: KeptResource, format: Format, body: &[u8]) -> Result<Item, WireError> {
    match format {
        Format::Json => json_item(resource, trim_json(body)),
        Format::Protobuf => protobuf_item(resource, &unwrap_envelope(body, "object")?),
    }
}

/// Reads one watch event of `resource`: a JSON line, or a protobuf frame
/// without its 4-byte length.
pub fn event(resource: KeptResource, format: Format, frame: &[u8]) -> Result<Event, WireError> {
    let (kind, object): (String, Option<Vec<u8>>) = match format {
        Format::Json => {
            #[derive(Deserialize)]
            struct JsonEvent<'a> {
                #[serde(rename = "type")]
                kind: String,
                #[serde(borrow)]
                object: &'a RawValue,
            }
            let e: JsonEvent<'_> = serde_json::from_slice(frame)
                .map_err(|e| WireError::Json("watch event", e.to_string()))?;
            (e.kind, Some(e.object.get().as_bytes().to_vec()))
        }
        Format::Protobuf => {
            let e = meta::WatchEvent::decode(frame)
                .map_err(|e| WireError::Protobuf("watch event", e.to_string()))?;
            (e.r#type.unwrap_or_default(), e.object.and_then(|o| o.raw))
        }
    };
    let event_type = match kind.as_str() {
        "ADDED" => EventType::Added,
        "MODIFIED" => EventType::Modified,
        "DELETED" => EventType::Deleted,
        "BOOKMARK" => {
            let object = object.unwrap_or_default();
            let (resource_version, annotations) = match format {
                Format::Json => {
                    let v: Value = serde_json::from_slice(&object)
                        .map_err(|e| WireError::Json("bookmark", e.to_string()))?;
                    let m = &v["metadata"];
                    (
                        m["resourceVersion"].as_str().unwrap_or_default().to_owned(),
                        m["annotations"][INITIAL_EVENTS_END].as_str() == Some("true"),
                    )
                }
                Format::Protobuf => {
                    let raw = unwrap_envelope(&object, "bookmark")?;
                    let f = facts::from_protobuf(KeptResource::CsiDrivers, &raw)
                        .map_err(|e| WireError::Protobuf("bookmark", e.to_string()))?;
                    let meta = bookmark_annotations(&raw)?;
                    (f.resource_version, meta)
                }
            };
            return Ok(Event::Bookmark {
                resource_version,
                initial_end: annotations,
            });
        }
        _ => return Ok(Event::Error),
    };
    let object = object.unwrap_or_default();
    let item = match format {
        Format::Json => json_item(resource, &object)?,
        Format::Protobuf => protobuf_item(resource, &unwrap_envelope(&object, "watch object")?)?,
    };
    Ok(Event::Object(event_type, Box::new(item)))
}

/// Whether a protobuf bookmark's metadata carries the initial-events-end annotation.
fn bookmark_annotations(message: &[u8]) -> Result<bool, WireError> {
    for (tag, value) in fields(message).map_err(|e| WireError::Protobuf("bookmark", e))? {
        if tag == 1 {
            let m = meta::ObjectMeta::decode(value)
                .map_err(|e| WireError::Protobuf("bookmark metadata", e.to_string()))?;
            return Ok(m.annotations.get(INITIAL_EVENTS_END).map(String::as_str) == Some("true"));
        }
    }
    Ok(false)
}

/// A JSON object kept with its `kind` and `apiVersion` (list items come
/// without them; a watch event or a GET needs them).
fn json_item(resource: KeptResource, raw: &[u8]) -> Result<Item, WireError> {
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| WireError::Json("object", e.to_string()))?;
    if !value.is_object() {
        return Err(WireError::Json("object", "not an object".into()));
    }
    let facts = facts::from_json(resource, &value);
    if facts.name.is_empty() {
        return Err(WireError::Unnamed);
    }
    let bytes = if value.get("kind").is_some() {
        Bytes::copy_from_slice(raw)
    } else {
        with_type_meta(resource, raw)
    };
    Ok(Item {
        bytes,
        format: Format::Json,
        facts,
    })
}

/// `raw` (a JSON object without `kind`) with `kind` and `apiVersion` first.
fn with_type_meta(resource: KeptResource, raw: &[u8]) -> Bytes {
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\"",
        resource.kind(),
        resource.api_version()
    );
    let rest = trim_json(raw).strip_prefix(b"{").unwrap_or_default();
    let mut out = Vec::with_capacity(head.len() + rest.len() + 1);
    out.extend_from_slice(head.as_bytes());
    if rest.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Bytes::from(out)
}

fn trim_json(raw: &[u8]) -> &[u8] {
    let start = raw
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(raw.len());
    let end = raw
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &raw[start..end]
}

fn protobuf_item(resource: KeptResource, message: &[u8]) -> Result<Item, WireError> {
    let facts = facts::from_protobuf(resource, message)
        .map_err(|e| WireError::Protobuf(resource.kind(), e.to_string()))?;
    if facts.name.is_empty() {
        return Err(WireError::Unnamed);
    }
    Ok(Item {
        bytes: Bytes::copy_from_slice(message),
        format: Format::Protobuf,
        facts,
    })
}

/// The message inside `k8s\0` + `runtime.Unknown`.
fn unwrap_envelope(body: &[u8], what: &'static str) -> Result<Vec<u8>, WireError> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| WireError::Protobuf(what, "no k8s\\0 magic".into()))?;
    let unknown = Unknown::decode(inner).map_err(|e| WireError::Protobuf(what, e.to_string()))?;
    Ok(unknown.raw.unwrap_or_default())
}

/// The length-delimited fields of a message, as (tag, bytes); other wire
/// types are skipped.
fn fields(mut buf: &[u8]) -> Result<Vec<(u32, &[u8])>, String> {
    use prost::encoding::{decode_key, decode_varint, WireType};
    let mut out = Vec::new();
    while !buf.is_empty() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|e| e.to_string())?;
        match wire_type {
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut buf).map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
                if len > buf.len() {
                    return Err(format!("field {tag} runs past the end"));
                }
                let (value, rest) = buf.split_at(len);
                out.push((tag, value));
                buf = rest;
            }
            WireType::Varint => {
                decode_varint(&mut buf).map_err(|e| e.to_string())?;
            }
            WireType::SixtyFourBit if buf.len() >= 8 => buf = &buf[8..],
            WireType::ThirtyTwoBit if buf.len() >= 4 => buf = &buf[4..],
            other => {
                return Err(format!(
                    "field {tag}: wire type {other:?} not expected here"
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::api::core::v1 as pb;
    use sitegrid_apimachinery::protobuf::{envelope, list_meta, watch_event};

    fn secret(name: &str, rv: &str) -> Vec<u8> {
        pb::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            }),
            r#type: Some("Opaque".into()),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn a_protobuf_list_keeps_each_message_as_sent() {
        let items = [secret("a", "5"), secret("b", "6")];
        let body = sitegrid_apimachinery::protobuf::list(
            "v1",
            "SecretList",
            &list_meta("9", "", None),
            items.iter().map(Vec::as_slice),
        );
        let l = list(KeptResource::Secrets, Format::Protobuf, &body).unwrap();
        assert_eq!(l.resource_version, "9");
        assert!(!l.continued);
        assert_eq!(l.items.len(), 2);
        assert_eq!(&l.items[1].bytes[..], &items[1][..]);
        assert_eq!(l.items[0].facts.field("type").as_deref(), Some("Opaque"));
    }

    #[test]
    fn a_json_list_item_gets_its_kind_back() {
        let body = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12","continue":"abc"},"items":[{"metadata":{"name":"a","namespace":"n","resourceVersion":"11"},"data":{"k":"v"}}]}"#;
        let l = list(KeptResource::ConfigMaps, Format::Json, body).unwrap();
        assert!(l.continued);
        let item: Value = serde_json::from_slice(&l.items[0].bytes).unwrap();
        assert_eq!(item["kind"], "ConfigMap");
        assert_eq!(item["apiVersion"], "v1");
        assert_eq!(item["data"]["k"], "v");
        let empty = with_type_meta(KeptResource::ConfigMaps, b"{}");
        assert_eq!(&empty[..], br#"{"kind":"ConfigMap","apiVersion":"v1"}"#);
    }

    #[test]
    fn watch_events_and_bookmarks_read_in_both_formats() {
        let frame = watch_event("MODIFIED", &envelope("v1", "Secret", &secret("a", "7")));
        // The frame's 4-byte length is the framer's.
        match event(KeptResource::Secrets, Format::Protobuf, &frame[4..]).unwrap() {
            Event::Object(EventType::Modified, item) => {
                assert_eq!(item.facts.resource_version, "7")
            }
            other => panic!("{other:?}"),
        }
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"30","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        match event(KeptResource::Pods, Format::Json, bookmark).unwrap() {
            Event::Bookmark {
                resource_version,
                initial_end,
            } => assert_eq!((resource_version.as_str(), initial_end), ("30", true)),
            other => panic!("{other:?}"),
        }
        let error = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        assert!(matches!(
            event(KeptResource::Pods, Format::Json, error).unwrap(),
            Event::Error
        ));
        assert!(event(KeptResource::Pods, Format::Json, b"{").is_err());
    }

    #[test]
    fn content_types_name_formats() {
        assert_eq!(
            Format::of_content_type("application/json; charset=utf-8"),
            Some(Format::Json)
        );
        assert_eq!(
            Format::of_content_type("application/vnd.kubernetes.protobuf;stream=watch"),
            Some(Format::Protobuf)
        );
        assert_eq!(
            Format::of_content_type("application/json;as=Table;v=v1;g=meta.k8s.io"),
            None
        );
        assert_eq!(Format::of_content_type("application/yaml"), None);
    }
}
