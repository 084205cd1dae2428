//! Who belongs where, and what each node should carry: pure functions over
//! nodes, NodeUnits and NodeGroups, so every rule is tested by value.
//!
//! - A node belongs to a unit when the unit names it (`nodes`) or its
//!   `selector` matches the node's labels and annotations.
//! - A unit belongs to group G when G names it (`nodeUnits`), G's `selector`
//!   matches the unit's labels and annotations, or the unit carries the label
//!   `G: nodegroups.superedge.io` (how site-manager marks the units it finds).
//! - A member node carries the unit's `setNode` labels, annotations and
//!   taints, `{unit}: nodeunits.superedge.io`, and `G={unit}` for each group
//!   G of the unit.
//! - When units ask one node for different values of one key (two units of
//!   group G both claim it, say) the node keeps its current value if it is one
//!   of those asked for, nothing is set otherwise, and the conflict is
//!   reported: no flapping between values.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use sitegrid_api::names::{child_name, NameRule};
use sitegrid_api::site_manager::{
    NodeGroupSpec, NodeUnitSpec, NodeUnitType, Selector, GROUP_LABEL_VALUE, UNIT_LABEL_VALUE,
};

/// The default unit of every node (site-manager's `unit-node-all`).
pub const DEFAULT_UNIT: &str = "unit-node-all";

/// What membership needs to know of a node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeInfo {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// Whether its Ready condition is True.
    pub ready: bool,
}

/// A unit as membership reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitInfo<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a NodeUnitSpec,
    /// Its own labels (a group may select units by them).
    pub labels: &'a BTreeMap<String, String>,
    /// Its own annotations.
    pub annotations: &'a BTreeMap<String, String>,
}

/// A selector that cannot be evaluated (an unknown operator, a missing or
/// extra value list); reported on the unit or group that holds it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector: {0}")]
pub struct SelectorError(pub String);

/// Whether `sel` matches an object with `labels` and `annotations`
/// (Kubernetes label-selector semantics: every requirement must hold; an
/// empty selector matches everything).
pub fn selector_matches(
    sel: &Selector,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    let mut matched = sel
        .match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && sel
            .annotations
            .iter()
            .all(|(k, v)| annotations.get(k) == Some(v));
    for req in &sel.match_expressions {
        let values = req.values.as_deref().unwrap_or_default();
        let have = labels.get(&req.key);
        let holds = match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(SelectorError(format!(
                    "{} {}: needs at least one value",
                    req.key, req.operator
                )))
            }
            "In" => have.is_some_and(|v| values.contains(v)),
            "NotIn" => !have.is_some_and(|v| values.contains(v)),
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(SelectorError(format!(
                    "{} {}: takes no values",
                    req.key, req.operator
                )))
            }
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            other => {
                return Err(SelectorError(format!(
                    "{}: unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)",
                    req.key
                )))
            }
        };
        matched &= holds;
    }
    Ok(matched)
}

/// The names of `unit`'s member nodes among `nodes`.
pub fn members(unit: &NodeUnitSpec, nodes: &[NodeInfo]) -> Result<BTreeSet<String>, SelectorError> {
    let named: BTreeSet<&str> = unit.nodes.iter().map(String::as_str).collect();
    let mut out = BTreeSet::new();
    for node in nodes {
        let by_selector = match &unit.selector {
            Some(sel) => selector_matches(sel, &node.labels, &node.annotations)?,
            None => false,
        };
        if by_selector || named.contains(node.name.as_str()) {
            out.insert(node.name.clone());
        }
    }
    Ok(out)
}

/// Whether `unit` belongs to group `group_name`.
pub fn in_group(
    group_name: &str,
    group: &NodeGroupSpec,
    unit: &UnitInfo<'_>,
) -> Result<bool, SelectorError> {
    if group.node_units.iter().any(|u| u == unit.name)
        || unit.labels.get(group_name).map(String::as_str) == Some(GROUP_LABEL_VALUE)
    {
        return Ok(true);
    }
    match &group.selector {
        Some(sel) => selector_matches(sel, unit.labels, unit.annotations),
        None => Ok(false),
    }
}

