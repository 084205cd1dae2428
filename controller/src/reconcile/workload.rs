//! DeploymentGrid and StatefulSetGrid: one workload per site.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};
use sitegrid_api::keys::{GridUniqKey, SiteName, TemplateName};
use sitegrid_api::labels::GRID_SELECTOR_LABEL;
use sitegrid_api::names::site_child_name;
use sitegrid_api::GridTemplates;
use sitegrid_api::{DeploymentGrid, StatefulSetGrid};

use futures::StreamExt;

use super::{controlled_by, Context};
use crate::fed::Role;
use crate::render::{self, GridError, SiteError, SiteResults, Workload};
use crate::shared::time::now;
use crate::shared::{Error, GridKind, FIELD_MANAGER};
use crate::status::{self, budget, reason, Failure};

/// What the reconciler needs to know about a workload grid kind.
pub trait WorkloadGrid: GridKind {
    /// The workload each site runs.
    type Child: Workload + GridKind;
    /// The spec with the template fields.
    type Spec: GridTemplates;

    /// `spec.gridUniqKey`.
    fn key(&self) -> &GridUniqKey;
    /// The spec.
    fn grid_spec(&self) -> &Self::Spec;
    /// `spec.autoDeleteUnusedTemplate`.
    fn auto_delete_unused_template(&self) -> bool;
    /// The children per site (see [`crate::render`]).
    fn render(&self, sites: &BTreeSet<SiteName>) -> Result<SiteResults<Self::Child>, GridError>;
    /// The grid's current status as JSON (`None` if it has none).
    fn status_json(&self) -> Option<Value>;
    /// A child's status as JSON (`{}` if it has none).
    fn child_status(child: &Self::Child) -> Value;
    /// Whether the child runs its current spec with all replicas available.
    fn child_ready(child: &Self::Child) -> bool;
}

/// The parts of [`WorkloadGrid`] that read the same fields on both grid kinds
/// (kube-derive makes one concrete type per CRD, so they cannot share a struct).
macro_rules! workload_grid {
    ($grid:ty, $child:ty, $spec:ty, $render:path, |$c:ident| $ready:expr) => {
        impl WorkloadGrid for $grid {
            type Child = $child;
            type Spec = $spec;

            fn key(&self) -> &GridUniqKey {
                &self.spec.grid_uniq_key
            }
            fn grid_spec(&self) -> &Self::Spec {
                &self.spec
            }
            fn auto_delete_unused_template(&self) -> bool {
                self.spec.auto_delete_unused_template == Some(true)
            }
            fn render(&self, sites: &BTreeSet<SiteName>) -> Result<SiteResults<$child>, GridError> {
                $render(self, sites)
            }
            fn status_json(&self) -> Option<Value> {
                self.status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
            }
            fn child_status(child: &$child) -> Value {
                child
                    .status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
                    .unwrap_or_else(|| json!({}))
            }
            fn child_ready($c: &$child) -> bool {
                $ready
            }
        }
    };
}

workload_grid!(
    DeploymentGrid,
    Deployment,
    sitegrid_api::DeploymentGridSpec,
    render::render_deployments,
    |child| {
        let want = child.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        child.status.as_ref().is_some_and(|status| {
            current(child, status.observed_generation)
                && status.updated_replicas.unwrap_or(0) >= want
                && status.available_replicas.unwrap_or(0) >= want
        })
    }
);

workload_grid!(
    StatefulSetGrid,
    StatefulSet,
    sitegrid_api::StatefulSetGridSpec,
    render::render_statefulsets,
    |child| {
        let want = child.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        child.status.as_ref().is_some_and(|status| {
            current(child, status.observed_generation) && status.ready_replicas.unwrap_or(0) >= want
        })
    }
);

/// Whether the workload controller has seen the child's current spec.
fn current<C: Resource>(child: &C, observed: Option<i64>) -> bool {
    observed.unwrap_or(0) >= child.meta().generation.unwrap_or(0)
}

/// Reconciles one DeploymentGrid or StatefulSetGrid.
///
/// Applies the child of every site that renders, deletes children of sites
/// that no longer exist, prunes unused templates when asked to, and reports
/// each site in `status.states`. A site whose template is missing or
/// unreadable, or whose object the API server refuses, keeps the child it has
/// (if any), gets a `SiteReconciled=False` condition and one Warning event;
/// the other sites are reconciled all the same.
pub async fn reconcile_workload<G: WorkloadGrid>(
    grid: Arc<G>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let result = reconcile_once(grid.clone(), ctx.clone()).await;
    ctx.settle(&*grid, result)
}

