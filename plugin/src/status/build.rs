//! The matrix from what was read: pure, tested by value.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{DeploymentStatus, StatefulSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use sitegrid_api::keys::SiteName;
use sitegrid_api::{DeploymentGrid, ServiceGrid, StatefulSetGrid, TemplateError, WorkloadGridSpec};
use sitegrid_cache::topology::{self, EndpointRef, NodeLabels, Selection};

use super::{Cell, GridKind, GridRow, Report, Source, World};

/// The condition sitegrid-controller adds to a site's state when it could
/// not reconcile the site (controller/README.md, "Status").
const SITE_CONDITION: &str = "SiteReconciled";

/// The matrix of `world`: one row per grid, columns the union of their sites.
pub fn build(world: &World) -> Report {
    let mut grids: Vec<GridRow> = Vec::new();
    grids.extend(world.deployment_grids.iter().map(|g| {
        let view = deployment_view(g);
        workload_row(&view, &world.nodes)
    }));
    grids.extend(world.statefulset_grids.iter().map(|g| {
        let view = statefulset_view(g);
        workload_row(&view, &world.nodes)
    }));
    grids.extend(world.service_grids.iter().map(|g| service_row(g, world)));
    grids.sort_by(|a, b| (&a.namespace, a.kind, &a.name).cmp(&(&b.namespace, b.kind, &b.name)));
    let sites: BTreeSet<&String> = grids.iter().flat_map(|g| g.cells.keys()).collect();
    Report {
        sites: sites.into_iter().cloned().collect(),
        grids,
    }
}

/// What one site's workload reported, as the grid's status holds it.
struct SiteState {
    ready: i64,
    /// Deployments only: their readiness also wants updated and available replicas.
    updated: Option<i64>,
    available: Option<i64>,
    /// The controller's `SiteReconciled=False`, as `Reason: message`.
    failure: Option<String>,
}

/// The template a site runs and its replicas, or why it has none.
struct Planned {
    template: String,
    replicas: Result<i64, String>,
}

/// A DeploymentGrid or StatefulSetGrid, seen alike.
struct WorkloadView<'a> {
    kind: GridKind,
    meta: &'a ObjectMeta,
    key: &'a str,
    /// `status.states`; `None` when the grid has no status at all.
    states: Option<BTreeMap<String, SiteState>>,
    /// `status.readySites`, `status.sites`.
    counts: Option<(i32, i32)>,
    conditions: &'a [Condition],
    planned: Box<dyn Fn(&SiteName) -> Planned + 'a>,
}

fn deployment_view(grid: &DeploymentGrid) -> WorkloadView<'_> {
    let status = grid.status.as_ref();
    WorkloadView {
        kind: GridKind::DeploymentGrid,
        meta: &grid.metadata,
        key: grid.spec.grid_uniq_key.as_str(),
        states: status.map(|s| states(&s.states, deployment_state)),
        counts: status.and_then(|s| Some((s.ready_sites?, s.sites?))),
        conditions: status.map_or(&[], |s| &s.conditions),
        planned: Box::new(|site| planned(&grid.spec, site, |t| t.replicas)),
    }
}

fn statefulset_view(grid: &StatefulSetGrid) -> WorkloadView<'_> {
    let status = grid.status.as_ref();
    WorkloadView {
        kind: GridKind::StatefulSetGrid,
        meta: &grid.metadata,
        key: grid.spec.grid_uniq_key.as_str(),
        states: status.map(|s| states(&s.states, statefulset_state)),
        counts: status.and_then(|s| Some((s.ready_sites?, s.sites?))),
        conditions: status.map_or(&[], |s| &s.conditions),
        planned: Box::new(|site| planned(&grid.spec, site, |t| t.replicas)),
    }
}

fn states<S>(
    states: &BTreeMap<SiteName, S>,
    read: fn(&S) -> SiteState,
) -> BTreeMap<String, SiteState> {
    states
        .iter()
        .map(|(site, s)| (site.to_string(), read(s)))
        .collect()
}

