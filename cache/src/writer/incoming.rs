//! What the writer takes from an upstream object: what it keeps between
//! events ([`Stored`]) and what it uses once, on arrival ([`Once`]).

use std::{collections::BTreeMap, sync::Arc};

use serde_json::{Map, Value};
use sitegrid_apimachinery::protobuf::{self, to_json::Decoded};

use crate::{
    encode::codec::{Codec, Family, Packed},
    kind::ResourceKind,
    object::object_key,
    topology::SERVICE_NAME_LABEL,
    UpstreamBody, UpstreamObject,
};

/// What the writer keeps of an upstream object between events.
pub(super) struct Stored {
    /// The upstream resourceVersion: a relist skips objects that did not change.
    pub(super) rv: Rv,
    /// Endpoints and EndpointSlices: the object as the API server sent it
    /// (its protobuf when it was read in protobuf, listed or watched, its
    /// JSON otherwise), kept compressed (on the kind's [`Family::upstream`] or
    /// [`Family::upstream_protobuf`]), from which their views are
    /// recomputed when a node moves site or a Service's topology or another
    /// of its slices changes.
    pub(super) raw: Option<Packed>,
    /// For an EndpointSlice: the `ns/service` it belongs to (once linked,
    /// the writer's one copy of the name, see `ServiceLinks`).
    pub(super) service: Option<Arc<str>>,
}

/// An upstream resourceVersion, kept only to be compared with the next
/// list's, in eight bytes and without an allocation per cached object: the
/// number itself for the decimal revisions every API server hands out
/// (below 2^63), a digest of the text otherwise (versions are opaque
/// strings), with the top bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rv(u64);

impl Rv {
    /// None known (an object restored from a snapshot, or sent without one).
    pub(super) const UNKNOWN: Rv = Rv(u64::MAX);

    /// Digests carry this bit; numbers below it are kept as they are.
    const DIGEST: u64 = 1 << 63;

    pub(super) fn of(text: &str) -> Rv {
        let canonical =
            text.bytes().all(|b| b.is_ascii_digit()) && (text.len() == 1 || !text.starts_with('0'));
        match text.parse::<u64>() {
            _ if text.is_empty() => Rv::UNKNOWN,
            Ok(n) if canonical && n < Self::DIGEST => Rv(n),
            _ => {
                let mut h = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(text, &mut h);
                // Never the unknown version's bits.
                Rv((std::hash::Hasher::finish(&h) | Self::DIGEST).min(u64::MAX - 1))
            }
        }
    }
}

/// Services, Nodes and ServiceCIDRs: what their arrival contributes, then
/// dropped (their views are made once, from the object itself).
pub(super) struct Once {
    /// The object as the API server sent it.
    pub(super) body: UpstreamBody,
    /// Node labels.
    pub(super) labels: Option<BTreeMap<String, String>>,
    /// Service annotations (for `topologyKeys`).
    pub(super) annotations: Option<BTreeMap<String, String>>,
}

impl Once {
    /// The object as JSON, for its view.
    pub(super) fn value(&self) -> Value {
        self.body
            .value()
            .unwrap_or_else(|_| Value::Object(Map::new()))
    }
}

/// An upstream object as the writer takes it in.
pub(super) struct Incoming {
    /// What is kept between events.
    pub(super) stored: Stored,
    /// Services and Nodes: what is used once.
    pub(super) once: Option<Box<Once>>,
}

impl Incoming {
    /// Takes `obj` apart into what is kept and what is used once; the parsed
    /// metadata is dropped here, so a relist buffer stays compact.
    pub(super) fn new(codec: &Codec, kind: ResourceKind, obj: UpstreamObject) -> Incoming {
        let stored = Stored::of(codec, kind, &obj);
        let meta = obj.metadata;
        // Kept as text until used: a relist holds every Service's until it
        // completes, and a decoded value takes several times the memory.
        let body = || obj.body.into_text();
        let once = match kind {
            ResourceKind::Services => Some(Box::new(Once {
                body: body(),
                labels: None,
                annotations: meta.annotations,
            })),
            ResourceKind::Nodes => Some(Box::new(Once {
                body: body(),
                labels: meta.labels,
                annotations: None,
            })),
            ResourceKind::ServiceCidrs => Some(Box::new(Once {
                body: body(),
                labels: None,
                annotations: None,
            })),
            ResourceKind::Endpoints | ResourceKind::EndpointSlices => None,
        };
        Incoming { stored, once }
    }
}

