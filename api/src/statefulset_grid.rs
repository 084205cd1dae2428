//! `StatefulSetGrid` (`ssg`): one StatefulSet per site.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ClusterStatus, GridTemplates, Template};
use crate::keys::{GridUniqKey, SiteName, TemplateName};

/// The desired state of a StatefulSetGrid: a StatefulSet template run once per site.
// Two `printcolumn(...)` entries of the same type look like a repeated
// attribute to clippy; each is a separate column.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "superedge.io",
    version = "v1",
    kind = "StatefulSetGrid",
    plural = "statefulsetgrids",
    shortname = "ssg",
    namespaced,
    status = "StatefulSetGridStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "A StatefulSet template run once per site (NodeUnit).",
    printcolumn(
        name = "Sites",
        type_ = "integer",
        json_path = ".status.sites",
        description = "Sites with a StatefulSet"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readySites",
        description = "Sites whose StatefulSet has all replicas available"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetGridSpec {
    /// The node label key whose distinct values are the sites.
    pub grid_uniq_key: GridUniqKey,
    /// The StatefulSet spec every site runs unless `templates` says otherwise.
    pub template: StatefulSetSpec,
    /// Named alternative StatefulSet specs, for per-site canaries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub template_pool: BTreeMap<TemplateName, Template<StatefulSetSpec>>,
    /// The `templatePool` entry each site runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub templates: BTreeMap<SiteName, TemplateName>,
    /// The template for sites not in `templates`; absent or `"default"` means `template`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_template_name: Option<TemplateName>,
    /// Whether `templatePool` entries no site uses are removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_delete_unused_template: Option<bool>,
}

/// What the controller observed, per site.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetGridStatus {
    /// Each site's StatefulSet status (replicas, readyReplicas, updatedReplicas,
    /// availableReplicas, conditions), keyed by site as in SuperEdge.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub states: BTreeMap<SiteName, StatefulSetStatus>,
    /// How many sites have a StatefulSet (for `kubectl get ssg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<i32>,
    /// How many sites have all their replicas available (for `kubectl get ssg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_sites: Option<i32>,
    /// Multi-cluster (control cluster, `superedge.io/fed: "yes"`): each
    /// managed cluster's own report, kept apart by cluster name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, ClusterStatus<StatefulSetStatus>>,
    /// Multi-cluster conditions: `ClustersReachable`, `SitesUnique`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl GridTemplates for StatefulSetGridSpec {
    type Spec = StatefulSetSpec;

    fn template(&self) -> &StatefulSetSpec {
        &self.template
    }
    fn template_pool(&self) -> &BTreeMap<TemplateName, Template<StatefulSetSpec>> {
        &self.template_pool
    }
    fn templates(&self) -> &BTreeMap<SiteName, TemplateName> {
        &self.templates
    }
    fn default_template_name(&self) -> Option<&TemplateName> {
        self.default_template_name.as_ref()
    }
}