/// One pass of [`reconcile_workload`].
async fn reconcile_once<G: WorkloadGrid>(grid: Arc<G>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.note_reconcile(&*grid);
    if let Some(done) = ctx.copy_or_deleted(&*grid).await? {
        return Ok(done);
    }
    let role = Role::of(grid.meta().labels.as_ref());
    let (namespace, grid_name) = match (&grid.meta().namespace, &grid.meta().name) {
        (Some(ns), Some(name)) => (ns.clone(), name.clone()),
        _ => return Err(GridError::NotPersisted.into()),
    };
    let uid = grid.meta().uid.clone().ok_or(GridError::NotPersisted)?;
    let child_kind = G::Child::kind(&());
    let sites = ctx.sites(grid.key());
    let rendered = match grid.render(&sites) {
        Ok(rendered) => rendered,
        Err(err) => return report_unrenderable(&*grid, &ctx, &err).await,
    };

    let api: Api<G::Child> = Api::namespaced(ctx.client.clone(), &namespace);
    let selector = format!("{GRID_SELECTOR_LABEL}={grid_name}");
    let mut existing: BTreeMap<String, G::Child> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|child| controlled_by(child, &uid))
        .map(|child| (child.name_any(), child))
        .collect();

    // Sites are applied a few at a time: with thousands of sites one by one
    // would take minutes, all at once would flood the API server.
    let outcomes: Vec<(SiteName, String, Result<G::Child, SiteFailure>)> =
        futures::stream::iter(rendered.into_iter().map(|(site, result)| {
            let name = site_child_name(&grid_name, site.as_str(), G::Child::NAME_RULE);
            let (ctx, api, existing, child_kind) = (&ctx, &api, &existing, &child_kind);
            async move {
                let outcome = match result {
                    Ok(desired) => ctx
                        .apply_child(api, &desired, existing.get(&name))
                        .await
                        .map_err(|err| SiteFailure {
                            transient: err.is_transient(),
                            failure: Failure {
                                reason: reason::APPLY_FAILED,
                                message: format!("site {site}: {child_kind} {name}: {err}"),
                            },
                        }),
                    Err(err) => Err(SiteFailure {
                        transient: false,
                        failure: Failure {
                            reason: match err {
                                SiteError::UnknownTemplate { .. } => reason::TEMPLATE_NOT_FOUND,
                                SiteError::UnreadableTemplate { .. } => reason::INVALID_TEMPLATE,
                            },
                            message: err.to_string(),
                        },
                    }),
                };
                (site, name, outcome)
            }
        }))
        .buffered(APPLY_CONCURRENCY)
        .collect()
        .await;

    let mut live = BTreeMap::new();
    let mut ready = BTreeSet::new();
    let mut failures = BTreeMap::new();
    let mut keep = BTreeSet::new();
    let mut transient = 0;
    for (site, name, outcome) in outcomes {
        keep.insert(name.clone());
        let child = match outcome {
            Ok(child) => Some(child),
            Err(failed) => {
                transient += usize::from(failed.transient);
                failures.insert(site.clone(), failed.failure);
                // A site that cannot be updated keeps running what it has.
                existing.remove(&name)
            }
        };
        if let Some(child) = child {
            if G::child_ready(&child) {
                ready.insert(site.clone());
            }
            live.insert(site, G::child_status(&child));
        }
    }

    for (name, _) in existing.iter().filter(|(name, _)| !keep.contains(*name)) {
        tracing::info!(kind = %child_kind, %namespace, %name, grid = %grid_name, "site gone; deleting its workload");
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => ctx.metrics.wrote("delete", &child_kind),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err.into()),
        }
    }
    ctx.metrics
        .set_children(&child_kind, Context::grid_key(&*grid), live.len());

    if grid.auto_delete_unused_template() {
        prune_unused_templates(&*grid, &ctx, &grid.grid_spec().unused_templates()).await?;
    }

    let previous = grid.status_json();
    let now = now();
    let mut status = status::workload_status(&live, &ready, &failures, previous.as_ref(), &now);
    // Distributed from here (or no longer): the copies, and what the
    // managed clusters report, aggregated with this cluster's own sites.
    let distributed = ctx
        .distribute(&*grid, Some(&status), previous.as_ref(), &now)
        .await?;
    match (role, distributed) {
        (Role::Original, Some(aggregated)) => status = aggregated,
        // The managed clusters are not listed yet: keep what is shown.
        (Role::Original, None) => status = previous.clone().unwrap_or(status),
        _ => {}
    }
    status::set_grid_condition(
        &mut status,
        previous.as_ref(),
        status::RENDERED_CONDITION,
        None,
        &now,
    );
    budget::fit_states(&mut status, previous.as_ref(), budget::STATES_BUDGET, &now);
    warn_new_failures(&*grid, &ctx, &failures, previous.as_ref()).await;
    if let Some((reason, message)) =
        status::grid_condition_is_new(&status, previous.as_ref(), budget::STATES_CONDITION)
    {
        ctx.warn(&*grid, &reason, message).await;
    }
    ctx.apply_status(&*grid, previous.as_ref(), status).await?;

    // A missing or unreadable template, or an object the API server
    // refuses as invalid, waits for the user to change the grid (or for the
    // next resync); a failure that may pass by itself is retried with backoff.
    if transient > 0 {
        return Err(Error::Sites { failed: transient });
    }
    Ok(Action::requeue(ctx.resync))
}