/// What one key should be on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// This value.
    Set(String),
    /// Units disagree: leave the key as it is.
    Hold,
}

/// What sitegrid wants on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    /// Labels.
    pub labels: BTreeMap<String, Want>,
    /// Annotations.
    pub annotations: BTreeMap<String, Want>,
    /// Taints by `key:effect`.
    pub taints: BTreeMap<String, Taint>,
    /// Whether a unit of the node is unschedulable.
    pub unschedulable: bool,
}

/// Units asking one node for different values of one key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    /// The node.
    pub node: String,
    /// `label K`, `annotation K` or `taint K:EFFECT`.
    pub key: String,
    /// The units involved.
    pub units: Vec<String>,
}

/// The identity of a taint on a node: its key and effect.
pub fn taint_id(t: &Taint) -> String {
    format!("{}:{}", t.key, t.effect)
}

/// Candidate values per key, with the units that asked for each.
type Asks = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;
/// Candidate taints per `key:effect`, by value, with the units that asked.
type TaintAsks = BTreeMap<String, BTreeMap<String, (Taint, BTreeSet<String>)>>;

/// What every node should carry given `units` (with their members already
/// computed) and `groups`, and the conflicts between units.
pub fn desired(
    units: &[(UnitInfo<'_>, BTreeSet<String>)],
    groups: &[(&str, &NodeGroupSpec)],
    nodes: &[NodeInfo],
) -> (BTreeMap<String, Desired>, Vec<Conflict>) {
    let mut labels: BTreeMap<&str, Asks> = BTreeMap::new();
    let mut annotations: BTreeMap<&str, Asks> = BTreeMap::new();
    let mut taints: BTreeMap<&str, TaintAsks> = BTreeMap::new();
    let mut cordon: BTreeSet<&str> = BTreeSet::new();
    for (unit, member_names) in units {
        let mut unit_labels = unit.spec.set_node.labels.clone();
        unit_labels.insert(unit.name.to_owned(), UNIT_LABEL_VALUE.to_owned());
        for (group_name, group) in groups {
            // A group whose selector cannot be read claims no units.
            if in_group(group_name, group, unit).unwrap_or(false) {
                unit_labels.insert((*group_name).to_owned(), unit.name.to_owned());
            }
        }
        for node in nodes.iter().filter(|n| member_names.contains(&n.name)) {
            let ask = |asks: &mut Asks, k: &String, v: &String| {
                asks.entry(k.clone())
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .insert(unit.name.to_owned());
            };
            let node_labels = labels.entry(node.name.as_str()).or_default();
            for (k, v) in &unit_labels {
                ask(node_labels, k, v);
            }
            let node_annotations = annotations.entry(node.name.as_str()).or_default();
            for (k, v) in &unit.spec.set_node.annotations {
                ask(node_annotations, k, v);
            }
            let node_taints = taints.entry(node.name.as_str()).or_default();
            for t in &unit.spec.set_node.taints {
                let value = t.value.clone().unwrap_or_default();
                node_taints
                    .entry(taint_id(t))
                    .or_default()
                    .entry(value)
                    .or_insert_with(|| (t.clone(), BTreeSet::new()))
                    .1
                    .insert(unit.name.to_owned());
            }
            if unit.spec.unschedulable {
                cordon.insert(node.name.as_str());
            }
        }
    }
    let mut out = BTreeMap::new();
    let mut conflicts = Vec::new();
    for node in nodes {
        let mut want = Desired {
            unschedulable: cordon.contains(node.name.as_str()),
            ..Desired::default()
        };
        let resolve = |asks: Option<&Asks>,
                       current: &BTreeMap<String, String>,
                       kind: &str,
                       conflicts: &mut Vec<Conflict>| {
            let mut wanted = BTreeMap::new();
            for (key, values) in asks.into_iter().flatten() {
                if values.len() == 1 {
                    let (v, _) = values.iter().next().expect("one value");
                    wanted.insert(key.clone(), Want::Set(v.clone()));
                    continue;
                }
                conflicts.push(Conflict {
                    node: node.name.clone(),
                    key: format!("{kind} {key}"),
                    units: values
                        .values()
                        .flatten()
                        .cloned()
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect(),
                });
                let keep = current.get(key).filter(|v| values.contains_key(*v));
                wanted.insert(
                    key.clone(),
                    keep.map_or(Want::Hold, |v| Want::Set(v.clone())),
                );
            }
            wanted
        };
        want.labels = resolve(
            labels.get(node.name.as_str()),
            &node.labels,
            "label",
            &mut conflicts,
        );
        want.annotations = resolve(
            annotations.get(node.name.as_str()),
            &node.annotations,
            "annotation",
            &mut conflicts,
        );
        for (id, values) in taints.get(node.name.as_str()).into_iter().flatten() {
            if values.len() == 1 {
                let (taint, _) = values.values().next().expect("one value");
                want.taints.insert(id.clone(), taint.clone());
                continue;
            }
            conflicts.push(Conflict {
                node: node.name.clone(),
                key: format!("taint {id}"),
                units: values
                    .values()
                    .flat_map(|(_, u)| u.iter().cloned())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
            });
            // Keep the node's current taint if it is one of those asked for.
            if let Some(current) = node.taints.iter().find(|t| {
                taint_id(t) == *id && values.contains_key(&t.value.clone().unwrap_or_default())
            }) {
                want.taints.insert(id.clone(), current.clone());
            }
        }
        out.insert(node.name.clone(), want);
    }
    conflicts.sort();
    (out, conflicts)
}

/// `ready/total` and the ready and not-ready members, sorted by name.
pub fn readiness(
    member_names: &BTreeSet<String>,
    nodes: &[NodeInfo],
) -> (String, Vec<String>, Vec<String>) {
    let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
    for node in nodes.iter().filter(|n| member_names.contains(&n.name)) {
        if node.ready {
            ready.push(node.name.clone());
        } else {
            not_ready.push(node.name.clone());
        }
    }
    ready.sort();
    not_ready.sort();
    let rate = format!("{}/{}", ready.len(), ready.len() + not_ready.len());
    (rate, ready, not_ready)
}

/// The units a group's `autoFindNodeKeys` makes: one per distinct
/// combination of those labels' values among the nodes that carry all of
/// them, named from the values (sorted by key, joined with `-`; cleaned and
/// suffixed with a stable hash when that is not a valid label), each with the
/// `matchLabels` that select its nodes.
pub fn auto_found_units(
    keys: &[String],
    nodes: &[NodeInfo],
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut out = BTreeMap::new();
    if sorted.is_empty() {
        return out;
    }
    for node in nodes {
        let values: Option<BTreeMap<String, String>> = sorted
            .iter()
            .map(|k| node.labels.get(*k).map(|v| ((*k).clone(), v.clone())))
            .collect();
        let Some(values) = values else { continue };
        let joined: Vec<&str> = values.values().map(String::as_str).collect();
        let name = child_name(&joined.join("-"), NameRule::UnitLabel);
        out.insert(name, values);
    }
    out
}

/// The spec of the default unit: every node, type `other`.
pub fn default_unit_spec() -> NodeUnitSpec {
    NodeUnitSpec {
        unit_type: NodeUnitType::Other,
        selector: Some(Selector::default()),
        ..NodeUnitSpec::default()
    }
}

/// What membership reads of a Node.
pub fn node_info(node: &Node) -> NodeInfo {
    let spec = node.spec.as_ref();
    NodeInfo {
        name: node.name_any(),
        labels: node.labels().clone(),
        annotations: node.annotations().clone(),
        taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        ready: node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
    }
}

#[cfg(test)]
pub(crate) mod tests;
