//! `discovery.k8s.io` EndpointSlices, `v1` and `v1beta1`, from their JSON.
//!
//! One serde form reads both versions (they differ only in how an endpoint
//! names its topology); k8s-openapi has no `v1beta1` types any more. Fields
//! are written as Go writes them (see [`super::meta`]): the slice's
//! `addressType` and each endpoint's `conditions` are values, everything else
//! of an endpoint and of a port is a pointer.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::api::discovery::{v1, v1beta1};
use serde::{Deserialize, Deserializer};

use super::core::object_reference;
use super::meta::{object_meta, s};

/// An EndpointSlice of either version, as JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Slice {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    address_type: Option<String>,
    #[serde(default, deserialize_with = "null_is_empty")]
    endpoints: Vec<Endpoint>,
    #[serde(default, deserialize_with = "null_is_empty")]
    ports: Vec<Port>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Endpoint {
    #[serde(default, deserialize_with = "null_is_empty")]
    addresses: Vec<String>,
    #[serde(default)]
    conditions: Option<Conditions>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    target_ref: Option<ObjectReference>,
    /// `v1beta1`.
    #[serde(default)]
    topology: Option<BTreeMap<String, String>>,
    /// `v1`.
    #[serde(default)]
    deprecated_topology: Option<BTreeMap<String, String>>,
    #[serde(default)]
    node_name: Option<String>,
    /// `v1`.
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    hints: Option<Hints>,
}

#[derive(Debug, Default, Deserialize)]
struct Conditions {
    #[serde(default)]
    ready: Option<bool>,
    #[serde(default)]
    serving: Option<bool>,
    #[serde(default)]
    terminating: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Hints {
    #[serde(default, deserialize_with = "null_is_empty")]
    for_zones: Vec<Named>,
    #[serde(default, deserialize_with = "null_is_empty")]
    for_nodes: Vec<Named>,
}

#[derive(Debug, Default, Deserialize)]
struct Named {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Port {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    port: Option<i32>,
    #[serde(default)]
    app_protocol: Option<String>,
}

/// A list Kubernetes may write as `null`.
fn null_is_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// `discovery.k8s.io/v1` EndpointSlice.
pub(super) fn slice_v1(slice: Slice) -> v1::EndpointSlice {
    v1::EndpointSlice {
        metadata: Some(object_meta(slice.metadata)),
        address_type: s(slice.address_type),
        endpoints: slice
            .endpoints
            .into_iter()
            .map(|e| v1::Endpoint {
                addresses: e.addresses,
                conditions: Some(conditions_v1(e.conditions)),
                hostname: e.hostname,
                target_ref: e.target_ref.map(object_reference),
                deprecated_topology: e.deprecated_topology.unwrap_or_default(),
                node_name: e.node_name,
                zone: e.zone,
                hints: e.hints.map(|h| v1::EndpointHints {
                    for_zones: h
                        .for_zones
                        .into_iter()
                        .map(|z| v1::ForZone { name: Some(z.name) })
                        .collect(),
                    for_nodes: h
                        .for_nodes
                        .into_iter()
                        .map(|n| v1::ForNode { name: Some(n.name) })
                        .collect(),
                }),
            })
            .collect(),
        ports: slice
            .ports
            .into_iter()
            .map(|p| v1::EndpointPort {
                name: p.name,
                protocol: p.protocol,
                port: p.port,
                app_protocol: p.app_protocol,
            })
            .collect(),
    }
}

fn conditions_v1(c: Option<Conditions>) -> v1::EndpointConditions {
    let c = c.unwrap_or_default();
    v1::EndpointConditions {
        ready: c.ready,
        serving: c.serving,
        terminating: c.terminating,
    }
}

/// `discovery.k8s.io/v1beta1` EndpointSlice.
pub(super) fn slice_v1beta1(slice: Slice) -> v1beta1::EndpointSlice {
    v1beta1::EndpointSlice {
        metadata: Some(object_meta(slice.metadata)),
        address_type: s(slice.address_type),
        endpoints: slice
            .endpoints
            .into_iter()
            .map(|e| {
                let c = e.conditions.unwrap_or_default();
                v1beta1::Endpoint {
                    addresses: e.addresses,
                    conditions: Some(v1beta1::EndpointConditions {
                        ready: c.ready,
                        serving: c.serving,
                        terminating: c.terminating,
                    }),
                    hostname: e.hostname,
                    target_ref: e.target_ref.map(object_reference),
                    topology: e.topology.unwrap_or_default(),
                    node_name: e.node_name,
                    hints: e.hints.map(|h| v1beta1::EndpointHints {
                        for_zones: h
                            .for_zones
                            .into_iter()
                            .map(|z| v1beta1::ForZone { name: Some(z.name) })
                            .collect(),
                        for_nodes: h
                            .for_nodes
                            .into_iter()
                            .map(|n| v1beta1::ForNode { name: Some(n.name) })
                            .collect(),
                    }),
                }
            })
            .collect(),
        ports: slice
            .ports
            .into_iter()
            .map(|p| v1beta1::EndpointPort {
                name: p.name,
                protocol: p.protocol,
                port: p.port,
                app_protocol: p.app_protocol,
            })
            .collect(),
    }
}
