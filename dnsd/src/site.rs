//! Which StatefulSets and pods belong to this node's site, and the label
//! selectors that fetch only those from the API server (pure functions).
//!
//! A StatefulSetGrid `g` with `gridUniqKey: k` runs in this node's site `u`
//! when the node carries `k=u`; its StatefulSet there is named by the
//! controller's rule ([`site_child_name`] of `g` and `u`, so grids whose name contains
//! the site name, or sites that need cleaning up, come out as the controller
//! made them) and carries `sitegrid.io/node-unit=u`; its pods are
//! `{statefulset}-{ordinal}` and carry `statefulset.kubernetes.io/pod-name`.
//! Both labels let dnsd ask the API server for its own site's objects only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sitegrid_api::labels::{GRID_SELECTOR_LABEL, SITE_LABEL};
use sitegrid_api::names::{site_child_name, NameRule};
use sitegrid_api::StatefulSetGrid;

/// The label the StatefulSet controller puts on each of its pods: the pod's name.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";

/// One StatefulSetGrid's StatefulSet in this node's site, as the API server has it.
#[derive(Clone, Debug)]
pub struct LocalSet {
    /// The grid's namespace (the StatefulSet's too).
    pub namespace: String,
    /// The grid's name: the first part of the per-site names (`{grid}-{i}`).
    pub grid: String,
    /// The StatefulSet.
    pub statefulset: Arc<StatefulSet>,
}

impl LocalSet {
    /// The StatefulSet's name, `{grid}-{unit}` under the controller's rule.
    pub fn name(&self) -> &str {
        self.statefulset
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
    }

    /// `spec.serviceName`, the governing (headless) Service, if set.
    pub fn service_name(&self) -> Option<&str> {
        let spec = self.statefulset.spec.as_ref()?;
        spec.service_name.as_deref().filter(|s| !s.is_empty())
    }

    /// The ordinals the StatefulSet wants: `start..start + replicas`
    /// (`spec.ordinals.start`, default 0; `spec.replicas`, default 1).
    pub fn ordinals(&self) -> std::ops::Range<u32> {
        let spec = self.statefulset.spec.as_ref();
        let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
        let start = spec
            .and_then(|s| s.ordinals.as_ref())
            .and_then(|o| o.start)
            .unwrap_or(0);
        let start = u32::try_from(start).unwrap_or(0);
        start..start.saturating_add(u32::try_from(replicas).unwrap_or(0))
    }

    /// The ordinal of `pod` if it is one of this StatefulSet's pods: same
    /// namespace, controlled by this StatefulSet, named `{statefulset}-{ordinal}`.
    pub fn ordinal_of(&self, pod: &Pod) -> Option<u32> {
        if pod.metadata.namespace.as_deref() != Some(self.namespace.as_str())
            || !controlled_by(&pod.metadata, "StatefulSet", &self.statefulset.metadata)
        {
            return None;
        }
        let suffix = pod
            .metadata
            .name
            .as_deref()?
            .strip_prefix(self.name())?
            .strip_prefix('-')?;
        let ordinal: u32 = suffix.parse().ok()?;
        // "01" or "+1" parse too, but the StatefulSet controller never writes them.
        (ordinal.to_string() == suffix).then_some(ordinal)
    }
}

/// This node's site for `grid`: the node's non-empty value of the grid's `gridUniqKey`.
fn unit_of<'a>(
    node_labels: &'a BTreeMap<String, String>,
    grid: &StatefulSetGrid,
) -> Option<&'a str> {
    node_labels
        .get(grid.spec.grid_uniq_key.as_str())
        .map(String::as_str)
        .filter(|u| !u.is_empty())
}

/// The label selector of the StatefulSets dnsd needs: the grids' children
/// (`superedge.io/grid-selector`) labelled with one of this node's sites for
/// the keys the grids use. `None` when no grid runs in this node's site.
pub fn statefulset_selector(
    node_labels: &BTreeMap<String, String>,
    grids: &[Arc<StatefulSetGrid>],
) -> Option<String> {
    let units: BTreeSet<&str> = grids
        .iter()
        .filter_map(|g| unit_of(node_labels, g))
        .collect();
    if units.is_empty() {
        return None;
    }
    let units: Vec<&str> = units.into_iter().collect();
    Some(format!(
        "{GRID_SELECTOR_LABEL},{SITE_LABEL} in ({})",
        units.join(",")
    ))
}

