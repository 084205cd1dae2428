//! DeploymentGrid and StatefulSetGrid: one workload per site.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};

use super::{controlled_by, now, Context, Error, FIELD_MANAGER};
use crate::api::keys::{GridUniqKey, NodeUnit, TemplateName};
use crate::api::GridTemplates;
use crate::fed::control::FedKind;
use crate::fed::Role;
use crate::render::name::child_name;
use crate::render::{self, GridError, SiteError, SiteResults, Workload, GRID_SELECTOR_LABEL};
use crate::status::{self, reason, Failure};
use crate::{DeploymentGrid, StatefulSetGrid};

/// What the reconciler needs to know about a workload grid kind.
pub trait WorkloadGrid: FedKind {
    /// The workload each site runs.
    type Child: Workload + FedKind;
    /// The spec with the template fields.
    type Spec: GridTemplates;

    /// `spec.gridUniqKey`.
    fn key(&self) -> &GridUniqKey;
    /// The spec.
    fn grid_spec(&self) -> &Self::Spec;
    /// `spec.autoDeleteUnusedTemplate`.
    fn auto_delete_unused_template(&self) -> bool;
    /// The children per site (see [`crate::render`]).
    fn render(&self, units: &BTreeSet<NodeUnit>) -> Result<SiteResults<Self::Child>, GridError>;
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
            fn render(&self, units: &BTreeSet<NodeUnit>) -> Result<SiteResults<$child>, GridError> {
                $render(self, units)
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
    crate::DeploymentGridSpec,
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
    crate::StatefulSetGridSpec,
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
/// each site in `status.states`. A site whose template is missing keeps the
/// child it has (if any), gets a `SiteReconciled=False` condition and one
/// Warning event; the other sites are reconciled all the same.
pub async fn reconcile_workload<G: WorkloadGrid>(
    grid: Arc<G>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
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
    let units = ctx.sites(grid.key());
    let rendered = grid.render(&units)?;

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

    let mut live = BTreeMap::new();
    let mut ready = BTreeSet::new();
    let mut failures = BTreeMap::new();
    let mut keep = BTreeSet::new();
    for (unit, result) in rendered {
        let name = child_name(&format!("{grid_name}-{unit}"), G::Child::NAME_RULE);
        keep.insert(name.clone());
        let outcome = match result {
            Ok(desired) => ctx
                .apply_child(&api, &desired, existing.get(&name))
                .await
                .map_err(|err| Failure {
                    reason: reason::APPLY_FAILED,
                    message: format!("site {unit}: {child_kind} {name}: {err}"),
                }),
            Err(err @ SiteError::UnknownTemplate { .. }) => Err(Failure {
                reason: reason::TEMPLATE_NOT_FOUND,
                message: err.to_string(),
            }),
        };
        let child = match outcome {
            Ok(child) => Some(child),
            Err(failure) => {
                failures.insert(unit.clone(), failure);
                // A site that cannot be updated keeps running what it has.
                existing.remove(&name)
            }
        };
        if let Some(child) = child {
            if G::child_ready(&child) {
                ready.insert(unit.clone());
            }
            live.insert(unit, G::child_status(&child));
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
    for (unit, failure) in status::new_failures(&failures, previous.as_ref()) {
        tracing::warn!(grid = %grid_name, %namespace, site = %unit, reason = failure.reason, "{}", failure.message);
        ctx.warn(&*grid, failure.reason, failure.message.clone())
            .await;
    }
    ctx.apply_status(&*grid, previous.as_ref(), status).await?;

    // A missing template waits for the user; a refused apply is retried.
    let apply_failures = failures
        .values()
        .filter(|f| f.reason == reason::APPLY_FAILED)
        .count();
    if apply_failures > 0 {
        return Err(Error::Sites {
            failed: apply_failures,
        });
    }
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
