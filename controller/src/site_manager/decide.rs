//! One pass of the site-manager controller as a pure function: from the nodes,
//! NodeUnits and NodeGroups the controller sees, every write it should make
//! ([`Actions`]). The shell ([`super::sync`]) only executes them, so what is
//! written, and that nothing is written at rest, is tested by value here.
//!
//! 1. The default unit `unit-node-all` exists (unless turned off), and each
//!    group's `autoFindNodeKeys` units exist, owned by the group; those no
//!    node matches any more are deleted.
//! 2. Every live unit and group carries [`FINALIZER`], so a deletion while
//!    the controller is down is still cleaned up when it comes back.
//! 3. Like site-manager, a unit's `spec.setNode.labels` show what its nodes
//!    get from the unit itself and its groups (`{unit}:
//!    nodeunits.superedge.io`, `{group}: {unit}`): sitegrid adds them there,
//!    records which keys it added in [`plan::OWNED_ANNOTATION`] on the unit, and
//!    takes away only those.
//! 4. Every node carries what its units ask ([`membership::desired`]),
//!    changed only where sitegrid owns the key ([`plan::plan`]).
//! 5. A deleted unit or group loses the finalizer once its nodes are clean.
//! 6. Status (readiness, members, `Conflict`) changes only when it differs,
//!    and a new or changed conflict is also a Warning event.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};
use sitegrid_api::site_manager::{
    NodeGroup, NodeGroupStatus, NodeUnit, NodeUnitSpec, NodeUnitStatus, Selector,
    GROUP_LABEL_VALUE, UNIT_LABEL_VALUE,
};

use super::membership::{self, Conflict, Desired, NodeInfo, UnitInfo, DEFAULT_UNIT};
use super::plan::{self, NodePlan};

/// Held by every NodeUnit and NodeGroup until sitegrid has removed from the
/// nodes what it set for them.
pub const FINALIZER: &str = "sitegrid.io/site-cleanup";

/// What the controller sees.
#[derive(Clone, Copy, Debug)]
pub struct World<'a> {
    /// Every node.
    pub nodes: &'a [NodeInfo],
    /// Every NodeUnit.
    pub units: &'a [NodeUnit],
    /// Every NodeGroup.
    pub groups: &'a [NodeGroup],
}

/// A NodeUnit or NodeGroup, by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// A NodeUnit.
    Unit(String),
    /// A NodeGroup.
    Group(String),
}

/// A Warning event on a unit or group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// On what.
    pub target: Target,
    /// `Conflict` or `InvalidSelector`.
    pub reason: &'static str,
    /// What happened, naming the nodes and keys.
    pub note: String,
}

/// Every write of one pass, in the order the shell makes them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Actions {
    /// Units to create (the default unit, auto-found units).
    pub create_units: Vec<NodeUnit>,
    /// Auto-found units to delete.
    pub delete_units: Vec<String>,
    /// Objects to give [`FINALIZER`].
    pub add_finalizers: Vec<Target>,
    /// Merge patches of units' `spec.setNode.labels` and ownership record.
    pub unit_patches: Vec<(String, Value)>,
    /// Node changes.
    pub node_patches: Vec<(String, NodePlan)>,
    /// Deleted objects whose finalizer goes, once every node patch succeeded.
    pub release: Vec<Target>,
    /// New unit statuses.
    pub unit_status: Vec<(String, NodeUnitStatus)>,
    /// New group statuses.
    pub group_status: Vec<(String, NodeGroupStatus)>,
    /// Warning events.
    pub warnings: Vec<Warning>,
}

impl Actions {
    /// Whether the pass writes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Actions::default()
    }
}

