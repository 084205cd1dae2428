//! `kubectl sitegrid status`: every grid × every site.
//!
//! Where a cell's figures come from:
//!
//! - **DeploymentGrid, StatefulSetGrid**: the grid's `status.states[site]`,
//!   which sitegrid-controller copies from the site's workload (ready =
//!   `readyReplicas`), and desired = the `replicas` of the template the
//!   grid's spec gives that site (`templates`, `defaultTemplateName`; 1 when
//!   unset), the number the controller applies. A cell is ready as the
//!   controller counts `readySites`: all desired replicas ready (and, for a
//!   Deployment, updated and available) and no `SiteReconciled=False`. The
//!   workload's own generation is not in the grid's status, so a rollout the
//!   Deployment controller has not yet observed is not seen here. A site
//!   whose nodes exist but which the status does not list (never
//!   reconciled, or cut by `StatesComplete=False`) is `?`.
//! - **ServiceGrid** (no per-site status exists): derived from the
//!   Service's EndpointSlices and the Nodes' labels — the ready / all
//!   endpoints on nodes of that site, i.e. what the site's nodes are served
//!   by sitegrid-proxy; a site with no ready endpoint is not ready.
//!
//! The sites of a grid are the distinct values of its `gridUniqKey` on the
//! Nodes (the controller's rule) and any its status still lists.

mod build;
mod render;

use std::collections::BTreeMap;

use serde::Serialize;
use sitegrid_api::{DeploymentGrid, ServiceGrid, StatefulSetGrid};
use sitegrid_cache::topology::NodeLabels;

use crate::client::{Cluster, Scope};
use crate::error::Error;
use crate::{Output, Printed};

pub use build::build;
pub use render::{json, table};

/// The grids × sites matrix.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Every site of any grid, sorted: the matrix's columns.
    pub sites: Vec<String>,
    /// One row per grid, by namespace, kind (dg, ssg, sg) and name.
    pub grids: Vec<GridRow>,
}

/// The kinds of grid, in row order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum GridKind {
    /// `dg`.
    DeploymentGrid,
    /// `ssg`.
    StatefulSetGrid,
    /// `sg`.
    ServiceGrid,
}

impl GridKind {
    /// kubectl's short name (`kubectl get dg/NAME` takes what the GRID column shows).
    pub fn short_name(self) -> &'static str {
        match self {
            GridKind::DeploymentGrid => "dg",
            GridKind::StatefulSetGrid => "ssg",
            GridKind::ServiceGrid => "sg",
        }
    }
}

/// One grid.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GridRow {
    /// Its kind.
    pub kind: GridKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The node label whose values are its sites.
    pub grid_uniq_key: String,
    /// Sites that are ready (the grid's `status.readySites` where it has one).
    pub ready_sites: usize,
    /// Its sites (the grid's `status.sites` where it has one).
    #[serde(rename = "sites")]
    pub site_count: usize,
    /// Its sites, by name.
    pub cells: BTreeMap<String, Cell>,
    /// What is wrong with the grid as a whole or with some site, one line each.
    pub messages: Vec<String>,
    /// `metadata.creationTimestamp`, RFC 3339.
    pub created: Option<String>,
}

/// One grid in one site.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    /// Ready replicas (workload grids) or ready endpoints (ServiceGrids);
    /// `None` when nothing reports the site.
    pub ready: Option<i64>,
    /// Desired replicas (workload grids: `None` when the site's template
    /// cannot be found) or all endpoints (ServiceGrids).
    pub desired: Option<i64>,
    /// Whether the site counts as ready (see the module docs).
    pub is_ready: bool,
    /// Where `ready` comes from.
    pub source: Source,
    /// The template the site runs (workload grids).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Why the site is not ready, when something says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Where a cell's `ready` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// The grid's `status.states[site]`, written by sitegrid-controller.
    GridStatus,
    /// The Service's EndpointSlices and the Nodes' labels.
    EndpointSlices,
    /// Nothing: the site has nodes, but the grid's status does not list it.
    NotReported,
}

/// What the matrix is built from, as read from the API server.
#[derive(Debug, Default)]
pub struct World {
    /// The DeploymentGrids in scope.
    pub deployment_grids: Vec<DeploymentGrid>,
    /// The StatefulSetGrids in scope.
    pub statefulset_grids: Vec<StatefulSetGrid>,
    /// The ServiceGrids in scope.
    pub service_grids: Vec<ServiceGrid>,
    /// Every Node's labels.
    pub nodes: NodeLabels,
    /// Each ServiceGrid's Service's EndpointSlices, by `(namespace, service)`.
    pub slices: BTreeMap<(String, String), Vec<serde_json::Value>>,
}

/// Reads the world, builds the matrix and prints it.
pub async fn run(cluster: &Cluster, output: Option<Output>) -> Result<Printed, Error> {
    let scope = cluster.scope();
    let world = read(cluster, &scope).await?;
    let report = build(&world);
    if output == Some(Output::Json) {
        return Ok(Printed::out(json(&report)?));
    }
    if report.grids.is_empty() {
        let place = match &scope {
            Scope::Namespace(ns) => format!(" in {ns} namespace"),
            Scope::All => String::new(),
        };
        return Ok(Printed::err(format!("No grids found{place}.\n")));
    }
    let wide = output == Some(Output::Wide);
    Ok(Printed::out(table(
        &report,
        scope == Scope::All,
        wide,
        now(),
    )))
}

/// Now, in Unix seconds (for ages).
fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

async fn read(cluster: &Cluster, scope: &Scope) -> Result<World, Error> {
    let (dg, ssg, sg) = (
        cluster.list::<DeploymentGrid>(scope).await?,
        cluster.list::<StatefulSetGrid>(scope).await?,
        cluster.list::<ServiceGrid>(scope).await?,
    );
    let (deployment_grids, statefulset_grids, service_grids) = match (dg, ssg, sg) {
        (Some(dg), Some(ssg), Some(sg)) => (dg, ssg, sg),
        (dg, ssg, sg) => {
            let missing = [
                (dg.is_none(), "deploymentgrids.superedge.io"),
                (ssg.is_none(), "statefulsetgrids.superedge.io"),
                (sg.is_none(), "servicegrids.superedge.io"),
            ];
            let resources = missing
                .iter()
                .filter(|(absent, _)| *absent)
                .map(|(_, r)| r.to_string())
                .collect();
            return Err(Error::CrdsMissing { resources });
        }
    };
    let nodes = crate::node_labels(cluster.node_metadata().await?);
    let mut slices = BTreeMap::new();
    if !service_grids.is_empty() {
        let version = cluster.slice_version().await?;
        for grid in &service_grids {
            let namespace = grid.metadata.namespace.clone().unwrap_or_default();
            let name = grid.metadata.name.as_deref().unwrap_or_default();
            let service = sitegrid_api::names::service_name(name);
            let found = cluster.slices_of(version, &namespace, &service).await?;
            slices.insert((namespace, service), found);
        }
    }
    Ok(World {
        deployment_grids,
        statefulset_grids,
        service_grids,
        nodes,
        slices,
    })
}
