//! Metadata-only responses, as kube-apiserver converts any resource when the
//! `Accept` header asks `as=PartialObjectMetadata[List]` in `meta.k8s.io/v1`
//! (negotiated in `super::negotiate`; kube-rs' `Api<PartialObjectMeta<K>>`
//! and `metadata_watcher`, client-go's metadata informers):
//!
//! - an object (GET, watch event): `{"kind":"PartialObjectMetadata",
//!   "apiVersion":"meta.k8s.io/v1","metadata":{…the whole ObjectMeta…}}`;
//! - a list: `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1",
//!   "metadata":{"resourceVersion":…[,"continue":…]},"items":[<objects as above>]}`,
//!   `remainingItemCount` dropped (kube-apiserver copies only selfLink,
//!   resourceVersion and continue);
//! - a BOOKMARK: the bookmark's object converted alike,
//!   `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":
//!   {"resourceVersion":"N","creationTimestamp":null}}` (1.35: no null
//!   creationTimestamp; a watch-list's end: the initial-events-end annotation);
//! - the wrong one for the verb (`…List` on an object, the object form on a
//!   list): `406 NotAcceptable` naming the internal Go type.
//!
//! Everything else (selectors, resourceVersions, pagination, 410) is the
//! full objects' path; only the encoding differs. kube-apiserver also
//! converts to `meta.k8s.io/v1beta1`, which no current client asks for and
//! `sitegrid_apimachinery::negotiate` passes over.

use bytes::Bytes;
use sitegrid_apimachinery::Status;

use super::list::Page;
use super::object::{push_json_str, Obj};
use super::resource::{ResourceType, APPS_GROUP, DISCOVERY_GROUP, GRID_GROUP, NETWORKING_GROUP};

/// Append `obj` as a `PartialObjectMetadata`.
pub(crate) fn push_object(obj: &Obj, out: &mut Vec<u8>) {
    out.extend_from_slice(
        b"{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":",
    );
    out.extend_from_slice(obj.meta_json());
    out.push(b'}');
}

/// A GET's body: the object's metadata and a newline.
pub(crate) fn object(obj: &Obj) -> Bytes {
    let mut out = Vec::with_capacity(obj.meta_json().len() + 96);
    push_object(obj, &mut out);
    out.push(b'\n');
    Bytes::from(out)
}

/// A LIST page as a `PartialObjectMetadataList`.
pub(crate) fn list(page: &Page) -> Bytes {
    let size: usize = page.items.iter().map(|o| o.meta_json().len() + 96).sum();
    let mut out = Vec::with_capacity(size + 256);
    out.extend_from_slice(
        b"{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"",
    );
    out.extend_from_slice(page.rv.to_string().as_bytes());
    out.push(b'"');
    if let Some(token) = &page.continue_token {
        out.extend_from_slice(b",\"continue\":");
        push_json_str(token, &mut out);
    }
    out.extend_from_slice(b"},\"items\":[");
    for (n, obj) in page.items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        push_object(obj, &mut out);
    }
    out.extend_from_slice(b"]}\n");
    Bytes::from(out)
}

/// A watch frame `{"type":ty,"object":<PartialObjectMetadata>}`.
pub(crate) fn frame(ty: &str, obj: &Obj) -> Bytes {
    let mut out = Vec::with_capacity(obj.meta_json().len() + 128);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    push_object(obj, &mut out);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// A BOOKMARK frame for a metadata watch, its object's `metadata` given
/// (`super::object::bookmark_metadata`).
pub(crate) fn bookmark_frame(metadata: &str) -> Bytes {
    let mut out = Vec::with_capacity(160);
    out.extend_from_slice(
        b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":",
    );
    out.extend_from_slice(metadata.as_bytes());
    out.extend_from_slice(b"}}\n");
    Bytes::from(out)
}

/// The `406` for a conversion that does not fit the verb: `…List` asked for
/// on an object (`list_asked`), or the object form on a list.
pub(crate) fn not_acceptable(rt: &ResourceType, list_asked: bool) -> Status {
    let message = if list_asked {
        format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type(rt, false)
        )
    } else {
        format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type(rt, true)
        )
    };
    Status::not_acceptable(message)
}

/// The internal Go type kube-apiserver names in a 406: `*core.Node`,
/// `*discovery.EndpointSliceList`; CRDs (the grids) are unstructured.
fn go_type(rt: &ResourceType, list: bool) -> String {
    let package = match rt.group {
        DISCOVERY_GROUP => "discovery",
        NETWORKING_GROUP => "networking",
        APPS_GROUP => "apps",
        GRID_GROUP => {
            return if list {
                "*unstructured.UnstructuredList".into()
            } else {
                "*unstructured.Unstructured".into()
            }
        }
        // Core, and events.k8s.io (stored as core Events).
        _ => "core",
    };
    let suffix = if list { "List" } else { "" };
    format!("*{package}.{}{suffix}", rt.kind)
}

#[cfg(test)]
mod tests {
    use super::super::resource::Resources;
    use super::super::version::Profile;
    use super::*;

    #[test]
    fn frames_and_refusals() {
        assert_eq!(
            bookmark_frame(&super::super::object::bookmark_metadata(434, true, false)),
            Bytes::from_static(
                b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"434\",\"creationTimestamp\":null}}}\n"
            )
        );
        let r = Resources::new(&Profile::v1_20("v1"));
        let nodes = r.by_id("nodes").unwrap();
        assert_eq!(
            not_acceptable(nodes, true).message,
            "you requested PartialObjectMetadataList, but the requested object is not a list (*core.Node)"
        );
        assert_eq!(
            not_acceptable(nodes, false).message,
            "you requested PartialObjectMetadata, but the requested object is a list (*core.NodeList)"
        );
        assert_eq!(not_acceptable(nodes, false).code, 406);
        let slices = r.by_id("endpointslices").unwrap();
        assert_eq!(go_type(slices, true), "*discovery.EndpointSliceList");
        let grids = r.by_id("servicegrids").unwrap();
        assert_eq!(go_type(grids, false), "*unstructured.Unstructured");
    }
}
