//! `kubectl sitegrid sites`: the NodeUnits, their nodes and readiness.
//!
//! A unit's nodes and readiness are its `status` (`readyNodes`,
//! `notReadyNodes`, `readyRate`), which sitegrid-controller's site manager
//! keeps. A unit without a status yet (the controller has not handled it)
//! is derived instead: the nodes `spec.nodes` names and those carrying the
//! unit's label `<unit>: nodeunits.superedge.io`, ready by their `Ready`
//! condition (a `spec.selector` is not evaluated here: the controller does
//! that and labels the nodes).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use serde::Serialize;
use sitegrid_api::site_manager::{NodeGroup, NodeUnit, NodeUnitType, UNIT_LABEL_VALUE};

use crate::client::Cluster;
use crate::error::Error;
use crate::table::Table;
use crate::{Output, Printed};

/// One NodeUnit.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SiteRow {
    /// The unit's name.
    pub name: String,
    /// `edge`, `cloud`, `master` or `other`.
    #[serde(rename = "type")]
    pub unit_type: String,
    /// `ready/total`.
    pub ready: String,
    /// Member nodes, sorted.
    pub nodes: Vec<String>,
    /// Members whose `Ready` condition is not `True`.
    pub not_ready_nodes: Vec<String>,
    /// Whether its nodes are cordoned.
    pub unschedulable: bool,
    /// The NodeGroups it belongs to.
    pub groups: Vec<String>,
    /// Where nodes and readiness come from.
    pub source: SiteSource,
    /// Its problems (conditions that are `True`: `Conflict`, `InvalidSelector`).
    pub messages: Vec<String>,
    /// `metadata.creationTimestamp`, RFC 3339.
    pub created: Option<String>,
}

/// Where a unit's nodes and readiness come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SiteSource {
    /// The unit's `status`, written by sitegrid-controller.
    UnitStatus,
    /// Derived from `spec.nodes`, the nodes' unit label and their `Ready` condition.
    Nodes,
}

/// Reads the units, their groups (and the nodes if some unit has no status) and prints them.
pub async fn run(cluster: &Cluster, output: Option<Output>) -> Result<Printed, Error> {
    let units = cluster
        .list_cluster::<NodeUnit>()
        .await?
        .ok_or_else(|| Error::CrdsMissing {
            resources: vec!["nodeunits.site.superedge.io".into()],
        })?;
    let groups = cluster
        .list_cluster::<NodeGroup>()
        .await?
        .unwrap_or_default();
    let nodes = if units.iter().any(|u| !has_status(u)) {
        cluster.nodes().await?
    } else {
        Vec::new()
    };
    let rows = build(&units, &groups, &nodes);
    match output {
        Some(Output::Json) => serde_json::to_string_pretty(&serde_json::json!({ "sites": rows }))
            .map(|s| Printed::out(s + "\n"))
            .map_err(|e| Error::Unreadable(e.to_string())),
        _ if rows.is_empty() => Ok(Printed::err("No NodeUnits found.\n".into())),
        wide => Ok(Printed::out(table(
            &rows,
            wide == Some(Output::Wide),
            jiff::Timestamp::now().as_second(),
        ))),
    }
}

fn has_status(unit: &NodeUnit) -> bool {
    unit.status
        .as_ref()
        .is_some_and(|s| !s.ready_rate.is_empty())
}

