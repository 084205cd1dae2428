//! Dropping the descriptions of the embedded Kubernetes schemas.
//!
//! With every description kept, the DeploymentGrid CRD is about 1.2 MB: a pod
//! template's documentation, twice (`template` and `templatePool`). That is
//! close to etcd's 1.5 MB request limit and far over the 256 KiB that
//! client-side `kubectl apply` can keep in its last-applied annotation. The
//! Kubernetes types are documented upstream (`kubectl explain deployment.spec`),
//! so, like controller-gen's `maxDescLen=0` for embedded types, only the
//! descriptions of the grid's own fields are kept.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// Schema depth whose descriptions are kept: the root (0), `spec`/`status` (1)
/// and their fields (2). Everything deeper is a Kubernetes type.
const KEPT_DEPTH: usize = 2;

/// Removes descriptions deeper than [`KEPT_DEPTH`] from `schema` (at `depth`).
pub(super) fn strip_embedded(schema: &mut JSONSchemaProps, depth: usize) {
    if depth > KEPT_DEPTH {
        schema.description = None;
    }
    let next = depth + 1;
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        strip_embedded(child, next);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => strip_embedded(item, next),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => {
            items.iter_mut().for_each(|item| strip_embedded(item, next))
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &mut schema.additional_properties {
        strip_embedded(values, next);
    }
    for list in [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of] {
        list.iter_mut()
            .flatten()
            .for_each(|s| strip_embedded(s, next));
    }
    if let Some(not) = &mut schema.not {
        strip_embedded(not, next);
    }
}
