//! Metadata-only answers (`as=PartialObjectMetadata`, `meta.k8s.io/v1`), as
//! kube-apiserver's response transform makes them: each object becomes
//! `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{…}}`,
//! a list a `PartialObjectMetadataList` keeping the list's resourceVersion
//! and continue token. Encoded per request: metadata clients are few (a
//! site proxy's node proxies, metadata informers).

use bytes::Bytes;
use serde_json::{json, Value};
use sitegrid_apimachinery::Status;

use sitegrid_cache::{Cache, ResourceKind, Served, View};

/// The group/version of the metadata kinds.
pub const API_VERSION: &str = "meta.k8s.io/v1";

/// `view` as a `PartialObjectMetadata`.
pub fn partial(cache: &Cache, view: &View, served: Served) -> Value {
    let mut body = cache.body(view, served).to_value();
    let metadata = body
        .get_mut("metadata")
        .map(Value::take)
        .unwrap_or_else(|| json!({}));
    json!({"kind": "PartialObjectMetadata", "apiVersion": API_VERSION, "metadata": metadata})
}

/// A `PartialObjectMetadataList` of `items`, with the list's `meta`
/// (resourceVersion, continue; kube-apiserver does not carry
/// remainingItemCount over).
pub fn list(
    cache: &Cache,
    items: &[std::sync::Arc<View>],
    served: Served,
    mut meta: Value,
) -> Bytes {
    if let Some(m) = meta.as_object_mut() {
        m.remove("remainingItemCount");
    }
    let items: Vec<Value> = items.iter().map(|v| partial(cache, v, served)).collect();
    let list = json!({"kind": "PartialObjectMetadataList", "apiVersion": API_VERSION,
        "metadata": meta, "items": items});
    let mut out = serde_json::to_vec(&list).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

/// A list asked for as one object: kube-apiserver's 406.
pub fn not_an_object(kind: ResourceKind) -> Status {
    Status::not_acceptable(format!(
        "you requested PartialObjectMetadata, but the requested object is a list (*{}List)",
        internal_type(kind)
    ))
}

/// One object asked for as a list: kube-apiserver's 406.
pub fn not_a_list(kind: ResourceKind) -> Status {
    Status::not_acceptable(format!(
        "you requested PartialObjectMetadataList, but the requested object is not a list (*{})",
        internal_type(kind)
    ))
}

/// The Go type kube-apiserver names in those messages (its internal version).
fn internal_type(kind: ResourceKind) -> String {
    let package = match kind {
        ResourceKind::EndpointSlices => "discovery",
        _ => "core",
    };
    format!("{package}.{}", kind.kind())
}
