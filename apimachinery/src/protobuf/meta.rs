//! `meta.k8s.io/v1` messages from their JSON (k8s-openapi) forms.
//!
//! Kubernetes' Go code writes every field of a value type (a `string`, an
//! `int64`, a struct) even when it is empty, and a pointer field only when it
//! is set. The conversions here do the same (`Some(default)` for a value
//! field the JSON left out), so a decoded answer equals kube-apiserver's
//! field by field. Fields Kubernetes added after 1.20 are written only when
//! present, as a 1.20 server (which does not know them) writes them not at all.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as json;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;

/// A Go value-type string: always written.
pub(super) fn s(v: Option<String>) -> Option<String> {
    Some(v.unwrap_or_default())
}

/// A `metav1.Time` value: always written; the zero time as an empty message.
pub(super) fn time(t: Option<json::Time>) -> Option<pb::Time> {
    Some(t.map(|t| timestamp(&t)).unwrap_or_default())
}

/// A `*metav1.Time`: written when set.
pub(super) fn time_ptr(t: Option<json::Time>) -> Option<pb::Time> {
    t.map(|t| timestamp(&t))
}

fn timestamp(t: &json::Time) -> pb::Time {
    pb::Time {
        seconds: Some(t.0.as_second()),
        nanos: Some(t.0.subsec_nanosecond()),
    }
}

/// `ObjectMeta`.
pub(super) fn object_meta(m: json::ObjectMeta) -> pb::ObjectMeta {
    pb::ObjectMeta {
        name: s(m.name),
        generate_name: s(m.generate_name),
        namespace: s(m.namespace),
        self_link: s(m.self_link),
        uid: s(m.uid),
        resource_version: s(m.resource_version),
        generation: Some(m.generation.unwrap_or_default()),
        creation_timestamp: time(m.creation_timestamp),
        deletion_timestamp: time_ptr(m.deletion_timestamp),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        owner_references: m
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(owner_reference)
            .collect(),
        finalizers: m.finalizers.unwrap_or_default(),
        managed_fields: m
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .map(managed_fields_entry)
            .collect(),
    }
}

fn owner_reference(o: json::OwnerReference) -> pb::OwnerReference {
    pb::OwnerReference {
        api_version: Some(o.api_version),
        kind: Some(o.kind),
        name: Some(o.name),
        uid: Some(o.uid),
        controller: o.controller,
        block_owner_deletion: o.block_owner_deletion,
    }
}

fn managed_fields_entry(e: json::ManagedFieldsEntry) -> pb::ManagedFieldsEntry {
    pb::ManagedFieldsEntry {
        manager: s(e.manager),
        operation: s(e.operation),
        api_version: s(e.api_version),
        time: time_ptr(e.time),
        fields_type: s(e.fields_type),
        // The raw JSON of the field set, as the API server keeps it.
        fields_v1: e.fields_v1.map(|f| pb::FieldsV1 {
            raw: Some(serde_json::to_vec(&f.0).unwrap_or_default()),
        }),
        // Added in 1.22.
        subresource: e.subresource,
    }
}

/// `metav1.Condition` (Service status).
pub(super) fn condition(c: json::Condition) -> pb::Condition {
    pb::Condition {
        r#type: Some(c.type_),
        status: Some(c.status),
        observed_generation: Some(c.observed_generation.unwrap_or_default()),
        last_transition_time: time(Some(c.last_transition_time)),
        reason: Some(c.reason),
        message: Some(c.message),
    }
}

/// `ListMeta` of a list answer.
pub fn list_meta(resource_version: &str, continue_: &str, remaining: Option<i64>) -> pb::ListMeta {
    pb::ListMeta {
        self_link: Some(String::new()),
        resource_version: Some(resource_version.to_owned()),
        r#continue: Some(continue_.to_owned()),
        remaining_item_count: remaining,
    }
}
