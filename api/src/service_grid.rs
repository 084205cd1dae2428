//! `ServiceGrid` (`sg`): one Service whose traffic stays inside the caller's site.

use k8s_openapi::api::core::v1::ServiceSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::keys::GridUniqKey;

/// The desired state of a ServiceGrid: a Service `{name}-svc` with topology
/// keys set to the grid's `gridUniqKey`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "superedge.io",
    version = "v1",
    kind = "ServiceGrid",
    plural = "servicegrids",
    shortname = "sg",
    namespaced,
    status = "ServiceGridStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "A Service whose traffic stays within the caller's site (NodeUnit).",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceGridSpec {
    /// The node label key whose distinct values are the sites.
    pub grid_uniq_key: GridUniqKey,
    /// The spec of the generated Service.
    #[serde(default)]
    pub template: ServiceSpec,
}

/// What the controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceGridStatus {
    /// Conditions of the generated Service (e.g. a failed apply).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