/// Computes one pass. `default_unit`: keep `unit-node-all`; `now`: the time
/// of a condition that changes status.
pub fn decide(world: World<'_>, default_unit: bool, now: &Time) -> Actions {
    let mut out = Actions::default();
    let live_units: Vec<&NodeUnit> = world.units.iter().filter(|u| live(*u)).collect();
    let live_groups: Vec<&NodeGroup> = world.groups.iter().filter(|g| live(*g)).collect();
    units_to_create_and_delete(world, &live_groups, default_unit, &mut out);
    for unit in world.units.iter().filter(|u| needs_finalizer(*u)) {
        out.add_finalizers.push(Target::Unit(unit.name_any()));
    }
    for group in world.groups.iter().filter(|g| needs_finalizer(*g)) {
        out.add_finalizers.push(Target::Group(group.name_any()));
    }

    // The units as membership reads them: the user's setNode (without the
    // labels sitegrid mirrored into it) and their members.
    let specs: Vec<NodeUnitSpec> = live_units.iter().map(|u| users_spec(u)).collect();
    let names: Vec<String> = live_units.iter().map(|u| u.name_any()).collect();
    let empty = BTreeMap::new();
    let mut infos = Vec::new();
    let mut selector_errors = BTreeMap::new();
    for ((unit, spec), name) in live_units.iter().zip(&specs).zip(&names) {
        let members = membership::members(spec, world.nodes).unwrap_or_else(|err| {
            selector_errors.insert(name.clone(), err.to_string());
            BTreeSet::new()
        });
        let info = UnitInfo {
            name,
            spec,
            labels: unit.meta().labels.as_ref().unwrap_or(&empty),
            annotations: unit.meta().annotations.as_ref().unwrap_or(&empty),
        };
        infos.push((info, members));
    }
    let group_specs: Vec<(String, &sitegrid_api::site_manager::NodeGroupSpec)> = live_groups
        .iter()
        .map(|g| (g.name_any(), &g.spec))
        .collect();
    let group_refs: Vec<(&str, _)> = group_specs.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let groups_of: BTreeMap<&str, Vec<&str>> = infos
        .iter()
        .map(|(u, _)| (u.name, groups_of_unit(&group_refs, u)))
        .collect();

    // Units' spec mirror, then nodes.
    let mut conflicts: Vec<Conflict> = Vec::new();
    for unit in &live_units {
        let name = unit.name_any();
        let (patch, foreign) = mirror_patch(unit, &groups_of[name.as_str()]);
        if let Some(patch) = patch {
            out.unit_patches.push((name.clone(), patch));
        }
        conflicts.extend(foreign.into_iter().map(|key| Conflict {
            node: String::new(),
            key: format!("spec.setNode {key} set by someone else"),
            units: vec![name.clone()],
        }));
    }
    let (desired, claimed) = membership::desired(&infos, &group_refs, world.nodes);
    conflicts.extend(claimed.iter().cloned());
    for node in world.nodes {
        let want = desired.get(&node.name).cloned().unwrap_or_default();
        let change = plan::plan(node, &want);
        conflicts.extend(change.foreign.iter().map(|key| Conflict {
            node: node.name.clone(),
            key: format!("{key} set by someone else"),
            units: askers(&infos, &groups_of, &node.name, key),
        }));
        if !change.is_empty() {
            out.node_patches.push((node.name.clone(), change));
        }
    }
    release_deleted(world, &mut out);
    statuses(
        world.nodes,
        &live_units,
        &infos,
        &selector_errors,
        &conflicts,
        now,
        &mut out,
    );
    group_statuses(&live_groups, &groups_of, &claimed, now, &mut out);
    out
}

fn live<K: Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_none()
}

fn needs_finalizer<K: Resource>(obj: &K) -> bool {
    live(obj) && !obj.finalizers().iter().any(|f| f == FINALIZER)
}

/// The unit's spec with the labels sitegrid mirrored into `setNode` taken
/// out: what the user asked for.
fn users_spec(unit: &NodeUnit) -> NodeUnitSpec {
    let owned = plan::Owned::from_annotations(unit.annotations());
    let mut spec = unit.spec.clone();
    spec.set_node
        .labels
        .retain(|k, _| !owned.labels.contains(k));
    spec
}

/// The groups `unit` belongs to (a group whose selector cannot be read
/// claims no units).
fn groups_of_unit<'g>(
    groups: &[(&'g str, &sitegrid_api::site_manager::NodeGroupSpec)],
    unit: &UnitInfo<'_>,
) -> Vec<&'g str> {
    groups
        .iter()
        .filter(|(name, spec)| membership::in_group(name, spec, unit).unwrap_or(false))
        .map(|(name, _)| *name)
        .collect()
}

/// The merge patch that makes `unit`'s `spec.setNode.labels` show its own
/// and its groups' labels (`None` when it already does), and the keys the
/// user set there to another value.
type Mirror = (Option<Value>, Vec<String>);

fn mirror_patch(unit: &NodeUnit, groups: &[&str]) -> Mirror {
    let name = unit.name_any();
    let mut want = Desired::default();
    want.labels.insert(
        name.clone(),
        membership::Want::Set(UNIT_LABEL_VALUE.to_owned()),
    );
    for group in groups {
        want.labels
            .insert((*group).to_owned(), membership::Want::Set(name.clone()));
    }
    // The unit's setNode labels and annotations read as a node's would.
    let as_node = NodeInfo {
        name,
        labels: unit.spec.set_node.labels.clone(),
        annotations: unit.annotations().clone(),
        ..NodeInfo::default()
    };
    let change = plan::plan(&as_node, &want);
    let patch = (!change.is_empty()).then(|| {
        let node_patch = change.merge_patch();
        let mut patch = json!({});
        if let Some(annotations) = node_patch.pointer("/metadata/annotations") {
            patch["metadata"] = json!({ "annotations": annotations });
        }
        if let Some(labels) = node_patch.pointer("/metadata/labels") {
            patch["spec"] = json!({ "setNode": { "labels": labels } });
        }
        patch
    });
    (patch, change.foreign)
}

