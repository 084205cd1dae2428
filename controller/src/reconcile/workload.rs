//! DeploymentGrid and StatefulSetGrid: one workload per site.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde_json::{json, Value};
use sitegrid_api::keys::{SiteName, TemplateName};
use sitegrid_api::labels::GRID_SELECTOR_LABEL;
use sitegrid_api::names::site_child_name;
use sitegrid_api::{WorkloadGrid, WorkloadGridSpec};

use super::{controlled_by, Context};
use crate::fed::Role;
use crate::metrics::{GridLabels, SiteCount};
use crate::render::{self, GridError, SiteError, SiteResults};
use crate::shared::time::now;
use crate::shared::{Error, GridKind, FIELD_MANAGER};
use crate::status::{self, budget, reason, Failure};
use crate::workload::Workload;

/// A workload grid kind as the reconciler handles it: DeploymentGrid and
/// StatefulSetGrid, through one generic impl.
pub trait WorkloadGridKind: GridKind + WorkloadGrid {
    /// The workload each site runs.
    type Child: Workload + GridKind;
    /// The children per site (see [`render::render_workloads`]).
    fn render(&self, sites: &BTreeSet<SiteName>) -> Result<SiteResults<Self::Child>, GridError>;
    /// The grid's current status as JSON (`None` if it has none).
    fn status_json(&self) -> Option<Value>;
}

impl<G> WorkloadGridKind for G
where
    G: GridKind + WorkloadGrid,
    G::Workload: Workload<Spec = G::Template> + GridKind,
    G::Status: Serialize,
{
    type Child = G::Workload;

    fn render(&self, sites: &BTreeSet<SiteName>) -> Result<SiteResults<Self::Child>, GridError> {
        render::render_workloads(self, sites)
    }
    fn status_json(&self) -> Option<Value> {
        self.grid_status()
            .and_then(|s| serde_json::to_value(s).ok())
    }
}

/// Reconciles one DeploymentGrid or StatefulSetGrid.
///
/// Applies the child of every site that renders, deletes children of sites
/// that no longer exist, prunes unused templates when asked to, and reports
/// each site in `status.states`. A site whose template is missing or
/// unreadable, or whose object the API server refuses, keeps the child it has
/// (if any), gets a `SiteReconciled=False` condition and one Warning event;
/// the other sites are reconciled all the same.
pub async fn reconcile_workload<G: WorkloadGridKind>(
    grid: Arc<G>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let result = reconcile_once(grid.clone(), ctx.clone()).await;
    ctx.settle(&*grid, result)
}

/// One pass of [`reconcile_workload`].
async fn reconcile_once<G: WorkloadGridKind>(
    grid: Arc<G>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    ctx.note_reconcile(&*grid);
    if let Some(done) = ctx.copy_or_deleted(&*grid).await? {
        return Ok(done);
    }
    let (namespace, grid_name) = match (&grid.meta().namespace, &grid.meta().name) {
        (Some(ns), Some(name)) => (ns.clone(), name.clone()),
        _ => return Err(GridError::NotPersisted.into()),
    };
    let uid = grid.meta().uid.clone().ok_or(GridError::NotPersisted)?;
    let sites = ctx.sites(grid.grid_spec().grid_uniq_key());
    let rendered = match grid.render(&sites) {
        Ok(rendered) => rendered,
        Err(err) => {
            // Its workloads stay as they are: the sites are still targeted,
            // the ones ready are the ones last reported.
            let ready = grid.status_json().map_or(0, |s| count(&s, "readySites"));
            record_sites(
                &*grid,
                &ctx,
                SiteCount {
                    targeted: sites.len(),
                    ready,
                },
            );
            return report_unrenderable(&*grid, &ctx, &err).await;
        }
    };

    let api: Api<G::Child> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut existing = owned_children(&api, &grid_name, &uid).await?;
    let outcomes = apply_sites(&ctx, &api, &existing, &grid_name, rendered).await;
    let observed = Observed::tally(outcomes, &mut existing);
    let gone = existing
        .keys()
        .filter(|name| !observed.keep.contains(*name));
    delete_gone(&ctx, &api, gone, (&namespace, &grid_name)).await?;
    let child_kind = G::Child::kind(&());
    ctx.metrics
        .set_children(&child_kind, Context::grid_key(&*grid), observed.live.len());

    let spec = grid.grid_spec();
    if spec.auto_delete_unused_template() {
        prune_unused_templates(&*grid, &ctx, &spec.unused_templates()).await?;
    }
    report_status(&*grid, &ctx, &observed).await?;

    // A missing or unreadable template, or an object the API server
    // refuses as invalid, waits for the user to change the grid (or for the
    // next resync); a failure that may pass by itself is retried with backoff.
    if observed.transient > 0 {
        return Err(Error::Sites {
            failed: observed.transient,
        });
    }
    Ok(Action::requeue(ctx.resync))
}