fn deployment_state(s: &DeploymentStatus) -> SiteState {
    let failure = s.conditions.iter().flatten().find_map(|c| {
        (c.type_ == SITE_CONDITION && c.status == "False").then(|| failure(&c.reason, &c.message))
    });
    SiteState {
        ready: s.ready_replicas.unwrap_or(0).into(),
        updated: Some(s.updated_replicas.unwrap_or(0).into()),
        available: Some(s.available_replicas.unwrap_or(0).into()),
        failure,
    }
}

fn statefulset_state(s: &StatefulSetStatus) -> SiteState {
    let failure = s.conditions.iter().flatten().find_map(|c| {
        (c.type_ == SITE_CONDITION && c.status == "False").then(|| failure(&c.reason, &c.message))
    });
    SiteState {
        ready: s.ready_replicas.unwrap_or(0).into(),
        updated: None,
        available: None,
        failure,
    }
}

fn failure(reason: &Option<String>, message: &Option<String>) -> String {
    format!(
        "{}: {}",
        reason.as_deref().unwrap_or("Failed"),
        message.as_deref().unwrap_or_default()
    )
}

/// What the controller applies to `site`: `templates[site]`, else
/// `defaultTemplateName`, else `spec.template`; unset replicas mean 1.
fn planned<S: WorkloadGridSpec>(
    spec: &S,
    site: &SiteName,
    replicas: fn(&S::Template) -> Option<i32>,
) -> Planned {
    let replicas = match spec.template_for(site) {
        Ok(template) => Ok(replicas(template).unwrap_or(1).into()),
        Err(TemplateError::Missing(name)) => {
            Err(format!("templatePool has no template \"{name}\""))
        }
        Err(TemplateError::Unreadable { name, error }) => Err(format!(
            "templatePool entry \"{name}\" is not a valid template: {error}"
        )),
    };
    Planned {
        template: spec.template_name_for(site).to_string(),
        replicas,
    }
}

fn workload_row(view: &WorkloadView<'_>, nodes: &NodeLabels) -> GridRow {
    let mut sites = node_sites(nodes, view.key);
    sites.extend(view.states.iter().flat_map(|s| s.keys().cloned()));
    let cells: BTreeMap<String, Cell> = sites
        .into_iter()
        .map(|site| {
            let cell = workload_cell(view, &site);
            (site, cell)
        })
        .collect();
    let mut messages = grid_problems(view.conditions);
    if view.states.is_none() {
        messages.push(
            "no status yet: sitegrid-controller has not reconciled this grid (is it running?)"
                .to_owned(),
        );
    }
    messages.extend(site_problems(&cells));
    let computed = (cells.values().filter(|c| c.is_ready).count(), cells.len());
    let (ready_sites, site_count) = view.counts.map_or(computed, |(r, s)| (count(r), count(s)));
    GridRow {
        kind: view.kind,
        namespace: view.meta.namespace.clone().unwrap_or_default(),
        name: view.meta.name.clone().unwrap_or_default(),
        grid_uniq_key: view.key.to_owned(),
        ready_sites,
        site_count,
        cells,
        messages,
        created: created(view.meta),
    }
}

fn workload_cell(view: &WorkloadView<'_>, site: &str) -> Cell {
    let planned = (view.planned)(&SiteName::from(site));
    let (desired, template_problem) = match planned.replicas {
        Ok(d) => (Some(d), None),
        Err(problem) => (None, Some(problem)),
    };
    let Some(state) = view.states.as_ref().and_then(|s| s.get(site)) else {
        // Without any status the grid's message says why; with one, this site is missing from it.
        let missing = view
            .states
            .is_some()
            .then(|| "the grid's status does not list this site".to_owned());
        return Cell {
            ready: None,
            desired,
            is_ready: false,
            source: Source::NotReported,
            template: Some(planned.template),
            problem: template_problem.or(missing),
        };
    };
    let enough = |n: Option<i64>, d: i64| n.is_none_or(|n| n >= d);
    let is_ready = state.failure.is_none()
        && desired.is_some_and(|d| {
            state.ready >= d && enough(state.updated, d) && enough(state.available, d)
        });
    Cell {
        ready: Some(state.ready),
        desired,
        is_ready,
        source: Source::GridStatus,
        template: Some(planned.template),
        problem: state.failure.clone().or(template_problem),
    }
}