/// The units that ask `node` for `key` (`label K`, `annotation K`, `taint
/// K:E`): those whose members include it and whose setNode, name or groups
/// give that key.
fn askers(
    infos: &[(UnitInfo<'_>, BTreeSet<String>)],
    groups_of: &BTreeMap<&str, Vec<&str>>,
    node: &str,
    key: &str,
) -> Vec<String> {
    infos
        .iter()
        .filter(|(u, members)| members.contains(node) && asks(u, &groups_of[u.name], key))
        .map(|(u, _)| u.name.to_owned())
        .collect()
}

fn asks(unit: &UnitInfo<'_>, groups: &[&str], key: &str) -> bool {
    let set = &unit.spec.set_node;
    if let Some(k) = key.strip_prefix("label ") {
        k == unit.name || groups.contains(&k) || set.labels.contains_key(k)
    } else if let Some(k) = key.strip_prefix("annotation ") {
        set.annotations.contains_key(k)
    } else if let Some(id) = key.strip_prefix("taint ") {
        set.taints.iter().any(|t| membership::taint_id(t) == id)
    } else {
        false
    }
}

/// 1: the default unit and the auto-found units.
fn units_to_create_and_delete(
    world: World<'_>,
    live_groups: &[&NodeGroup],
    default_unit: bool,
    out: &mut Actions,
) {
    let exists = |name: &str| world.units.iter().any(|u| u.name_any() == name);
    if default_unit && !exists(DEFAULT_UNIT) {
        out.create_units
            .push(NodeUnit::new(DEFAULT_UNIT, membership::default_unit_spec()));
    }
    for group in live_groups {
        let found = membership::auto_found_units(&group.spec.auto_find_node_keys, world.nodes);
        for (name, labels) in &found {
            if !exists(name) && !out.create_units.iter().any(|u| u.name_any() == *name) {
                out.create_units.push(auto_found_unit(group, name, labels));
            }
        }
        for unit in world
            .units
            .iter()
            .filter(|u| live(*u) && owned_by(u, group) && !found.contains_key(&u.name_any()))
        {
            out.delete_units.push(unit.name_any());
        }
    }
}

/// A unit found by `group`'s `autoFindNodeKeys`: it selects the nodes with
/// these label values, carries `{group}: nodegroups.superedge.io` (so it is
/// in the group) and is owned by the group (deleted with it).
fn auto_found_unit(group: &NodeGroup, name: &str, labels: &BTreeMap<String, String>) -> NodeUnit {
    let mut unit = NodeUnit::new(
        name,
        NodeUnitSpec {
            selector: Some(Selector {
                match_labels: labels.clone(),
                ..Selector::default()
            }),
            ..NodeUnitSpec::default()
        },
    );
    unit.metadata.labels = Some([(group.name_any(), GROUP_LABEL_VALUE.to_owned())].into());
    unit.metadata.owner_references = owner(group).map(|o| vec![o]);
    unit
}

/// The group as the controlling owner of the units it found.
fn owner(group: &NodeGroup) -> Option<OwnerReference> {
    let mut owner = group.controller_owner_ref(&())?;
    owner.block_owner_deletion = Some(true);
    Some(owner)
}

fn owned_by(unit: &NodeUnit, group: &NodeGroup) -> bool {
    let uid = group.meta().uid.as_deref();
    unit.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
}

/// 5: deleted objects holding the finalizer. Their labels are already out
/// of the wanted state, so the node patches of this pass remove them; the
/// shell releases only if every one of those patches succeeded.
fn release_deleted(world: World<'_>, out: &mut Actions) {
    let holds = |f: &[String]| f.iter().any(|f| f == FINALIZER);
    for unit in world
        .units
        .iter()
        .filter(|u| !live(*u) && holds(u.finalizers()))
    {
        out.release.push(Target::Unit(unit.name_any()));
    }
    for group in world
        .groups
        .iter()
        .filter(|g| !live(*g) && holds(g.finalizers()))
    {
        out.release.push(Target::Group(group.name_any()));
    }
}

/// 6: unit statuses and their warnings.
fn statuses(
    nodes: &[NodeInfo],
    live_units: &[&NodeUnit],
    infos: &[(UnitInfo<'_>, BTreeSet<String>)],
    selector_errors: &BTreeMap<String, String>,
    conflicts: &[Conflict],
    now: &Time,
    out: &mut Actions,
) {
    for (unit, (info, members)) in live_units.iter().zip(infos) {
        let name = info.name;
        let (ready_rate, ready_nodes, not_ready_nodes) = membership::readiness(members, nodes);
        let mut problems: Vec<String> = conflicts
            .iter()
            .filter(|c| c.units.iter().any(|u| u == name))
            .map(describe)
            .collect();
        problems.dedup();
        let old = unit.status.clone().unwrap_or_default();
        let mut conditions = vec![condition(&old.conditions, "Conflict", &problems, now)];
        let invalid: Vec<String> = selector_errors.get(name).cloned().into_iter().collect();
        if !invalid.is_empty() || old.conditions.iter().any(|c| c.type_ == "InvalidSelector") {
            conditions.push(condition(&old.conditions, "InvalidSelector", &invalid, now));
        }
        let status = NodeUnitStatus {
            ready_rate,
            ready_nodes,
            not_ready_nodes,
            conditions,
        };
        warn_on_change(
            Target::Unit(name.to_owned()),
            &old.conditions,
            &status.conditions,
            out,
        );
        if status != old {
            out.unit_status.push((name.to_owned(), status));
        }
    }
}

/// How a conflict reads in a condition or event.
fn describe(c: &Conflict) -> String {
    match (c.node.is_empty(), c.units.len() > 1) {
        (true, _) => c.key.clone(),
        (false, true) => format!(
            "node {}: {} claimed by units {}",
            c.node,
            c.key,
            c.units.join(", ")
        ),
        (false, false) => format!("node {}: {}", c.node, c.key),
    }
}

/// 6: group statuses (its units, and nodes two of them claim).
fn group_statuses(
    live_groups: &[&NodeGroup],
    groups_of: &BTreeMap<&str, Vec<&str>>,
    claimed: &[Conflict],
    now: &Time,
    out: &mut Actions,
) {
    for group in live_groups {
        let name = group.name_any();
        let node_units: Vec<String> = groups_of
            .iter()
            .filter(|(_, groups)| groups.contains(&name.as_str()))
            .map(|(unit, _)| (*unit).to_owned())
            .collect();
        let label = format!("label {name}");
        let problems: Vec<String> = claimed
            .iter()
            .filter(|c| c.key == label)
            .map(describe)
            .collect();
        let old = group.status.clone().unwrap_or_default();
        let status = NodeGroupStatus {
            unit_number: i32::try_from(node_units.len()).unwrap_or(i32::MAX),
            node_units,
            conditions: vec![condition(&old.conditions, "Conflict", &problems, now)],
        };
        warn_on_change(
            Target::Group(name.clone()),
            &old.conditions,
            &status.conditions,
            out,
        );
        if status != old {
            out.group_status.push((name, status));
        }
    }
}

/// Condition `kind`: True with `problems` as its message, False without;
/// the transition time stays while the status does.
fn condition(old: &[Condition], kind: &str, problems: &[String], now: &Time) -> Condition {
    let status = if problems.is_empty() { "False" } else { "True" };
    let since = old
        .iter()
        .find(|c| c.type_ == kind && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: kind.to_owned(),
        status: status.to_owned(),
        reason: if problems.is_empty() {
            format!("No{kind}")
        } else {
            kind.to_owned()
        },
        // kube-apiserver 1.20 refuses an empty message in a status patch.
        message: if problems.is_empty() {
            match kind {
                "Conflict" => "No conflicts.".to_owned(),
                _ => "The selector is valid.".to_owned(),
            }
        } else {
            problems.join("; ")
        },
        last_transition_time: since,
        observed_generation: None,
    }
}

/// A Warning event for each condition that became True or changed message.
fn warn_on_change(target: Target, old: &[Condition], new: &[Condition], out: &mut Actions) {
    for c in new.iter().filter(|c| c.status == "True") {
        let before = old.iter().find(|o| o.type_ == c.type_);
        if before.is_some_and(|o| o.status == "True" && o.message == c.message) {
            continue;
        }
        let reason = if c.type_ == "Conflict" {
            "Conflict"
        } else {
            "InvalidSelector"
        };
        out.warnings.push(Warning {
            target: target.clone(),
            reason,
            note: c.message.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    //! Each test runs passes against a small simulated API server (merge
    //! patches applied as RFC 7386 says, finalizers holding deletions, owner
    //! references collected) until a pass writes nothing, then checks what
    //! the nodes, units and groups carry.

    use k8s_openapi::api::core::v1::Taint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;
    use crate::site_manager::membership::tests::{map, node};
    use sitegrid_api::site_manager::NodeGroupSpec;

    fn named_unit(name: &str, nodes: &[&str]) -> NodeUnit {
        NodeUnit::new(
            name,
            NodeUnitSpec {
                nodes: nodes.iter().map(|n| n.to_string()).collect(),
                ..NodeUnitSpec::default()
            },
        )
    }

    fn selected_unit(name: &str, key: &str, values: &[&str]) -> NodeUnit {
        NodeUnit::new(
            name,
            NodeUnitSpec {
                selector: Some(Selector {
                    match_expressions: vec![LabelSelectorRequirement {
                        key: key.into(),
                        operator: "In".into(),
                        values: Some(values.iter().map(|v| v.to_string()).collect()),
                    }],
                    ..Selector::default()
                }),
                ..NodeUnitSpec::default()
            },
        )
    }

    fn group(name: &str, units: &[&str]) -> NodeGroup {
        NodeGroup::new(
            name,
            NodeGroupSpec {
                node_units: units.iter().map(|u| u.to_string()).collect(),
                ..NodeGroupSpec::default()
            },
        )
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("time"))
    }

    /// RFC 7386.
    fn merge(target: &mut Value, patch: &Value) {
        let Value::Object(patch) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        let object = target.as_object_mut().expect("object");
        for (k, v) in patch {
            if v.is_null() {
                object.remove(k);
            } else {
                merge(object.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }

    fn patched<K: serde::Serialize + serde::de::DeserializeOwned>(obj: &K, patch: &Value) -> K {
        let mut value = serde_json::to_value(obj).expect("to json");
        merge(&mut value, patch);
        serde_json::from_value(value).expect("from json")
    }

    /// The API server, as far as the site-manager controller can tell.
    #[derive(Default)]
    struct Sim {
        nodes: Vec<NodeInfo>,
        units: Vec<NodeUnit>,
        groups: Vec<NodeGroup>,
        default_unit: bool,
        /// Every write of every pass, counted.
        writes: usize,
        warnings: Vec<Warning>,
    }

    impl Sim {
        fn new(nodes: Vec<NodeInfo>, units: Vec<NodeUnit>, groups: Vec<NodeGroup>) -> Sim {
            let mut sim = Sim {
                nodes,
                default_unit: true,
                ..Sim::default()
            };
            for u in units {
                sim.create_unit(u);
            }
            for mut g in groups {
                g.metadata.uid = Some(format!("uid-{}", g.name_any()));
                sim.groups.push(g);
            }
            sim
        }

        fn create_unit(&mut self, mut u: NodeUnit) {
            u.metadata.uid = Some(format!("uid-{}", u.name_any()));
            self.units.push(u);
        }

        fn node(&self, name: &str) -> &NodeInfo {
            self.nodes.iter().find(|n| n.name == name).expect("node")
        }

        fn node_mut(&mut self, name: &str) -> &mut NodeInfo {
            self.nodes
                .iter_mut()
                .find(|n| n.name == name)
                .expect("node")
        }

        fn unit(&self, name: &str) -> &NodeUnit {
            self.units
                .iter()
                .find(|u| u.name_any() == name)
                .unwrap_or_else(|| panic!("unit {name}"))
        }

        fn unit_mut(&mut self, name: &str) -> &mut NodeUnit {
            self.units
                .iter_mut()
                .find(|u| u.name_any() == name)
                .expect("unit")
        }

        fn label(&self, node: &str, key: &str) -> Option<&str> {
            self.node(node).labels.get(key).map(String::as_str)
        }

        fn conflict(&self, unit: &str) -> String {
            let status = self.unit(unit).status.clone().unwrap_or_default();
            let c = status.conditions.iter().find(|c| c.type_ == "Conflict");
            c.filter(|c| c.status == "True")
                .map(|c| c.message.clone())
                .unwrap_or_default()
        }

        /// One pass, applied; what it wrote.
        fn pass(&mut self) -> Actions {
            let actions = decide(
                World {
                    nodes: &self.nodes,
                    units: &self.units,
                    groups: &self.groups,
                },
                self.default_unit,
                &now(),
            );
            self.apply(&actions);
            actions
        }

        /// Passes until one writes nothing; how many wrote something.
        fn settle(&mut self) -> usize {
            for n in 0..10 {
                if self.pass().is_empty() {
                    return n;
                }
            }
            panic!("no rest after 10 passes: {:#?}", self.pass());
        }

        fn apply(&mut self, a: &Actions) {
            let count = a.create_units.len()
                + a.delete_units.len()
                + a.add_finalizers.len()
                + a.unit_patches.len()
                + a.node_patches.len()
                + a.release.len()
                + a.unit_status.len()
                + a.group_status.len()
                + a.warnings.len();
            self.writes += count;
            for u in &a.create_units {
                assert!(
                    !self.units.iter().any(|e| e.name_any() == u.name_any()),
                    "create of existing {}",
                    u.name_any()
                );
                self.create_unit(u.clone());
            }
            for name in &a.delete_units {
                self.delete_unit(name);
            }
            for t in &a.add_finalizers {
                let meta = self.meta_mut(t);
                meta.finalizers
                    .get_or_insert_with(Vec::new)
                    .push(FINALIZER.to_owned());
            }
            for (name, patch) in &a.unit_patches {
                let unit = self.unit_mut(name);
                *unit = patched(unit, patch);
            }
            for (name, change) in &a.node_patches {
                let n = self.node_mut(name);
                for (k, v) in &change.labels {
                    match v {
                        Some(v) => n.labels.insert(k.clone(), v.clone()),
                        None => n.labels.remove(k),
                    };
                }
                for (k, v) in &change.annotations {
                    match v {
                        Some(v) => n.annotations.insert(k.clone(), v.clone()),
                        None => n.annotations.remove(k),
                    };
                }
                if let Some(t) = &change.taints {
                    n.taints = t.clone();
                }
                if let Some(u) = change.unschedulable {
                    n.unschedulable = u;
                }
            }
            for t in &a.release {
                self.meta_mut(t)
                    .finalizers
                    .as_mut()
                    .expect("finalizers")
                    .retain(|f| f != FINALIZER);
            }
            // kube-apiserver 1.20 refuses a condition without a message.
            let statuses = a.unit_status.iter().map(|(_, s)| &s.conditions);
            for c in statuses
                .chain(a.group_status.iter().map(|(_, s)| &s.conditions))
                .flatten()
            {
                assert!(!c.message.is_empty() && !c.reason.is_empty(), "{c:?}");
            }
            for (name, s) in &a.unit_status {
                self.unit_mut(name).status = Some(s.clone());
            }
            for (name, s) in &a.group_status {
                let g = self.groups.iter_mut().find(|g| g.name_any() == *name);
                g.expect("group").status = Some(s.clone());
            }
            self.warnings.extend(a.warnings.iter().cloned());
            self.collect();
        }

        fn meta_mut(&mut self, t: &Target) -> &mut kube::api::ObjectMeta {
            match t {
                Target::Unit(n) => self.unit_mut(n).meta_mut(),
                Target::Group(n) => {
                    let g = self.groups.iter_mut().find(|g| g.name_any() == *n);
                    g.expect("group").meta_mut()
                }
            }
        }

        fn delete_unit(&mut self, name: &str) {
            self.unit_mut(name).metadata.deletion_timestamp = Some(now());
            self.collect();
        }

        fn delete_group(&mut self, name: &str) {
            let g = self.groups.iter_mut().find(|g| g.name_any() == name);
            g.expect("group").metadata.deletion_timestamp = Some(now());
            self.collect();
        }

        /// Deleted objects without finalizers go; units whose owner is gone
        /// are deleted (the garbage collector).
        fn collect(&mut self) {
            let gone = |m: &kube::api::ObjectMeta| {
                m.deletion_timestamp.is_some() && m.finalizers.as_ref().is_none_or(Vec::is_empty)
            };
            self.units.retain(|u| !gone(&u.metadata));
            self.groups.retain(|g| !gone(&g.metadata));
            let uids: BTreeSet<String> = self
                .groups
                .iter()
                .filter_map(|g| g.metadata.uid.clone())
                .collect();
            let mut orphaned = false;
            for u in &mut self.units {
                let owners = u.owner_references();
                if !owners.is_empty()
                    && owners.iter().all(|o| !uids.contains(&o.uid))
                    && u.metadata.deletion_timestamp.is_none()
                {
                    u.metadata.deletion_timestamp = Some(now());
                    orphaned = true;
                }
            }
            if orphaned {
                self.collect();
            }
        }
    }

    /// The seed: bj-1..3 by name, gz-1..3 by selector, group `location`.
    fn seed() -> Sim {
        let nodes = vec![
            node("bj-1", &[]),
            node("bj-2", &[]),
            node("bj-3", &[]),
            node("gz-1", &[("rack", "gz")]),
            node("gz-2", &[("rack", "gz")]),
            node("gz-3", &[("rack", "gz")]),
        ];
        let units = vec![
            named_unit("beijing", &["bj-1", "bj-2", "bj-3"]),
            selected_unit("guangzhou", "rack", &["gz"]),
        ];
        Sim::new(
            nodes,
            units,
            vec![group("location", &["beijing", "guangzhou"])],
        )
    }

    #[test]
    fn the_seed_sites_converge_and_then_nothing_is_written() {
        let mut sim = seed();
        sim.settle();
        for (n, unit) in [
            ("bj-1", "beijing"),
            ("bj-3", "beijing"),
            ("gz-2", "guangzhou"),
        ] {
            assert_eq!(sim.label(n, "location"), Some(unit), "{n}");
            assert_eq!(sim.label(n, unit), Some(UNIT_LABEL_VALUE), "{n}");
            assert_eq!(sim.label(n, DEFAULT_UNIT), Some(UNIT_LABEL_VALUE), "{n}");
        }
        assert_eq!(sim.label("gz-1", "beijing"), None);
        let bj = sim.unit("beijing");
        assert_eq!(
            bj.spec.set_node.labels,
            map(&[("beijing", UNIT_LABEL_VALUE), ("location", "beijing")]),
            "describe nodeunit shows what its nodes get"
        );
        let status = bj.status.clone().expect("status");
        assert_eq!(status.ready_rate, "3/3");
        assert_eq!(status.ready_nodes, ["bj-1", "bj-2", "bj-3"]);
        let all = sim.unit(DEFAULT_UNIT);
        assert_eq!(
            all.spec.unit_type,
            sitegrid_api::site_manager::NodeUnitType::Other
        );
        assert_eq!(all.status.as_ref().expect("status").ready_rate, "6/6");
        let g = sim.groups[0].status.clone().expect("group status");
        assert_eq!(
            (g.unit_number, g.node_units.as_slice()),
            (2, &["beijing".to_owned(), "guangzhou".to_owned()][..])
        );
        for u in &sim.units {
            assert!(
                u.finalizers().iter().any(|f| f == FINALIZER),
                "{}",
                u.name_any()
            );
        }
        assert!(sim.warnings.is_empty(), "{:?}", sim.warnings);

        // At rest, and after a heartbeat-like no-op, nothing is written.
        let before = sim.writes;
        for _ in 0..5 {
            assert!(sim.pass().is_empty());
        }
        assert_eq!(sim.writes, before);
    }

    #[test]
    fn a_node_leaving_and_joining_moves_exactly_its_site_labels() {
        let mut sim = seed();
        sim.node_mut("bj-3")
            .labels
            .insert("team".into(), "ops".into());
        sim.settle();
        // bj-3 moves to guangzhou.
        sim.unit_mut("beijing").spec.nodes.retain(|n| n != "bj-3");
        sim.node_mut("bj-3")
            .labels
            .insert("rack".into(), "gz".into());
        sim.settle();
        assert_eq!(sim.label("bj-3", "location"), Some("guangzhou"));
        assert_eq!(sim.label("bj-3", "guangzhou"), Some(UNIT_LABEL_VALUE));
        assert_eq!(sim.label("bj-3", "beijing"), None);
        assert_eq!(sim.label("bj-3", "team"), Some("ops"), "not sitegrid's");
        let gz = sim.unit("guangzhou").status.clone().expect("status");
        assert_eq!(gz.ready_rate, "4/4");
        assert_eq!(
            sim.unit("beijing").status.clone().expect("s").ready_rate,
            "2/2"
        );
        // setNode changes: the old label goes, the new one comes.
        sim.unit_mut("guangzhou")
            .spec
            .set_node
            .labels
            .insert("tier".into(), "a".into());
        sim.settle();
        assert_eq!(sim.label("gz-1", "tier"), Some("a"));
        sim.unit_mut("guangzhou")
            .spec
            .set_node
            .labels
            .remove("tier");
        sim.settle();
        assert_eq!(sim.label("gz-1", "tier"), None);
    }

    #[test]
    fn a_key_someone_else_set_is_never_touched_and_reported_once() {
        let mut sim = seed();
        sim.node_mut("bj-1")
            .labels
            .insert("location".into(), "lab".into());
        sim.settle();
        assert_eq!(sim.label("bj-1", "location"), Some("lab"));
        assert_eq!(sim.label("bj-2", "location"), Some("beijing"));
        let message = sim.conflict("beijing");
        assert!(
            message.contains("bj-1") && message.contains("location"),
            "{message}"
        );
        assert_eq!(sim.conflict("guangzhou"), "");
        assert_eq!(sim.warnings.len(), 1, "{:?}", sim.warnings);
        assert_eq!(sim.warnings[0].target, Target::Unit("beijing".into()));
        assert_eq!(sim.warnings[0].reason, "Conflict");
        // Still there after more passes: the same conflict is not re-announced.
        sim.settle();
        assert_eq!(sim.warnings.len(), 1);
        // Deleting the group removes location where sitegrid set it only.
        sim.delete_group("location");
        sim.settle();
        assert!(sim.groups.is_empty(), "released and gone");
        assert_eq!(sim.label("bj-1", "location"), Some("lab"));
        assert_eq!(sim.label("bj-2", "location"), None);
        assert_eq!(sim.conflict("beijing"), "", "the conflict clears");
        let bj = sim.unit("beijing");
        assert_eq!(
            bj.spec.set_node.labels,
            map(&[("beijing", UNIT_LABEL_VALUE)])
        );
    }

    #[test]
    fn a_deleted_unit_keeps_its_finalizer_until_its_nodes_are_clean() {
        let mut sim = seed();
        sim.unit_mut("guangzhou").spec.set_node.taints = vec![Taint {
            key: "site".into(),
            value: Some("gz".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        }];
        sim.node_mut("gz-1")
            .labels
            .insert("keep".into(), "me".into());
        sim.settle();
        assert_eq!(sim.node("gz-2").taints.len(), 1);
        sim.delete_unit("guangzhou");
        // One pass: the node patches and the release come together (the
        // shell releases only if every node patch succeeded).
        let a = sim.pass();
        assert_eq!(a.release, [Target::Unit("guangzhou".into())]);
        assert!(a.node_patches.iter().any(|(n, _)| n == "gz-1"));
        sim.settle();
        assert!(sim.units.iter().all(|u| u.name_any() != "guangzhou"));
        for n in ["gz-1", "gz-2", "gz-3"] {
            assert_eq!(sim.label(n, "location"), None, "{n}");
            assert_eq!(sim.label(n, "guangzhou"), None, "{n}");
            assert!(sim.node(n).taints.is_empty(), "{n}");
            assert_eq!(sim.label(n, DEFAULT_UNIT), Some(UNIT_LABEL_VALUE), "{n}");
        }
        assert_eq!(sim.label("gz-1", "keep"), Some("me"));
        let g = sim.groups[0].status.clone().expect("status");
        assert_eq!(g.node_units, ["beijing"]);
    }

    #[test]
    fn a_node_two_units_of_a_group_claim_keeps_its_value_without_flapping() {
        let mut sim = seed();
        sim.settle();
        // beijing now also names gz-1, which guangzhou selects.
        sim.unit_mut("beijing").spec.nodes.push("gz-1".into());
        let writes = sim.settle();
        assert!(writes > 0);
        assert_eq!(sim.label("gz-1", "location"), Some("guangzhou"), "held");
        for u in ["beijing", "guangzhou"] {
            let m = sim.conflict(u);
            assert!(m.contains("gz-1") && m.contains("location"), "{u}: {m}");
        }
        let g = sim.groups[0].status.clone().expect("status");
        let c = g
            .conditions
            .iter()
            .find(|c| c.type_ == "Conflict")
            .expect("c");
        assert_eq!(c.status, "True");
        assert!(c.message.contains("gz-1"));
        let before = sim.writes;
        for _ in 0..5 {
            assert!(sim.pass().is_empty(), "no flapping");
        }
        assert_eq!(sim.writes, before);
        // The claim ends: beijing's value is no longer contested.
        sim.unit_mut("beijing").spec.nodes.retain(|n| n != "gz-1");
        sim.settle();
        assert_eq!(sim.conflict("beijing"), "");
        assert_eq!(sim.label("gz-1", "beijing"), None);
    }

    #[test]
    fn readiness_and_cordon_follow_the_nodes() {
        let mut sim = seed();
        sim.node_mut("gz-3").unschedulable = true; // an operator's cordon
        sim.settle();
        sim.node_mut("bj-2").ready = false;
        sim.settle();
        let bj = sim.unit("beijing").status.clone().expect("status");
        assert_eq!(bj.ready_rate, "2/3");
        assert_eq!(bj.not_ready_nodes, ["bj-2"]);
        assert_eq!(
            sim.unit(DEFAULT_UNIT).status.clone().expect("s").ready_rate,
            "5/6"
        );

        sim.unit_mut("guangzhou").spec.unschedulable = true;
        sim.unit_mut("beijing").spec.unschedulable = true;
        sim.settle();
        assert!(sim.nodes.iter().all(|n| n.unschedulable));
        sim.unit_mut("guangzhou").spec.unschedulable = false;
        sim.settle();
        assert!(!sim.node("gz-1").unschedulable);
        assert!(sim.node("gz-3").unschedulable, "cordoned by someone else");
        // A node that leaves a cordoned unit is uncordoned.
        sim.unit_mut("beijing").spec.nodes.retain(|n| n != "bj-1");
        sim.settle();
        assert!(!sim.node("bj-1").unschedulable);
        assert!(sim.node("bj-2").unschedulable);
    }

    #[test]
    fn auto_found_units_are_created_owned_and_deleted_with_their_nodes() {
        let nodes = vec![
            node("a", &[("zone", "bj")]),
            node("b", &[("zone", "bj")]),
            node("c", &[("zone", "gz")]),
            node("d", &[]),
        ];
        let mut g = group("zone-sites", &[]);
        g.spec.auto_find_node_keys = vec!["zone".into()];
        let mut sim = Sim::new(nodes, vec![], vec![g]);
        sim.default_unit = false;
        sim.settle();
        let names: Vec<String> = sim.units.iter().map(|u| u.name_any()).collect();
        assert_eq!(names, ["bj", "gz"]);
        let bj = sim.unit("bj");
        assert_eq!(bj.owner_references()[0].uid, "uid-zone-sites");
        assert_eq!(sim.label("a", "zone-sites"), Some("bj"));
        assert_eq!(sim.label("c", "zone-sites"), Some("gz"));
        assert_eq!(sim.label("d", "zone-sites"), None);
        assert_eq!(sim.groups[0].status.clone().expect("s").unit_number, 2);
        // No node in gz any more: its unit goes, and its labels with it.
        sim.node_mut("c").labels.insert("zone".into(), "bj".into());
        sim.settle();
        let names: Vec<String> = sim.units.iter().map(|u| u.name_any()).collect();
        assert_eq!(names, ["bj"]);
        assert_eq!(sim.label("c", "zone-sites"), Some("bj"));
        assert_eq!(sim.label("c", "gz"), None);
        // The group goes: its units are collected, every label removed.
        sim.delete_group("zone-sites");
        sim.settle();
        assert!(sim.units.is_empty() && sim.groups.is_empty());
        for n in &sim.nodes {
            let ours: Vec<&String> = n.labels.keys().filter(|k| *k != "zone").collect();
            assert!(ours.is_empty(), "{}: {ours:?}", n.name);
            assert!(
                !n.annotations.contains_key(plan::OWNED_ANNOTATION),
                "{}",
                n.name
            );
        }
    }

    #[test]
    fn the_default_unit_can_be_turned_off() {
        let mut sim = seed();
        sim.default_unit = false;
        sim.settle();
        assert!(sim.units.iter().all(|u| u.name_any() != DEFAULT_UNIT));
        assert_eq!(sim.label("bj-1", DEFAULT_UNIT), None);
    }

    #[test]
    fn an_invalid_selector_is_reported_and_claims_nothing() {
        let mut sim = seed();
        let mut bad = selected_unit("odd", "rack", &[]);
        bad.spec.selector.as_mut().expect("sel").match_expressions[0].operator = "Near".into();
        sim.create_unit(bad);
        sim.settle();
        let status = sim.unit("odd").status.clone().expect("status");
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == "InvalidSelector")
            .expect("condition");
        assert_eq!(c.status, "True");
        assert!(c.message.contains("Near"), "{}", c.message);
        assert!(sim.nodes.iter().all(|n| !n.labels.contains_key("odd")));
        assert!(sim.warnings.iter().any(|w| w.reason == "InvalidSelector"));
    }
}