impl Stored {
    /// What the writer keeps of `obj` (the object itself only where views
    /// are recomputed).
    pub(super) fn of(codec: &Codec, kind: ResourceKind, obj: &UpstreamObject) -> Stored {
        let keep_raw = matches!(kind, ResourceKind::Endpoints | ResourceKind::EndpointSlices);
        let raw = || match obj.body.wire() {
            // Kept as it came: writing the value out as JSON was a large
            // part of taking in a change.
            Some(wire) => codec.pack(Family::upstream_protobuf(kind), wire),
            None => codec.pack(Family::upstream(kind), obj.body.json().as_bytes()),
        };
        Stored {
            rv: Rv::of(obj.upstream_rv()),
            raw: keep_raw.then(raw),
            service: (kind == ResourceKind::EndpointSlices)
                .then(|| slice_service(obj))
                .flatten(),
        }
    }

    /// An object known only from what is served (restored from a snapshot).
    pub(super) fn unknown() -> Stored {
        Stored {
            rv: Rv::UNKNOWN,
            raw: None,
            service: None,
        }
    }

    /// The kept object (Endpoints and EndpointSlices) as JSON.
    pub(super) fn value(&self) -> Option<Value> {
        self.decoded().map(Decoded::into_value)
    }

    /// The kept object as it reads: an EndpointSlice kept as protobuf as its
    /// message, anything else as JSON.
    pub(super) fn decoded(&self) -> Option<Decoded> {
        let raw = self.raw.as_ref()?.try_unpack()?;
        Some(parse(raw))
    }
}

/// An object the API server sent, in protobuf (which begins with its magic
/// bytes) or JSON; it was read once when it arrived, so a failure here is
/// not expected: it yields an empty object.
fn parse(raw: bytes::Bytes) -> Decoded {
    let read = if raw.starts_with(protobuf::MAGIC) {
        protobuf::to_json::object(raw).ok()
    } else {
        serde_json::from_slice(&raw).ok().map(Decoded::Value)
    };
    read.unwrap_or_else(|| Decoded::Value(Value::Object(Map::new())))
}

/// `ns/service` of an EndpointSlice, from its `kubernetes.io/service-name` label.
fn slice_service(obj: &UpstreamObject) -> Option<Arc<str>> {
    let svc = obj.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some(object_key(obj.metadata.namespace.as_deref(), svc).into())
}

#[cfg(test)]
mod tests {
    use super::Rv;

    #[test]
    fn versions_compare_as_the_text_they_are() {
        assert_eq!(Rv::of("4711"), Rv::of("4711"));
        assert_ne!(Rv::of("4711"), Rv::of("4712"));
        // Opaque strings: equal numbers written differently are other versions.
        assert_ne!(Rv::of("0100"), Rv::of("100"));
        assert_ne!(Rv::of("+100"), Rv::of("100"));
        assert_eq!(Rv::of("0"), Rv::of("0"));
        assert_ne!(Rv::of("0"), Rv::of("1"));
        assert_eq!(Rv::of("a1b2"), Rv::of("a1b2"));
        assert_ne!(Rv::of("a1b2"), Rv::of("a1b3"));
        assert_ne!(
            Rv::of("99999999999999999999"),
            Rv::of("99999999999999999998")
        );
        // Past 2^63 a number is kept as a digest: still exact for equality.
        assert_eq!(Rv::of("9223372036854775808"), Rv::of("9223372036854775808"));
        assert_ne!(Rv::of("9223372036854775808"), Rv::of("9223372036854775809"));
        assert_eq!(Rv::of(""), Rv::UNKNOWN);
        assert_ne!(Rv::of("18446744073709551615"), Rv::UNKNOWN);
    }
}
