//! ServiceGrid: one topology-aware Service.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::{controlled_by, now, Context, Error};
use crate::render::{self, GridError};
use crate::status::{self, reason, Failure};
use crate::ServiceGrid;

/// Reconciles one ServiceGrid: applies `{grid}-svc` (its allocated
/// `clusterIP` and node ports are kept: the controller never sets them unless
/// the template does) and reports a `Synced` condition.
pub async fn reconcile_service(grid: Arc<ServiceGrid>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.note_reconcile(&*grid);
    if let Some(done) = ctx.copy_or_deleted(&*grid).await? {
        return Ok(done);
    }
    // Distributed from here (or no longer): the copies in each managed
    // cluster's namespace (a ServiceGrid has no per-site state to aggregate).
    ctx.distribute(&*grid, None, None, &now()).await?;
    let namespace = grid.namespace().ok_or(GridError::NotPersisted)?;
    let uid = grid.uid().ok_or(GridError::NotPersisted)?;
    let desired = render::render_service(&grid)?;
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
        .map_err(|err| Failure {
            reason: reason::APPLY_FAILED,
            message: format!("Service {name}: {err}"),
        });
    ctx.metrics.set_children(
        &Service::kind(&()),
        Context::grid_key(&*grid),
        usize::from(outcome.is_ok() || live.is_some()),
    );

    let previous = grid
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok());
    let status =
        status::service_status(&outcome, grid.meta().generation, previous.as_ref(), &now());
    if let Err(failure) = &outcome {
        if status::service_failure_is_new(failure, previous.as_ref()) {
            tracing::warn!(grid = %grid.name_any(), %namespace, "{}", failure.message);
            ctx.warn(&*grid, failure.reason, failure.message.clone())
                .await;
        }
    }
    ctx.apply_status(&*grid, previous.as_ref(), status).await?;
    match outcome {
        Ok(()) => Ok(Action::requeue(ctx.resync)),
        Err(_) => Err(Error::Sites { failed: 1 }),
    }
}
