//! The object type the upstream reflectors decode into: the raw JSON as the
//! API server sent it, plus the parsed metadata kube-runtime's watcher needs.

use std::{borrow::Cow, sync::Arc};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    core::{ApiResource, DynamicResourceScope},
    Resource,
};
use serde::{de::Error as _, Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One object as received from the API server.
///
/// The JSON is kept verbatim (compact, in the server's key order) so the
/// projector can re-derive views from it; only `metadata` is parsed up front
/// because the watcher tracks resourceVersions through it.
#[derive(Clone, Debug)]
pub struct UpstreamObject {
    /// Parsed metadata (name, namespace, resourceVersion, ...).
    pub metadata: ObjectMeta,
    /// The whole object as JSON text.
    pub raw: Arc<RawValue>,
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
            metadata: ObjectMeta,
        }
        let raw: Box<RawValue> = Box::deserialize(deserializer)?;
        let meta: MetaOnly = serde_json::from_str(raw.get()).map_err(D::Error::custom)?;
        Ok(UpstreamObject {
            metadata: meta.metadata,
            raw: Arc::from(raw),
        })
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
        assert!(o.raw.get().contains("\"subsets\":[]"));
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
}