/// One row per unit, by name.
pub fn build(units: &[NodeUnit], groups: &[NodeGroup], nodes: &[Node]) -> Vec<SiteRow> {
    let mut rows: Vec<SiteRow> = units.iter().map(|u| row(u, groups, nodes)).collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

fn row(unit: &NodeUnit, groups: &[NodeGroup], nodes: &[Node]) -> SiteRow {
    let name = unit.metadata.name.clone().unwrap_or_default();
    let (ready, mut members, not_ready, source) = match unit.status.as_ref() {
        Some(s) if has_status(unit) => {
            let members = s.ready_nodes.iter().chain(&s.not_ready_nodes).cloned();
            let not_ready = s.not_ready_nodes.clone();
            (
                s.ready_rate.clone(),
                members.collect(),
                not_ready,
                SiteSource::UnitStatus,
            )
        }
        _ => derived(unit, &name, nodes),
    };
    members.sort();
    let mut messages: Vec<String> = unit
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| c.status == "True")
        .map(|c| format!("{} ({}): {}", c.type_, c.reason, c.message))
        .collect();
    if source == SiteSource::Nodes {
        messages.push(
            "no status yet: derived from spec.nodes and the nodes' unit label (is sitegrid-controller running?)"
                .to_owned(),
        );
    }
    SiteRow {
        unit_type: unit_type(unit.spec.unit_type).to_owned(),
        ready,
        nodes: members,
        not_ready_nodes: not_ready,
        unschedulable: unit.spec.unschedulable,
        groups: groups_of(&name, groups),
        source,
        messages,
        created: unit
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| sitegrid_apimachinery::duration::format_timestamp(t.0)),
        name,
    }
}

/// Members and readiness from the nodes, for a unit without a status.
fn derived(
    unit: &NodeUnit,
    name: &str,
    nodes: &[Node],
) -> (String, Vec<String>, Vec<String>, SiteSource) {
    let named: BTreeSet<&str> = unit.spec.nodes.iter().map(String::as_str).collect();
    let members: Vec<&Node> = nodes
        .iter()
        .filter(|n| {
            let node = n.metadata.name.as_deref().unwrap_or_default();
            let labelled = n.metadata.labels.as_ref().and_then(|l| l.get(name));
            named.contains(node) || labelled.is_some_and(|v| v == UNIT_LABEL_VALUE)
        })
        .collect();
    let not_ready: Vec<String> = members
        .iter()
        .filter(|n| !node_ready(n))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let names: Vec<String> = members
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let rate = format!("{}/{}", names.len() - not_ready.len(), names.len());
    (rate, names, not_ready, SiteSource::Nodes)
}

/// Whether the node's `Ready` condition is `True`.
fn node_ready(node: &Node) -> bool {
    node.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The groups listing `unit` (their status, else their `spec.nodeUnits`).
fn groups_of(unit: &str, groups: &[NodeGroup]) -> Vec<String> {
    let mut out: Vec<String> = groups
        .iter()
        .filter(|g| {
            let listed = g.status.as_ref().map(|s| &s.node_units);
            let listed = listed
                .filter(|l| !l.is_empty())
                .unwrap_or(&g.spec.node_units);
            listed.iter().any(|u| u == unit)
        })
        .filter_map(|g| g.metadata.name.clone())
        .collect();
    out.sort();
    out
}

fn unit_type(t: NodeUnitType) -> &'static str {
    match t {
        NodeUnitType::Edge => "edge",
        NodeUnitType::Cloud => "cloud",
        NodeUnitType::Master => "master",
        NodeUnitType::Other => "other",
    }
}

/// `NAME TYPE READY NODES AGE`; wide: `… NODES NOT-READY UNSCHEDULABLE GROUPS AGE MESSAGE`.
pub fn table(rows: &[SiteRow], wide: bool, now: i64) -> String {
    let mut headers = vec!["name", "type", "ready", "nodes"];
    if wide {
        headers.extend(["not-ready", "unschedulable", "groups"]);
    }
    headers.push("age");
    if wide {
        headers.push("message");
    }
    let mut table = Table::new(headers);
    for r in rows {
        let mut cells = vec![
            r.name.clone(),
            r.unit_type.clone(),
            r.ready.clone(),
            r.nodes.join(","),
        ];
        if wide {
            cells.push(r.not_ready_nodes.join(","));
            cells.push(r.unschedulable.to_string());
            cells.push(r.groups.join(","));
        }
        cells.push(crate::age(r.created.as_deref(), now));
        if wide {
            cells.push(r.messages.join("; "));
        }
        table.row(cells);
    }
    table.render()
}
