//! The `site.superedge.io/v1alpha2` API of SuperEdge's site-manager: sites as
//! resources. A [`NodeUnit`] is a site (a set of nodes, by name or by
//! selector, and what its nodes carry); a [`NodeGroup`] is a set of units
//! whose name is the node label key (`{group}={unit}`) that grids use as
//! `gridUniqKey`. Field for field as site-manager serializes them, so its
//! users' objects apply unchanged.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelectorRequirement};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of NodeUnit and NodeGroup.
pub const GROUP: &str = "site.superedge.io";
/// Their API version.
pub const VERSION: &str = "v1alpha2";
/// The value of the `{unit}` label every member node carries (site-manager's
/// `NodeUnitSuperedge`).
pub const UNIT_LABEL_VALUE: &str = "nodeunits.superedge.io";
/// The value of the `{group}` label on a NodeUnit that belongs to that group
/// (site-manager's `NodeGroupSuperedge`).
pub const GROUP_LABEL_VALUE: &str = "nodegroups.superedge.io";

/// What kind of nodes a unit holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeUnitType {
    /// Edge nodes (the default).
    #[default]
    Edge,
    /// Cloud nodes.
    Cloud,
    /// Control-plane nodes.
    Master,
    /// Anything else (the default unit `unit-node-all`).
    Other,
}

/// Which nodes (or, in a NodeGroup, which units) are selected: site-manager's
/// `Selector`, a label selector plus annotations that must all be present.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// Labels that must all be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements (In, NotIn, Exists, DoesNotExist) that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Annotations that must all be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What every member node of a unit carries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetNode {
    /// Labels set on every member node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations set on every member node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Taints set on every member node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

impl SetNode {
    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.taints.is_empty()
    }
}

/// A site: the nodes named in `nodes` and those `selector` matches.
// Several `printcolumn(...)` entries look like a repeated attribute to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "site.superedge.io",
    version = "v1alpha2",
    kind = "NodeUnit",
    plural = "nodeunits",
    shortname = "nu",
    status = "NodeUnitStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "A site: a set of nodes, by name or selector, and the labels, annotations and taints they carry.",
    printcolumn(name = "TYPE", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "READY", type_ = "string", json_path = ".status.readyRate"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "DELETING",
        type_ = "date",
        json_path = ".metadata.deletionTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodeUnitSpec {
    /// edge (default), cloud, master or other.
    #[serde(default, rename = "type")]
    pub unit_type: NodeUnitType,
    /// Whether the unit's nodes are cordoned (no new pods).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
    /// Nodes that belong to the unit by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Nodes that belong to the unit by their labels (and annotations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Selector>,
    /// What every member node carries.
    #[serde(default, skip_serializing_if = "SetNode::is_empty")]
    pub set_node: SetNode,
    /// site-manager's autonomy level (L3, L4, L5): accepted and kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autonomy_level: Option<String>,
}

/// Which member nodes are Ready.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeUnitStatus {
    /// `ready/total`, e.g. `3/3`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready_rate: String,
    /// Member nodes whose Ready condition is True, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready_nodes: Vec<String>,
    /// The other member nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready_nodes: Vec<String>,
    /// `Conflict` (a node claimed by another unit of the same group, or a
    /// label, annotation or taint someone else set) and `Synced`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A workload bound to a NodeGroup (site-manager's field: accepted and kept).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// The workload's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its kind (Deployment, StatefulSet, …).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub workload_type: String,
    /// Its label selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Selector>,
}

/// A set of units; its name is the node label key `{group}={unit}`.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "site.superedge.io",
    version = "v1alpha2",
    kind = "NodeGroup",
    plural = "nodegroups",
    shortname = "ng",
    status = "NodeGroupStatus",
    derive = "Default",
    derive = "PartialEq",
    doc = "A set of NodeUnits; member nodes carry the label {group}={unit}, the key grids use as gridUniqKey.",
    printcolumn(name = "UNITS", type_ = "integer", json_path = ".status.unitNumber"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupSpec {
    /// Units that belong to the group by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_units: Vec<String>,
    /// Units that belong to the group by their labels (and annotations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Selector>,
    /// Node label keys: one unit per distinct combination of their values
    /// among the nodes that carry all of them, made and owned by the group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto_find_node_keys: Vec<String>,
    /// Workloads bound to the group (accepted and kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workload: Vec<Workload>,
}

/// The units of a group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    /// How many units belong to the group.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unit_number: i32,
    /// The units, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_units: Vec<String>,
    /// `Conflict` when two of its units claim the same node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crds_are_cluster_scoped_with_site_managers_names_and_columns() {
        use kube::CustomResourceExt;
        for (crd, kind, plural, short, columns) in [
            (
                NodeUnit::crd(),
                "NodeUnit",
                "nodeunits",
                "nu",
                vec!["TYPE", "READY", "AGE", "DELETING"],
            ),
            (
                NodeGroup::crd(),
                "NodeGroup",
                "nodegroups",
                "ng",
                vec!["UNITS", "AGE"],
            ),
        ] {
            assert_eq!(crd.spec.group, GROUP);
            assert_eq!(crd.spec.scope, "Cluster");
            assert_eq!(crd.spec.names.kind, kind);
            assert_eq!(crd.spec.names.plural, plural);
            assert_eq!(crd.spec.names.short_names, Some(vec![short.to_owned()]));
            let [version] = &crd.spec.versions[..] else {
                panic!("one version")
            };
            assert_eq!(version.name, VERSION);
            assert!(version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some()));
            let names: Vec<&str> = version
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(names, columns);
        }
    }

    /// The seed's NodeUnit and NodeGroup (000_…, "将边缘节点分组") round-trip.
    #[test]
    fn the_seeds_site_objects_read_as_site_manager_writes_them() {
        let unit: NodeUnit = serde_json::from_value(serde_json::json!({
            "apiVersion": "site.superedge.io/v1alpha2",
            "kind": "NodeUnit",
            "metadata": {"name": "beijing"},
            "spec": {
                "type": "edge",
                "unschedulable": false,
                "nodes": ["bj-1", "bj-2", "bj-3"],
                "setNode": {"labels": {"location": "beijing"}},
                "autonomyLevel": "L3",
            }
        }))
        .unwrap();
        assert_eq!(unit.spec.unit_type, NodeUnitType::Edge);
        assert_eq!(unit.spec.nodes, ["bj-1", "bj-2", "bj-3"]);
        assert_eq!(unit.spec.set_node.labels["location"], "beijing");
        assert_eq!(unit.spec.autonomy_level.as_deref(), Some("L3"));
        let back = serde_json::to_value(&unit.spec).unwrap();
        assert_eq!(back["type"], "edge");
        assert_eq!(back["autonomyLevel"], "L3");
        assert!(
            back.get("unschedulable").is_none(),
            "false is omitted as Go does"
        );

        let group: NodeGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "site.superedge.io/v1alpha2",
            "kind": "NodeGroup",
            "metadata": {"name": "location"},
            "spec": {"nodeUnits": ["beijing", "guangzhou"], "autoFindNodeKeys": ["zone"],
                     "workload": [{"name": "w", "type": "Deployment"}]}
        }))
        .unwrap();
        assert_eq!(group.spec.node_units, ["beijing", "guangzhou"]);
        assert_eq!(group.spec.workload[0].workload_type, "Deployment");
        // A unit without a type is an edge unit.
        let bare: NodeUnitSpec = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(bare.unit_type, NodeUnitType::Edge);
    }
}
