//! A cached object as served: encoded once, plus what selectors need.

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Map, Value};
use sitegrid_apimachinery::protobuf::{self, EncodeError};

use super::{
    encode::{encode_body, Encoded},
    kind::{ApiVersion, Served},
};
use crate::upstream::object_key;

/// One object in a resource's served state, at one proxy resourceVersion.
#[derive(Debug)]
pub struct View {
    /// `ns/name` or `name`: the store key, in kube-apiserver's list order.
    pub key: String,
    /// Namespace (None for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
    /// `metadata.labels`, for label selectors.
    pub labels: ViewLabels,
    /// `spec.unschedulable` (nodes' extra field selector).
    pub unschedulable: bool,
    /// The proxy resourceVersion this state was committed at.
    pub rv: u64,
    /// The body in the version the upstream serves (the cache's native version).
    body: Encoded,
    /// The body in the other EndpointSlice version, converted on first use.
    other: OnceLock<Encoded>,
    /// The protobuf message per served API version, encoded on first use.
    protobuf: [OnceLock<Bytes>; 2],
}

impl View {
    /// Encodes `obj` (a full object as JSON) at resourceVersion `rv`.
    pub fn new(obj: &Map<String, Value>, rv: u64) -> View {
        let meta = obj.get("metadata");
        let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
        let namespace = text("namespace")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let name = text("name").unwrap_or_default().to_owned();
        let labels = ViewLabels::from_json(meta.and_then(|m| m.get("labels")));
        let unschedulable = obj
            .get("spec")
            .and_then(|s| s.get("unschedulable"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        View {
            key: object_key(namespace.as_deref(), &name),
            namespace,
            name,
            labels,
            unschedulable,
            rv,
            body: encode_body(obj, rv),
            other: OnceLock::new(),
            protobuf: Default::default(),
        }
    }

    /// The same object at another resourceVersion (a DELETED event's copy).
    pub fn with_rv(&self, rv: u64) -> View {
        View {
            key: self.key.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            labels: self.labels.clone(),
            unschedulable: self.unschedulable,
            rv,
            body: self.body.with_rv(rv),
            other: OnceLock::new(),
            protobuf: Default::default(),
        }
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
            match value {
                Value::Object(map) => encode_body(&map, self.rv),
                _ => self.body.clone(),
            }
        })
    }

    /// The protobuf message of this state as `served` (its JSON body in
    /// `native`'s terms converted once, then shared by every client).
    pub fn message(&self, served: Served, native: ApiVersion) -> Result<&Bytes, EncodeError> {
        let slot = &self.protobuf[served.version.index()];
        if let Some(bytes) = slot.get() {
            return Ok(bytes);
        }
        let body = self.body(served.version, native).bytes();
        let encoded = Bytes::from(protobuf::message(served.message(), body)?);
        // A racing encoder may have won: both encodings are equal.
        Ok(slot.get_or_init(|| encoded))
    }

    /// Its JSON body in the native version, with its resourceVersion.
    pub fn native_body(&self) -> &Bytes {
        self.body.bytes()
    }

    /// Its JSON body in the native version, parsed.
    pub fn native_body_value(&self) -> Value {
        self.body.to_value()
    }

    /// The size of its JSON body in the native version.
    pub fn body_len(&self) -> usize {
        self.body.bytes().len()
    }

    /// A field for field selectors, as kube-apiserver exposes it.
    pub fn field(&self, field: &str) -> Option<String> {
        match field {
            "metadata.name" => Some(self.name.clone()),
            "metadata.namespace" => Some(self.namespace.clone().unwrap_or_default()),
            "spec.unschedulable" => Some(self.unschedulable.to_string()),
            _ => None,
        }
    }
}

/// An object's labels, sorted by key in one allocation: a `BTreeMap` would
/// cost a ~500-byte node even for one label, on every cached object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewLabels(Box<[(Box<str>, Box<str>)]>);

impl ViewLabels {
    /// Reads `metadata.labels` (string values only).
    pub fn from_json(labels: Option<&Value>) -> ViewLabels {
        let mut pairs: Vec<(Box<str>, Box<str>)> = labels
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        pairs.sort();
        ViewLabels(pairs.into_boxed_slice())
    }
}

impl sitegrid_apimachinery::selector::Labels for ViewLabels {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }
}