fn service_row(grid: &ServiceGrid, world: &World) -> GridRow {
    let namespace = grid.metadata.namespace.clone().unwrap_or_default();
    let name = grid.metadata.name.clone().unwrap_or_default();
    let key = grid.spec.grid_uniq_key.as_str();
    let service = sitegrid_api::names::service_name(&name);
    let slices = world.slices.get(&(namespace.clone(), service.clone()));
    let refs: Vec<EndpointRef> = slices
        .into_iter()
        .flatten()
        .flat_map(topology::slice_refs)
        .collect();
    let cells: BTreeMap<String, Cell> = node_sites(&world.nodes, key)
        .into_iter()
        .map(|site| {
            let cell = endpoint_cell(key, &site, &refs, &world.nodes);
            (site, cell)
        })
        .collect();
    let mut messages = grid_problems(grid.status.as_ref().map_or(&[], |s| &s.conditions));
    if slices.is_none_or(Vec::is_empty) {
        messages.push(format!(
            "no EndpointSlices for Service {namespace}/{service}"
        ));
    }
    messages.extend(site_problems(&cells));
    GridRow {
        kind: GridKind::ServiceGrid,
        ready_sites: cells.values().filter(|c| c.is_ready).count(),
        site_count: cells.len(),
        grid_uniq_key: key.to_owned(),
        created: created(&grid.metadata),
        namespace,
        name,
        cells,
        messages,
    }
}

/// A ServiceGrid in one site: the endpoints the proxy's filter keeps for the
/// site's nodes (`Selection::Site`, the one key a ServiceGrid writes).
fn endpoint_cell(key: &str, site: &str, refs: &[EndpointRef], nodes: &NodeLabels) -> Cell {
    let in_site = Selection::Site {
        key: key.to_owned(),
        value: site.to_owned(),
    };
    let kept: Vec<&EndpointRef> = refs
        .iter()
        .filter(|r| in_site.keeps(r.node.as_deref(), nodes))
        .collect();
    let ready = kept.iter().filter(|r| r.ready).count();
    Cell {
        ready: Some(ready as i64),
        desired: Some(kept.len() as i64),
        is_ready: ready > 0,
        source: Source::EndpointSlices,
        template: None,
        problem: (ready == 0).then(|| "no ready endpoint on this site's nodes".to_owned()),
    }
}

/// The distinct non-empty values of `key` on the nodes: the sites a grid has.
fn node_sites(nodes: &NodeLabels, key: &str) -> BTreeSet<String> {
    nodes
        .values()
        .filter_map(|labels| labels.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
        .collect()
}

/// The grid's conditions that report a problem (all of them are `False` when they do).
fn grid_problems(conditions: &[Condition]) -> Vec<String> {
    conditions
        .iter()
        .filter(|c| c.status == "False")
        .map(|c| format!("{}=False ({}): {}", c.type_, c.reason, c.message))
        .collect()
}

fn site_problems(cells: &BTreeMap<String, Cell>) -> impl Iterator<Item = String> + '_ {
    cells
        .iter()
        .filter_map(|(site, c)| Some(format!("{site}: {}", c.problem.as_ref()?)))
}

fn count(n: i32) -> usize {
    usize::try_from(n).unwrap_or(0)
}

fn created(meta: &ObjectMeta) -> Option<String> {
    let t = meta.creation_timestamp.as_ref()?;
    Some(sitegrid_apimachinery::duration::format_timestamp(t.0))
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
