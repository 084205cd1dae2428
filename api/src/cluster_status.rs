//! One managed cluster's part of a distributed grid's status.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::keys::SiteName;

/// What one managed cluster reported for a distributed grid (in the control
/// cluster's `status.clusters[<cluster>]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus<S> {
    /// The cluster's per-site states, as it reported them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub states: BTreeMap<SiteName, S>,
    /// Whether its heartbeat is recent (`--cluster-grace-period`).
    #[serde(default)]
    pub reachable: bool,
    /// When it last reported, written once it stopped reporting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_report_time: Option<String>,
    /// What went wrong distributing to it, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
