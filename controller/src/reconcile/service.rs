//! ServiceGrid: one topology-aware Service.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use sitegrid_api::ServiceGrid;

use super::{controlled_by, Context};
use crate::render::{self, GridError};
use crate::shared::time::now;
use crate::shared::Error;
use crate::status::{self, reason, Failure};

/// Reconciles one ServiceGrid: applies `{grid}-svc` (its allocated
/// `clusterIP` and node ports are kept: the controller never sets them unless
/// the template does) and reports a `Synced` condition.
///
/// A grid that cannot be rendered (a name too long for the label its
/// Service carries) or whose Service the API server refuses as invalid gets
/// `Synced=False` and one Warning event, and waits for an edit (or the next
/// resync); other failures are retried with backoff.
pub async fn reconcile_service(grid: Arc<ServiceGrid>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = reconcile_once(grid.clone(), ctx.clone()).await;
    ctx.settle(&*grid, result)
}

/// One pass of [`reconcile_service`].
async fn reconcile_once(grid: Arc<ServiceGrid>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.note_reconcile(&*grid);
    if let Some(done) = ctx.copy_or_deleted(&*grid).await? {
        return Ok(done);
    }
    // Distributed from here (or no longer): the copies in each managed
    // cluster's namespace (a ServiceGrid has no per-site state to aggregate).
    ctx.distribute(&*grid, None, None, &now()).await?;
    let (outcome, live) = apply_service(&grid, &ctx).await?;
    ctx.metrics.set_children(
        &Service::kind(&()),
        Context::grid_key(&*grid),
        usize::from(outcome.is_ok() || live.is_some()),
    );

    let previous = grid
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok());
    let transient = matches!(outcome, Err((_, true)));
    let outcome = outcome.map_err(|(failure, _)| failure);
    let status =
        status::service_status(&outcome, grid.meta().generation, previous.as_ref(), &now());
    if let Err(failure) = &outcome {
        if status::service_failure_is_new(failure, previous.as_ref()) {
            let namespace = grid.namespace().unwrap_or_default();
            tracing::warn!(grid = %grid.name_any(), %namespace, "{}", failure.message);
            ctx.warn(&*grid, failure.reason, failure.message.clone())
                .await;
        }
    }
    ctx.apply_status(&*grid, previous.as_ref(), status).await?;
    if transient {
        return Err(Error::Sites { failed: 1 });
    }
    Ok(Action::requeue(ctx.resync))
}

/// Whether the grid's Service was applied (or why not, and whether that
/// may pass without the user's help), and the Service it had before.
type ServiceOutcome = (Result<(), (Failure, bool)>, Option<Service>);

/// Renders the grid's Service and applies it unless it already matches.
async fn apply_service(grid: &ServiceGrid, ctx: &Context) -> Result<ServiceOutcome, Error> {
    let namespace = grid.namespace().ok_or(GridError::NotPersisted)?;
    let uid = grid.uid().ok_or(GridError::NotPersisted)?;
    let desired = match render::render_service(grid) {
        Ok(desired) => desired,
        Err(err) => {
            let Some(reason) = err.reason() else {
                return Err(err.into());
            };
            let failure = Failure {
                reason,
                message: err.to_string(),
            };
            return Ok((Err((failure, false)), None));
        }
    };
    let name = desired.name_any();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    let live = api
        .get_opt(&name)
        .await?
        .filter(|svc| controlled_by(svc, &uid));
    let outcome = ctx
        .apply_child(&api, &desired, live.as_ref())
        .await
        .map(|_| ())
        .map_err(|err| {
            let failure = Failure {
                reason: reason::APPLY_FAILED,
                message: format!("Service {name}: {err}"),
            };
            (failure, err.is_transient())
        });
    Ok((outcome, live))
}