/// The children of grid `grid_name` (with `uid`) that it controls, by name.
async fn owned_children<C: GridKind>(
    api: &Api<C>,
    grid_name: &str,
    uid: &str,
) -> Result<BTreeMap<String, C>, Error> {
    let selector = format!("{GRID_SELECTOR_LABEL}={grid_name}");
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|child| controlled_by(child, uid))
        .map(|child| (child.name_any(), child))
        .collect())
}

/// One site's outcome: its site, its child's name, and the child as the API
/// server now has it or why it could not be applied.
type SiteOutcome<C> = (SiteName, String, Result<C, SiteFailure>);

/// Applies each site's rendered child. Sites are applied a few at a time:
/// with thousands of sites one by one would take minutes, all at once would
/// flood the API server.
async fn apply_sites<C: Workload + GridKind>(
    ctx: &Context,
    api: &Api<C>,
    existing: &BTreeMap<String, C>,
    grid_name: &str,
    rendered: SiteResults<C>,
) -> Vec<SiteOutcome<C>> {
    futures::stream::iter(rendered.into_iter().map(|(site, result)| {
        let name = site_child_name(grid_name, site.as_str(), C::NAME_RULE);
        async move {
            let outcome = match result {
                Ok(desired) => apply_site(ctx, api, existing.get(&name), &desired, &site).await,
                Err(err) => Err(SiteFailure::unrendered(&err)),
            };
            (site, name, outcome)
        }
    }))
    .buffered(APPLY_CONCURRENCY)
    .collect()
    .await
}

/// Applies one site's child (unless `live` already matches it, or is
/// someone else's that applying would restart: see [`adoption_refused`]).
async fn apply_site<C: GridKind + Workload>(
    ctx: &Context,
    api: &Api<C>,
    live: Option<&C>,
    desired: &C,
    site: &SiteName,
) -> Result<C, SiteFailure> {
    if let Some(refused) = live.and_then(|live| adoption_refused(live, desired, site)) {
        return Err(refused);
    }
    ctx.apply_child(api, desired, live).await.map_err(|err| {
        let (kind, name) = (C::kind(&()), desired.name_any());
        SiteFailure {
            transient: err.is_transient(),
            failure: Failure {
                reason: reason::APPLY_FAILED,
                message: format!("site {site}: {kind} {name}: {err}"),
            },
        }
    })
}

/// Why `live`, a child the grid controls but sitegrid never applied (made by
/// SuperEdge's application-grid-controller), is not adopted: applying
/// `desired` would change a field that restarts its pods or that cannot
/// change. It keeps running as it is, and the site reports the field.
fn adoption_refused<C: GridKind + Workload>(
    live: &C,
    desired: &C,
    site: &SiteName,
) -> Option<SiteFailure> {
    // The usual case, a child sitegrid applied before, needs no JSON copies.
    if live
        .annotations()
        .contains_key(crate::drift::APPLIED_HASH_ANNOTATION)
    {
        return None;
    }
    let live_json = serde_json::to_value(live).ok()?;
    let mut desired_json = serde_json::to_value(desired).ok()?;
    crate::drift::fill_port_protocols(&mut desired_json);
    let difference = crate::drift::adoption_blocker(&live_json, &desired_json, C::ADOPTION_FIELDS)?;
    let (kind, namespace, name) = (
        C::kind(&()),
        live.namespace().unwrap_or_default(),
        live.name_any(),
    );
    Some(SiteFailure {
        transient: false,
        failure: Failure {
            reason: reason::ADOPTION_WOULD_RESTART,
            message: format!(
                "site {site}: {kind} {namespace}/{name} was not made by sitegrid and adopting it would restart its pods: {difference}; it is left as it is. Make the grid match it, or let sitegrid roll it: kubectl annotate {} {name} -n {namespace} {}={}",
                kind.to_lowercase(),
                crate::drift::ADOPT_ANNOTATION,
                crate::drift::ADOPT_ROLL,
            ),
        },
    })
}

/// What one pass found, per site.
#[derive(Default)]
struct Observed {
    /// The status of each site's live child.
    live: BTreeMap<SiteName, Value>,
    /// Sites whose child runs its current spec with all replicas available.
    ready: BTreeSet<SiteName>,
    /// Sites that could not be reconciled, and why.
    failures: BTreeMap<SiteName, Failure>,
    /// The children that belong to a site that still exists.
    keep: BTreeSet<String>,
    /// How many failures may pass without the user's help.
    transient: usize,
}