/// Sites applied at once.
const APPLY_CONCURRENCY: usize = 16;

/// Warning events published per reconcile for individual sites; the rest
/// are summed up in one more, so a template that fails on 10,000 sites is
/// not 10,000 events.
const MAX_SITE_EVENTS: usize = 10;

/// One site's failure, and whether it may pass without the user's help.
struct SiteFailure {
    failure: Failure,
    transient: bool,
}

/// Publishes a Warning event for each site that newly failed (the first
/// [`MAX_SITE_EVENTS`], then one event counting the others).
async fn warn_new_failures<G: WorkloadGrid>(
    grid: &G,
    ctx: &Context,
    failures: &BTreeMap<SiteName, Failure>,
    previous: Option<&Value>,
) {
    let new = status::new_failures(failures, previous);
    for (site, failure) in new.iter().take(MAX_SITE_EVENTS) {
        tracing::warn!(grid = %grid.name_any(), namespace = %grid.namespace().unwrap_or_default(), site = %site, reason = failure.reason, "{}", failure.message);
        ctx.warn(grid, failure.reason, failure.message.clone())
            .await;
    }
    if new.len() > MAX_SITE_EVENTS {
        let more = new.len() - MAX_SITE_EVENTS;
        let message = format!(
            "{more} more sites failed (see status.states[site] for each): {}",
            failures_by_reason(&new[MAX_SITE_EVENTS..])
        );
        tracing::warn!(grid = %grid.name_any(), namespace = %grid.namespace().unwrap_or_default(), "{message}");
        ctx.warn(grid, reason::SITES_FAILED, message).await;
    }
}

/// `ApplyFailed: 9990` style counts, by reason.
fn failures_by_reason(failures: &[(&SiteName, &Failure)]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, failure) in failures {
        *counts.entry(failure.reason).or_default() += 1;
    }
    counts
        .iter()
        .map(|(reason, n)| format!("{reason}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A grid that cannot be rendered at all: a `Rendered=False` grid condition
/// and one Warning event when it appears; its children (if an earlier spec
/// made any) are left as they are. Not retried: only an edit of the grid can
/// help, and the edit triggers a reconcile.
async fn report_unrenderable<G: WorkloadGrid>(
    grid: &G,
    ctx: &Context,
    err: &GridError,
) -> Result<Action, Error> {
    let Some(reason) = err.reason() else {
        return Err(err.clone().into());
    };
    let previous = grid.status_json();
    let now = now();
    let mut status = previous.clone().unwrap_or_else(|| json!({}));
    let condition = Some(("False", reason, err.to_string()));
    status::set_grid_condition(
        &mut status,
        previous.as_ref(),
        status::RENDERED_CONDITION,
        condition,
        &now,
    );
    if let Some((reason, message)) =
        status::grid_condition_is_new(&status, previous.as_ref(), status::RENDERED_CONDITION)
    {
        tracing::warn!(grid = %grid.name_any(), namespace = %grid.namespace().unwrap_or_default(), reason, "{message}");
        ctx.warn(grid, &reason, message).await;
    }
    ctx.apply_status(grid, previous.as_ref(), status).await?;
    Ok(Action::requeue(ctx.resync))
}

/// `autoDeleteUnusedTemplate: true`: removes `unused` from `spec.templatePool`.
///
/// The one edit the controller makes to a grid's spec, and only when the user
/// asked for it; a merge patch guarded by the grid's resourceVersion, so a
/// concurrent edit wins and the next reconcile looks again.
async fn prune_unused_templates<G: WorkloadGrid>(
    grid: &G,
    ctx: &Context,
    unused: &[TemplateName],
) -> Result<(), Error> {
    if unused.is_empty() {
        return Ok(());
    }
    let pool: serde_json::Map<String, Value> = unused
        .iter()
        .map(|name| (name.to_string(), Value::Null))
        .collect();
    let patch = json!({
        "metadata": {"resourceVersion": grid.meta().resource_version},
        "spec": {"templatePool": pool},
    });
    let api: Api<G> = Api::namespaced(ctx.client.clone(), &grid.namespace().unwrap_or_default());
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api
        .patch(&grid.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            ctx.metrics.wrote("patch", &G::kind(&()));
            let removed: Vec<&str> = unused.iter().map(TemplateName::as_str).collect();
            tracing::info!(grid = %grid.name_any(), removed = %removed.join(","), "pruned unused templates");
            Ok(())
        }
        // Someone else changed the grid meanwhile: their change triggers a new reconcile.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err.into()),
    }
}
