//! What the writer takes from an upstream object: what it keeps between
//! events ([`Stored`]) and what it uses once, on arrival ([`Once`]).

use std::{collections::BTreeMap, sync::Arc};

use serde_json::{value::RawValue, Map, Value};

use crate::{
    cache::{kind::ResourceKind, topology::SERVICE_NAME_LABEL},
    upstream::{object_key, UpstreamObject},
};

/// What the writer keeps of an upstream object between events.
pub(super) struct Stored {
    /// The upstream resourceVersion: a relist skips objects that did not change.
    pub(super) rv: Box<str>,
    /// Endpoints and EndpointSlices: the raw JSON, LZ4-compressed against
    /// the kind's [`Dictionary`], from which their views are recomputed when
    /// a node moves site or a Service's topology or another of its slices
    /// changes.
    pub(super) raw: Option<Box<[u8]>>,
    /// For an EndpointSlice: the `ns/service` it belongs to.
    pub(super) service: Option<String>,
}

/// Services and Nodes: what their arrival contributes, then dropped (their
/// views are made once, from the object itself).
pub(super) struct Once {
    /// The object as the API server sent it.
    pub(super) raw: Arc<RawValue>,
    /// Node labels.
    pub(super) labels: Option<BTreeMap<String, String>>,
    /// Service annotations (for `topologyKeys`).
    pub(super) annotations: Option<BTreeMap<String, String>>,
}

impl Once {
    /// The object as JSON, for its view.
    pub(super) fn value(&self) -> Value {
        parse(self.raw.get().as_bytes())
    }
}

/// An upstream object as the writer takes it in.
pub(super) struct Incoming {
    /// What is kept between events.
    pub(super) stored: Stored,
    /// Services and Nodes: what is used once.
    pub(super) once: Option<Once>,
}

impl Incoming {
    /// Takes `obj` apart into what is kept and what is used once; the parsed
    /// metadata is dropped here, so a relist buffer stays compact.
    pub(super) fn new(kind: ResourceKind, obj: UpstreamObject, dict: &mut Dictionary) -> Incoming {
        let stored = Stored::of(kind, &obj, dict);
        let meta = obj.metadata;
        let once = match kind {
            ResourceKind::Services => Some(Once {
                raw: obj.raw,
                labels: None,
                annotations: meta.annotations,
            }),
            ResourceKind::Nodes => Some(Once {
                raw: obj.raw,
                labels: meta.labels,
                annotations: None,
            }),
            ResourceKind::Endpoints | ResourceKind::EndpointSlices => None,
        };
        Incoming { stored, once }
    }
}

impl Stored {
    /// What the writer keeps of `obj` (raw JSON only where views are recomputed).
    pub(super) fn of(kind: ResourceKind, obj: &UpstreamObject, dict: &mut Dictionary) -> Stored {
        let keep_raw = matches!(kind, ResourceKind::Endpoints | ResourceKind::EndpointSlices);
        Stored {
            rv: obj.upstream_rv().into(),
            raw: keep_raw.then(|| dict.compress(obj.raw.get().as_bytes())),
            service: (kind == ResourceKind::EndpointSlices)
                .then(|| slice_service(obj))
                .flatten(),
        }
    }

    /// An object known only from what is served (restored from a snapshot).
    pub(super) fn unknown() -> Stored {
        Stored {
            rv: "".into(),
            raw: None,
            service: None,
        }
    }

    /// The kept JSON (Endpoints and EndpointSlices), parsed; `dict` is the
    /// one it was compressed against.
    pub(super) fn value(&self, dict: &Dictionary) -> Option<Value> {
        let json = dict.decompress(self.raw.as_ref()?)?;
        Some(parse(&json))
    }
}

/// Text every kept copy of one kind is compressed against: the first
/// object of the kind the writer kept (its last 64 KiB, LZ4's window), for
/// the process's lifetime. Objects of one kind share most of their text
/// (keys, labels, owner references, condition names), so a slice of 10
/// endpoints compresses to about 0.6 KiB instead of 1.1 KiB alone.
#[derive(Debug, Default)]
pub(super) struct Dictionary(Option<Box<[u8]>>);

impl Dictionary {
    /// LZ4's window: a dictionary longer than this is not read.
    const WINDOW: usize = 64 * 1024;

    /// `raw`, compressed (size-prepended); the first call makes the dictionary.
    fn compress(&mut self, raw: &[u8]) -> Box<[u8]> {
        let dict = self
            .0
            .get_or_insert_with(|| raw[raw.len().saturating_sub(Self::WINDOW)..].into());
        lz4_flex::block::compress_prepend_size_with_dict(raw, dict).into_boxed_slice()
    }

    /// What [`Dictionary::compress`] compressed.
    fn decompress(&self, blob: &[u8]) -> Option<Vec<u8>> {
        let dict = self.0.as_deref().unwrap_or_default();
        lz4_flex::block::decompress_size_prepended_with_dict(blob, dict).ok()
    }
}

/// JSON the API server sent; it was valid when it arrived (the watcher
/// decoded it), so a failure here is not expected: it yields an empty object.
fn parse(json: &[u8]) -> Value {
    serde_json::from_slice(json).unwrap_or_else(|_| Value::Object(Map::new()))
}

/// `ns/service` of an EndpointSlice, from its `kubernetes.io/service-name` label.
fn slice_service(obj: &UpstreamObject) -> Option<String> {
    let svc = obj.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    Some(object_key(obj.metadata.namespace.as_deref(), svc))
}

#[cfg(test)]
mod tests {
    use super::Dictionary;

    fn slice(i: usize) -> Vec<u8> {
        format!(
            r#"{{"metadata":{{"name":"svc-{i}-abcde","namespace":"default","labels":{{"kubernetes.io/service-name":"svc-{i}"}}}},"addressType":"IPv4","endpoints":[{{"addresses":["10.0.{i}.1"],"conditions":{{"ready":true}},"nodeName":"site-{i}-node-0"}}],"ports":[{{"port":80}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn copies_come_back_as_they_were_and_share_the_first_ones_text() {
        let mut dict = Dictionary::default();
        let alone: usize = (1..200)
            .map(|i| lz4_flex::compress_prepend_size(&slice(i)).len())
            .sum();
        let blobs: Vec<_> = (0..200).map(|i| dict.compress(&slice(i))).collect();
        for (i, blob) in blobs.iter().enumerate() {
            assert_eq!(dict.decompress(blob).unwrap(), slice(i));
        }
        let shared: usize = blobs[1..].iter().map(|b| b.len()).sum();
        assert!(
            shared * 2 < alone,
            "{shared} bytes against the dictionary, {alone} alone"
        );
        assert_eq!(
            Dictionary::default().decompress(&blobs[5]),
            None,
            "needs its dictionary"
        );
    }
}