/// The StatefulSet of each grid in this node's site, among `statefulsets`:
/// named by the controller's rule and controlled by that grid. Sorted by
/// namespace and grid name.
pub fn local_sets(
    node_labels: &BTreeMap<String, String>,
    grids: &[Arc<StatefulSetGrid>],
    statefulsets: &[Arc<StatefulSet>],
) -> Vec<LocalSet> {
    let by_key: BTreeMap<(&str, &str), &Arc<StatefulSet>> = statefulsets
        .iter()
        .filter_map(|s| {
            let meta = &s.metadata;
            Some(((meta.namespace.as_deref()?, meta.name.as_deref()?), s))
        })
        .collect();
    let mut out: Vec<LocalSet> = grids
        .iter()
        .filter_map(|grid| {
            let unit = unit_of(node_labels, grid)?;
            let namespace = grid.metadata.namespace.as_deref()?;
            let name = grid.metadata.name.as_deref()?;
            let sts_name = site_child_name(name, unit, NameRule::StatefulSetLabel);
            let sts = by_key.get(&(namespace, sts_name.as_str()))?;
            controlled_by(&sts.metadata, "StatefulSetGrid", &grid.metadata).then(|| LocalSet {
                namespace: namespace.to_owned(),
                grid: name.to_owned(),
                statefulset: Arc::clone(sts),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.grid).cmp(&(&b.namespace, &b.grid)));
    out
}

/// The label selector of the pods dnsd needs: the pod names the local
/// StatefulSets want (`statefulset.kubernetes.io/pod-name in (...)`), a
/// label the StatefulSet controller sets on every pod it makes, so no pod
/// template has to change. `None` when they want no pod.
pub fn pod_selector(sets: &[LocalSet]) -> Option<String> {
    let names: BTreeSet<String> = sets
        .iter()
        .flat_map(|set| set.ordinals().map(move |i| format!("{}-{i}", set.name())))
        .collect();
    if names.is_empty() {
        return None;
    }
    let names: Vec<String> = names.into_iter().collect();
    Some(format!("{POD_NAME_LABEL} in ({})", names.join(",")))
}

/// Whether `child` has a controller ownerReference of `kind` to `owner`
/// (same uid; the name alone could be a namesake created after a deletion).
fn controlled_by(child: &ObjectMeta, kind: &str, owner: &ObjectMeta) -> bool {
    let Some(uid) = owner.uid.as_deref() else {
        return false;
    };
    child
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == kind && o.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{grid, labels, pod, statefulset};

    #[test]
    fn statefulsets_are_selected_by_this_nodes_sites_for_the_keys_in_use() {
        let grids = vec![
            grid("default", "a", "location", "s", 1),
            grid("prod", "b", "location", "s", 1),
            grid("default", "c", "zone", "s", 1),
            grid("default", "d", "rack", "s", 1),
        ];
        let node = labels(&[
            ("location", "beijing"),
            ("zone", "z1"),
            ("rack", ""),
            ("os", "linux"),
        ]);
        assert_eq!(
            statefulset_selector(&node, &grids).as_deref(),
            Some("superedge.io/grid-selector,sitegrid.io/node-unit in (beijing,z1)")
        );
        assert_eq!(
            statefulset_selector(&labels(&[("os", "linux")]), &grids),
            None
        );
        assert_eq!(statefulset_selector(&node, &[]), None);
    }

    #[test]
    fn pods_are_selected_by_the_names_the_local_statefulsets_want() {
        let a = grid("default", "a", "location", "s", 2);
        let b = grid("default", "beijing-b", "location", "s", 1);
        let node = labels(&[("location", "beijing")]);
        let statefulsets = vec![
            statefulset(&a, "beijing"),
            statefulset(&a, "guangzhou"),
            statefulset(&b, "beijing"),
        ];
        let sets = local_sets(&node, &[a.clone(), b], &statefulsets);
        let names: Vec<&str> = sets.iter().map(LocalSet::name).collect();
        assert_eq!(names, ["a-beijing", "beijing-b-beijing"]);
        assert_eq!(
            pod_selector(&sets).as_deref(),
            Some("statefulset.kubernetes.io/pod-name in (a-beijing-0,a-beijing-1,beijing-b-beijing-0)")
        );
        assert_eq!(pod_selector(&[]), None);
        // Scaled to zero: no pod wanted.
        let mut zero = (*statefulsets[0]).clone();
        zero.spec.as_mut().unwrap().replicas = Some(0);
        let sets = local_sets(&node, &[a], &[Arc::new(zero)]);
        assert_eq!(sets.len(), 1);
        assert_eq!(pod_selector(&sets), None);
    }

    #[test]
    fn ordinals_follow_the_start_and_the_pods_owner() {
        let g = grid("default", "db", "location", "s", 2);
        let mut sts = (*statefulset(&g, "beijing")).clone();
        let set = |sts: &StatefulSet| LocalSet {
            namespace: "default".into(),
            grid: "db".into(),
            statefulset: Arc::new(sts.clone()),
        };
        assert_eq!(set(&sts).ordinals(), 0..2);
        let p = pod(&sts, 1, &["10.0.0.1"], true);
        assert_eq!(set(&sts).ordinal_of(&p), Some(1));
        sts.spec.as_mut().unwrap().ordinals =
            serde_json::from_value(serde_json::json!({"start": 5})).unwrap();
        assert_eq!(set(&sts).ordinals(), 5..7);
        // Not its pod: another namespace, a name that only looks like one.
        let mut elsewhere = (*p).clone();
        elsewhere.metadata.namespace = Some("prod".into());
        assert_eq!(set(&sts).ordinal_of(&elsewhere), None);
        let mut padded = (*p).clone();
        padded.metadata.name = Some("db-beijing-01".into());
        assert_eq!(set(&sts).ordinal_of(&padded), None);
    }
}
