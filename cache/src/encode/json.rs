//! JSON, encoded once into shareable bytes.
//!
//! A stored body is the object's compact JSON *without* `kind`/`apiVersion`
//! (the form list items take), kept compressed ([`Packed`], per cache). The full
//! object, the watch frame and the list are built from it by concatenation,
//! so one encoding serves every client. The body remembers where its
//! `metadata.resourceVersion` value sits, so a DELETED event can carry the
//! deletion's version by splicing, not re-encoding.

use std::{cell::RefCell, ops::Range};

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};

use super::{
    codec::{Codec, Family, Packed},
    with_scratch, Wire,
};
use crate::kind::{ResourceKind, Served};

/// A body plus the byte range of its resourceVersion digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    packed: Packed,
    rv_at: Range<u32>,
}

impl Encoded {
    /// A body, `packed`, whose resourceVersion digits are at `rv_at`.
    fn new(packed: Packed, rv_at: Range<usize>) -> Encoded {
        // Bodies are far below 4 GiB: the API server refuses objects over
        // about 1.5 MiB, and the proxy's --max-body-bytes caps what it reads.
        let at = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        Encoded {
            packed,
            rv_at: at(rv_at.start)..at(rv_at.end),
        }
    }

    /// The compact JSON body (`{"metadata":{...},...}`), without kind/apiVersion.
    pub fn bytes(&self) -> Bytes {
        self.packed.unpack()
    }

    /// The body as it is kept, to unpack where the caller wants it.
    pub fn packed(&self) -> &Packed {
        &self.packed
    }

    /// Appends the body to `out`.
    pub fn write_into(&self, out: &mut BytesMut) {
        self.packed.unpack_into(out);
    }

    /// The body's length, bytes.
    pub fn len(&self) -> usize {
        self.packed.len()
    }

    /// Whether the body is empty (never, for a body [`encode_body`] made).
    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    /// The same body carrying another resourceVersion.
    pub fn with_rv(&self, rv: u64) -> Encoded {
        let bytes = self.bytes();
        let (start, end) = (self.rv_at.start as usize, self.rv_at.end as usize);
        let digits = rv.to_string();
        let mut out = Vec::with_capacity(bytes.len() + digits.len());
        out.extend_from_slice(&bytes[..start]);
        out.extend_from_slice(digits.as_bytes());
        out.extend_from_slice(&bytes[end..]);
        Encoded::new(self.packed.repack(&out), start..start + digits.len())
    }

    /// Parses the body back into a JSON object (for tables, conversion, Exact reads).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.bytes()).unwrap_or(Value::Null)
    }

    /// The full object: `{"kind":..,"apiVersion":..,` + body without its `{`.
    pub fn write_full(&self, served: Served, out: &mut BytesMut) {
        out.put_slice(served.object_prefix().as_bytes());
        let brace = out.len();
        self.write_into(out);
        // The body's own `{` gives way to the prefix's (which ends in `,`).
        if out.len() > brace {
            out.copy_within(brace + 1.., brace);
            out.truncate(out.len() - 1);
        }
    }

    /// The full object as its own buffer.
    pub fn full(&self, served: Served) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len() + 64);
        self.write_full(served, &mut out);
        out.freeze()
    }
}

/// Encodes `obj`, an object of `kind`, as a stored body with
/// `metadata.resourceVersion = rv`, dropping `kind` and `apiVersion` and
/// keeping every other key in its original order.
pub fn encode_body(
    codec: &Codec,
    kind: ResourceKind,
    obj: &Map<String, Value>,
    rv: u64,
) -> Encoded {
    with_scratch(&TEXT, |out| {
        let rv_at = write_body(out, obj, rv);
        Encoded::new(codec.pack(Family::served(kind, Wire::Json), out), rv_at)
    })
}

