//! Multi-cluster distribution of grids (SuperEdge's "fed" on clusternet).
//!
//! The same binary runs in every cluster; which role a grid plays is read
//! from its labels ([`Role`]):
//!
//! - In the **control cluster**, a grid labelled `superedge.io/fed: "yes"` is
//!   an *original*: the grid controller [`distribute`]s it, a copy into every
//!   clusternet dedicated namespace (a namespace labelled
//!   `clusters.clusternet.io/cluster-id`, one per managed cluster, each
//!   reachable or not: the [`fleet`]), and writes on it the per-site status
//!   the managed clusters report ([`aggregate`]).
//! - In a **managed cluster**, the controller finds the control cluster
//!   through the Secret clusternet's agent leaves (`clusternet-system/
//!   parent-cluster`, [`parent`]), watches the copies in its dedicated
//!   namespace there and keeps a local grid per copy while a local node
//!   carries the grid's `gridUniqKey` ([`managed`]); it reports the local
//!   grid's status back on the copy and keeps a heartbeat Lease beside it.
//!
//! Pull, as SuperEdge: the control cluster never needs credentials for the
//! managed clusters. Differences from SuperEdge, each a defect there: copies
//! carry no cross-namespace ownerReference (the garbage collector treats one
//! as absent and deletes the copy) — a finalizer on the original deletes them;
//! the whole spec is propagated (zero values too); one site name in two
//! clusters is kept apart in `status.clusters` instead of overwritten; an
//! unreachable cluster is shown as such; StatefulSetGrid is distributed too.

pub mod aggregate;
pub mod distribute;
pub mod fleet;
pub mod managed;
pub mod object;
pub mod parent;

use std::collections::BTreeMap;

/// Opt-in label on a grid in the control cluster (value `yes`).
pub const FED_LABEL: &str = "superedge.io/fed";
/// Label on a copy in a dedicated namespace (value `yes`).
pub const DIS_LABEL: &str = "superedge.io/dis";
/// Label holding the original's namespace, on copies and on the managed
/// cluster's local grids.
pub const TARGET_NAMESPACE_LABEL: &str = "superedge.io/target-namespace";
/// The label clusternet puts on each managed cluster's dedicated namespace.
pub const CLUSTER_ID_LABEL: &str = "clusters.clusternet.io/cluster-id";
/// The managed cluster's name, on the same namespace.
pub const CLUSTER_NAME_LABEL: &str = "clusters.clusternet.io/cluster-name";
/// Annotation on a copy: the uid of the original it was made from.
pub const ORIGINAL_UID_ANNOTATION: &str = "sitegrid.io/original-uid";
/// Finalizer on an original: its copies are deleted before it goes.
pub const FINALIZER: &str = "sitegrid.io/distributed";
/// Name of the heartbeat Lease a managed cluster keeps in its dedicated namespace.
pub const HEARTBEAT_LEASE: &str = "sitegrid-controller";
/// Key under which the control cluster's own sites appear in `status.clusters`.
pub const LOCAL_CLUSTER: &str = "local";
/// The value of [`FED_LABEL`] and [`DIS_LABEL`] that turns them on.
pub const YES: &str = "yes";

/// What a grid is, for distribution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// An ordinary grid.
    Plain,
    /// In the control cluster: to be distributed.
    Original,
    /// In the control cluster: a copy in a dedicated namespace, for the
    /// managed cluster to pick up (never rendered where it lies).
    Copy {
        /// The original's namespace.
        target_namespace: String,
    },
    /// In a managed cluster: the local grid made from a copy.
    Local {
        /// Its namespace (= the original's).
        target_namespace: String,
    },
}

impl Role {
    /// The role a grid's labels give it.
    pub fn of(labels: Option<&BTreeMap<String, String>>) -> Self {
        let Some(labels) = labels else {
            return Self::Plain;
        };
        let target = labels.get(TARGET_NAMESPACE_LABEL).cloned();
        match (labels.get(DIS_LABEL).map(String::as_str), target) {
            (Some(YES), Some(target_namespace)) => Self::Copy { target_namespace },
            (_, Some(target_namespace)) => Self::Local { target_namespace },
            _ if labels.get(FED_LABEL).map(String::as_str) == Some(YES) => Self::Original,
            _ => Self::Plain,
        }
    }
}

/// The name a managed cluster goes by in status: clusternet's cluster-name
/// label on its dedicated namespace, else its cluster-id, else the
/// namespace's name.
pub fn cluster_name(namespace: &str, labels: Option<&BTreeMap<String, String>>) -> String {
    labels
        .and_then(|l| {
            l.get(CLUSTER_NAME_LABEL)
                .filter(|v| !v.is_empty())
                .or_else(|| l.get(CLUSTER_ID_LABEL).filter(|v| !v.is_empty()))
        })
        .cloned()
        .unwrap_or_else(|| namespace.to_owned())
}

/// Labels of a copy: the original's plus the two distribution labels.
pub fn copy_labels(
    original: Option<&BTreeMap<String, String>>,
    original_namespace: &str,
) -> BTreeMap<String, String> {
    let mut labels = original.cloned().unwrap_or_default();
    labels.insert(DIS_LABEL.into(), YES.into());
    labels.insert(TARGET_NAMESPACE_LABEL.into(), original_namespace.into());
    labels
}

/// Labels of a managed cluster's local grid: the copy's without `dis` (it
/// keeps `fed` and the target namespace, as SuperEdge's).
pub fn local_labels(copy: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    let mut labels = copy.cloned().unwrap_or_default();
    labels.remove(DIS_LABEL);
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::labels;

    #[test]
    fn roles_follow_superedge_labels() {
        assert_eq!(Role::of(None), Role::Plain);
        assert_eq!(Role::of(Some(&labels(&[("app", "x")]))), Role::Plain);
        assert_eq!(
            Role::of(Some(&labels(&[(FED_LABEL, "yes")]))),
            Role::Original
        );
        // The docs say "yes"; anything else does not distribute.
        assert_eq!(Role::of(Some(&labels(&[(FED_LABEL, "no")]))), Role::Plain);
        let copy = copy_labels(Some(&labels(&[(FED_LABEL, "yes")])), "default");
        assert_eq!(
            Role::of(Some(&copy)),
            Role::Copy {
                target_namespace: "default".into()
            }
        );
        let local = local_labels(Some(&copy));
        assert_eq!(local.get(FED_LABEL).map(String::as_str), Some("yes"));
        assert!(!local.contains_key(DIS_LABEL));
        assert_eq!(
            Role::of(Some(&local)),
            Role::Local {
                target_namespace: "default".into()
            }
        );
    }

    #[test]
    fn a_cluster_is_named_by_clusternets_labels_else_its_namespace() {
        let both = labels(&[(CLUSTER_ID_LABEL, "5d1f"), (CLUSTER_NAME_LABEL, "edge-a")]);
        assert_eq!(cluster_name("clusternet-abcde", Some(&both)), "edge-a");
        let id = labels(&[(CLUSTER_ID_LABEL, "5d1f")]);
        assert_eq!(cluster_name("clusternet-abcde", Some(&id)), "5d1f");
        assert_eq!(cluster_name("clusternet-abcde", None), "clusternet-abcde");
    }
}