impl Observed {
    /// Sorts the outcomes; a site that failed keeps (and reports) the child
    /// it has, taken from `existing`.
    fn tally<C: Workload>(
        outcomes: Vec<SiteOutcome<C>>,
        existing: &mut BTreeMap<String, C>,
    ) -> Self {
        let mut observed = Self::default();
        for (site, name, outcome) in outcomes {
            observed.keep.insert(name.clone());
            let child = match outcome {
                Ok(child) => Some(child),
                Err(failed) => {
                    observed.transient += usize::from(failed.transient);
                    observed.failures.insert(site.clone(), failed.failure);
                    // A site that cannot be updated keeps running what it has.
                    existing.remove(&name)
                }
            };
            if let Some(child) = child {
                if child.is_ready() {
                    observed.ready.insert(site.clone());
                }
                observed.live.insert(site, child.status_json());
            }
        }
        observed
    }
}

/// Deletes the children named `gone` of grid `namespace/grid_name`: their
/// sites went away.
async fn delete_gone<'a, C: GridKind>(
    ctx: &Context,
    api: &Api<C>,
    gone: impl Iterator<Item = &'a String>,
    (namespace, grid_name): (&str, &str),
) -> Result<(), Error> {
    let kind = C::kind(&());
    for name in gone {
        tracing::info!(%kind, %namespace, %name, grid = %grid_name, "site gone; deleting its workload");
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => ctx.metrics.wrote("delete", &kind),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Writes the grid's status from what the pass `observed` (aggregated with
/// the managed clusters' reports for an original), with a Warning event for
/// each new failure.
async fn report_status<G: WorkloadGridKind>(
    grid: &G,
    ctx: &Context,
    observed: &Observed,
) -> Result<(), Error> {
    let previous = grid.status_json();
    let now = now();
    let Observed {
        live,
        ready,
        failures,
        ..
    } = observed;
    let mut status = status::workload_status(live, ready, failures, previous.as_ref(), &now);
    // Distributed from here (or no longer): the copies, and what the
    // managed clusters report, aggregated with this cluster's own sites.
    let distributed = ctx
        .distribute(grid, Some(&status), previous.as_ref(), &now)
        .await?;
    match (Role::of(grid.meta().labels.as_ref()), distributed) {
        (Role::Original, Some(aggregated)) => status = aggregated,
        // The managed clusters are not listed yet: keep what is shown.
        (Role::Original, None) => status = previous.clone().unwrap_or(status),
        _ => {}
    }
    record_sites(grid, ctx, site_count(&status));
    status::set_grid_condition(
        &mut status,
        previous.as_ref(),
        status::RENDERED_CONDITION,
        None,
        &now,
    );
    budget::fit_states(&mut status, previous.as_ref(), budget::STATES_BUDGET, &now);
    warn_new_failures(grid, ctx, failures, previous.as_ref()).await;
    if let Some((reason, message)) =
        status::grid_condition_is_new(&status, previous.as_ref(), budget::STATES_CONDITION)
    {
        ctx.warn(grid, &reason, message).await;
    }
    ctx.apply_status(grid, previous.as_ref(), status).await
}

/// The per-grid site gauges from the status about to be written (before
/// [`budget::fit_states`] may shorten `states`): every site in `states` is
/// targeted (this cluster's sites, reconciled or failed, and the managed
/// clusters' reports); `sites` counts those with a workload.
fn site_count(status: &Value) -> SiteCount {
    let listed = status
        .get("states")
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len);
    SiteCount {
        targeted: listed.max(count(status, "sites")),
        ready: count(status, "readySites"),
    }
}

/// A count field of a grid's status (0 when absent).
fn count(status: &Value, field: &str) -> usize {
    status
        .get(field)
        .and_then(Value::as_u64)
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// Keeps `sites` as the grid's, for `/metrics`.
fn record_sites<G: WorkloadGridKind>(grid: &G, ctx: &Context, sites: SiteCount) {
    let labels = GridLabels {
        kind: G::kind(&()).into_owned(),
        namespace: grid.namespace().unwrap_or_default(),
        grid: grid.name_any(),
    };
    ctx.metrics
        .set_sites(Context::grid_key(grid), labels, sites);
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

impl SiteFailure {
    /// A site whose template is missing or unreadable: only an edit helps.
    fn unrendered(err: &SiteError) -> Self {
        Self {
            transient: false,
            failure: Failure {
                reason: match err {
                    SiteError::UnknownTemplate { .. } => reason::TEMPLATE_NOT_FOUND,
                    SiteError::UnreadableTemplate { .. } => reason::INVALID_TEMPLATE,
                },
                message: err.to_string(),
            },
        }
    }
}

/// Publishes a Warning event for each site that newly failed (the first
/// [`MAX_SITE_EVENTS`], then one event counting the others).
async fn warn_new_failures<G: WorkloadGridKind>(
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
async fn report_unrenderable<G: WorkloadGridKind>(
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
async fn prune_unused_templates<G: WorkloadGridKind>(
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