thread_local! {
    /// Where a body is written before it is packed.
    static TEXT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Writes the body of `obj` to `out`; where its resourceVersion digits are.
fn write_body(out: &mut Vec<u8>, obj: &Map<String, Value>, rv: u64) -> Range<usize> {
    let mut rv_at = 0..0;
    out.push(b'{');
    let mut first = true;
    let mut saw_metadata = false;
    for (key, value) in obj {
        if key == "kind" || key == "apiVersion" {
            continue;
        }
        comma(out, &mut first);
        write_json(out, key);
        out.push(b':');
        match (key.as_str(), value) {
            ("metadata", Value::Object(meta)) => {
                saw_metadata = true;
                rv_at = write_metadata(out, meta, rv);
            }
            _ => write_json(out, value),
        }
    }
    if !saw_metadata {
        comma(out, &mut first);
        out.extend_from_slice(b"\"metadata\":");
        rv_at = write_metadata(out, &Map::new(), rv);
    }
    out.push(b'}');
    rv_at
}

fn write_metadata(out: &mut Vec<u8>, meta: &Map<String, Value>, rv: u64) -> Range<usize> {
    out.push(b'{');
    let mut first = true;
    let mut rv_at = None;
    for (key, value) in meta {
        if key == "resourceVersion" {
            comma(out, &mut first);
            rv_at = Some(write_rv(out, rv));
            continue;
        }
        comma(out, &mut first);
        write_json(out, key);
        out.push(b':');
        write_json(out, value);
    }
    let rv_at = match rv_at {
        Some(r) => r,
        None => {
            comma(out, &mut first);
            write_rv(out, rv)
        }
    };
    out.push(b'}');
    rv_at
}

fn write_rv(out: &mut Vec<u8>, rv: u64) -> Range<usize> {
    out.extend_from_slice(b"\"resourceVersion\":\"");
    let start = out.len();
    out.extend_from_slice(rv.to_string().as_bytes());
    let end = out.len();
    out.push(b'"');
    start..end
}

fn comma(out: &mut Vec<u8>, first: &mut bool) {
    if !*first {
        out.push(b',');
    }
    *first = false;
}

fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Writing a serde_json value or a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
}

/// A list body split around its items (joined by commas): the head
/// `{"kind":"<Kind>List","apiVersion":..,"metadata":{..},"items":[` and the
/// tail `]}\n`.
pub fn list_frame(served: Served, list_meta: &Value) -> (Bytes, Bytes) {
    let mut head = BytesMut::with_capacity(160);
    head.put_slice(b"{\"kind\":\"");
    head.put_slice(served.kind.kind().as_bytes());
    head.put_slice(b"List\",\"apiVersion\":\"");
    head.put_slice(served.api_version().as_bytes());
    head.put_slice(b"\",\"metadata\":");
    head.put_slice(&serde_json::to_vec(list_meta).unwrap_or_default());
    head.put_slice(b",\"items\":[");
    (head.freeze(), Bytes::from_static(b"]}\n"))
}

/// One watch frame: `{"type":"<TYPE>","object":<full object>}\n`.
pub fn watch_frame(event_type: &str, served: Served, body: &Encoded) -> Bytes {
    let mut out = BytesMut::with_capacity(body.len() + 96);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(event_type.as_bytes());
    out.put_slice(b"\",\"object\":");
    body.write_full(served, &mut out);
    out.put_slice(b"}\n");
    out.freeze()
}

/// A watch frame around an arbitrary JSON object (BOOKMARK, ERROR, Table).
pub fn watch_frame_value(event_type: &str, object: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(event_type.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    write_json(&mut out, object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kind::{ApiVersion, ResourceKind};
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn body_drops_kind_and_rewrites_rv_in_place() {
        let o = obj(json!({"kind":"Endpoints","apiVersion":"v1",
            "metadata":{"name":"web","namespace":"default","resourceVersion":"347","labels":{"a":"b"}},
            "subsets":[{"addresses":[{"ip":"10.0.0.1","targetRef":{"resourceVersion":"9"}}]}]}));
        let e = encode_body(&Codec::default(), ResourceKind::Endpoints, &o, 1_000_123);
        assert_eq!(
            std::str::from_utf8(&e.bytes()).unwrap(),
            r#"{"metadata":{"name":"web","namespace":"default","resourceVersion":"1000123","labels":{"a":"b"}},"subsets":[{"addresses":[{"ip":"10.0.0.1","targetRef":{"resourceVersion":"9"}}]}]}"#
        );
        let d = e.with_rv(7);
        assert!(std::str::from_utf8(&d.bytes())
            .unwrap()
            .contains(r#""resourceVersion":"7","labels""#));
        assert_eq!(d.with_rv(1_000_123), e);
    }

    #[test]
    fn full_object_and_frame_carry_kind_first() {
        let e = encode_body(
            &Codec::default(),
            ResourceKind::Nodes,
            &obj(json!({"metadata":{"name":"n1"}})),
            5,
        );
        let served = Served {
            kind: ResourceKind::Nodes,
            version: ApiVersion::V1,
        };
        assert_eq!(
            std::str::from_utf8(&watch_frame("ADDED", served, &e)).unwrap(),
            "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"5\"}}}\n"
        );
    }

    #[test]
    fn list_matches_apiserver_shape() {
        let a = encode_body(
            &Codec::default(),
            ResourceKind::EndpointSlices,
            &obj(json!({"metadata":{"name":"a"}})),
            1,
        );
        let served = Served {
            kind: ResourceKind::EndpointSlices,
            version: ApiVersion::V1beta1,
        };
        let (head, tail) = list_frame(served, &json!({"resourceVersion":"9"}));
        // One item: the list is the frame around it.
        let body = [head, a.bytes(), tail].concat();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            "{\"kind\":\"EndpointSliceList\",\"apiVersion\":\"discovery.k8s.io/v1beta1\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}]}\n"
        );
    }
}
