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
mod tests;
