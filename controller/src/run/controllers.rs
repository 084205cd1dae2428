//! The controllers themselves, wired together: a metadata-only reflector of
//! nodes whose label fingerprint re-reconciles every grid when sites change,
//! one kube-runtime `Controller` per grid kind (built alike, by
//! [`GridControllers`]), the site-manager controller, and in a managed
//! cluster the pull from the control cluster.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{future, FutureExt as _, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use parking_lot::Mutex;
use sitegrid_api::labels::GRID_SELECTOR_LABEL;
use sitegrid_api::{DeploymentGrid, ServiceGrid, StatefulSetGrid};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Options;
use crate::fed::{self, distribute, fleet::Fleet};
use crate::health::Health;
use crate::metrics::{KindCensus, Metrics};
use crate::reconcile::{
    error_policy, reconcile_service, reconcile_workload, Context, WorkloadGridKind,
};
use crate::shared::trigger::{on_change, TriggerBackoff};
use crate::shared::{GridKind, FIELD_MANAGER};

type NodeMeta = PartialObjectMeta<Node>;
type NodeEvent = Result<watcher::Event<NodeMeta>, watcher::Error>;

/// Reflects nodes, then runs the controllers until `stop`.
pub(super) async fn run_controllers(
    client: Client,
    options: &Options,
    health: Arc<Health>,
    stop: impl Future<Output = ()> + Send + 'static,
) {
    let stop = future::FutureExt::shared(Box::pin(stop));
    let Some((nodes, node_task, site_rx)) = sync_nodes(&client, &health, stop.clone()).await else {
        return;
    };
    let (fleet, fleet_task) = Fleet::start(client.clone(), options.cluster_grace);
    let reach = fleet.clone();
    health.metrics.set_fleet(move || reach.reachability());
    let ctx = context(&client, options, &health, nodes, fleet.clone());
    let grids = GridControllers {
        client: client.clone(),
        config: controller::Config::default().concurrency(options.concurrency),
        fleet: &fleet,
        metrics: &health.metrics,
        site_rx: &site_rx,
        stop: stop.clone(),
    };
    let (deployments, statefulsets) = (
        grids.workload::<DeploymentGrid>(),
        grids.workload::<StatefulSetGrid>(),
    );
    let services = grids.service();
    let stores = (deployments.store(), statefulsets.store(), services.store());
    let listed = stores.clone();
    let census_ctx = ctx.clone();
    health.metrics.set_census(move || {
        vec![
            census(&census_ctx, &stores.0, "Deployment"),
            census(&census_ctx, &stores.1, "StatefulSet"),
            census(&census_ctx, &stores.2, "Service"),
        ]
    });

    let (metrics, nodes) = (health.metrics.clone(), ctx.nodes.clone());
    let others = future::join(
        site_manager(client.clone(), options, metrics.clone(), stop.clone()),
        managed(
            client,
            options,
            nodes,
            site_rx.clone(),
            metrics,
            stop.clone(),
        ),
    );
    future::join4(
        others,
        drain(
            deployments.run(reconcile_workload, error_policy, ctx.clone()),
            until_stopped(stop.clone(), is_listed(&listed.0)),
        ),
        drain(
            statefulsets.run(reconcile_workload, error_policy, ctx.clone()),
            until_stopped(stop.clone(), is_listed(&listed.1)),
        ),
        drain(
            services.run(reconcile_service, error_policy, ctx),
            until_stopped(stop.clone(), is_listed(&listed.2)),
        ),
    )
    .await;
    node_task.abort();
    fleet_task.abort();
    tracing::info!("controllers stopped");
}

/// Starts the node reflector and waits for its first list (not ready until
/// then): the nodes, the task feeding them, and their label fingerprint.
/// `None` when `stop` came first or the watch ended.
async fn sync_nodes(
    client: &Client,
    health: &Health,
    stop: impl Future<Output = ()>,
) -> Option<(Store<NodeMeta>, JoinHandle<()>, watch::Receiver<u64>)> {
    let (nodes, node_events) = node_reflector(client.clone());
    let (node_task, site_rx) = watch_sites(nodes.clone(), node_events);
    health.set_not_ready("waiting for the node cache");
    tokio::select! {
        ready = nodes.wait_until_ready() => if ready.is_err() {
            node_task.abort();
            return None;
        },
        () = stop => {
            node_task.abort();
            return None;
        }
    }
    health.set_ready();
    tracing::info!(
        nodes = nodes.state().len(),
        "node cache synced; reconciling"
    );
    Some((nodes, node_task, site_rx))
}

/// What every grid reconcile shares.
fn context(
    client: &Client,
    options: &Options,
    health: &Health,
    nodes: Store<NodeMeta>,
    fleet: Arc<Fleet>,
) -> Arc<Context> {
    let reporter = Reporter {
        controller: FIELD_MANAGER.into(),
        instance: options.election.as_ref().map(|e| e.identity.clone()),
    };
    Arc::new(Context {
        client: client.clone(),
        nodes,
        recorder: Recorder::new(client.clone(), reporter),
        metrics: health.metrics.clone(),
        resync: options.resync,
        reconciled_versions: Mutex::new(HashMap::new()),
        fleet,
        failure_counts: Mutex::new(HashMap::new()),
    })
}

/// What every grid kind's `Controller` is built from.
struct GridControllers<'a, S> {
    client: Client,
    config: controller::Config,
    fleet: &'a Fleet,
    /// Each controller's counters start at 0 when it is built.
    metrics: &'a Metrics,
    /// The nodes' label fingerprint: it changes when sites may have.
    site_rx: &'a watch::Receiver<u64>,
    stop: S,
}

impl<S: Future<Output = ()> + Clone + Send + Sync + 'static> GridControllers<'_, S> {
    /// The controller of a workload grid kind: also woken by the grid's
    /// copies in the dedicated namespaces (they carry the managed clusters'
    /// reports) and by sites coming and going.
    fn workload<G: WorkloadGridKind>(&self) -> Controller<G> {
        self.controller::<G, G::Child>(|controller| {
            controller
                .watches(
                    Api::<G>::all(self.client.clone()),
                    distribute::copies_config(),
                    |copy| distribute::original_of(&copy),
                )
                .reconcile_all_on(on_change(self.site_rx.clone()))
        })
    }

    /// The ServiceGrid controller: one Service whatever the sites, and no
    /// per-site state to gather from copies.
    fn service(&self) -> Controller<ServiceGrid> {
        self.controller::<ServiceGrid, Service>(|controller| controller)
    }

    /// A controller of grid kind `K` owning its children of kind `C`
    /// (watched by label, so unrelated objects are never cached), with the
    /// triggers `wake` adds, woken when the managed clusters change, and
    /// stopped by `stop` after the reconciles in flight.
    fn controller<K: GridKind, C: GridKind>(
        &self,
        wake: impl FnOnce(Controller<K>) -> Controller<K>,
    ) -> Controller<K> {
        self.metrics.controlling(&K::kind(&()));
        let owned = watcher::Config::default().labels(GRID_SELECTOR_LABEL);
        let controller = Controller::new(
            Api::<K>::all(self.client.clone()),
            watcher::Config::default(),
        )
        .with_config(self.config.clone())
        // Before `owns`: the backoff is the one of the watches added after it.
        .trigger_backoff(TriggerBackoff::default())
        .owns(Api::<C>::all(self.client.clone()), owned);
        wake(controller)
            .reconcile_all_on(self.fleet.changes())
            .graceful_shutdown_on(self.stop.clone())
    }
}

/// The site-manager controller (NodeUnits and NodeGroups), unless turned
/// off; it runs under the same lease.
async fn site_manager(
    client: Client,
    options: &Options,
    metrics: Arc<Metrics>,
    stop: impl Future<Output = ()>,
) {
    if let Some(site_options) = options.site_manager {
        crate::site_manager::sync::run(client, site_options, metrics, stop).await;
    }
}

/// Managed-cluster mode: follows the control cluster named by the parent
/// Secret, if there is one.
async fn managed(
    client: Client,
    options: &Options,
    nodes: Store<NodeMeta>,
    site_rx: watch::Receiver<u64>,
    metrics: Arc<Metrics>,
    stop: impl Future<Output = ()> + Send + Clone + 'static,
) {
    if let Some(managed) = options.managed.clone() {
        fed::managed::run(client, managed, nodes, site_rx, metrics, stop).await;
    }
}

/// Feeds the node reflector and publishes the nodes' label fingerprint each
/// time it changes (relabels, nodes added or removed; not heartbeats).
fn watch_sites(
    nodes: Store<NodeMeta>,
    node_events: impl Stream<Item = NodeEvent> + Send + 'static,
) -> (JoinHandle<()>, watch::Receiver<u64>) {
    let (site_tx, site_rx) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(node_events);
        let mut last = None;
        while let Some(event) = events.next().await {
            if let Err(err) = event {
                tracing::warn!(%err, "node watch");
                continue;
            }
            let state = nodes.state();
            let fingerprint = crate::grid_sites::label_fingerprint(state.iter().map(|n| {
                (
                    n.metadata.name.as_deref().unwrap_or_default(),
                    n.metadata.labels.as_ref(),
                )
            }));
            if last != Some(fingerprint) {
                last = Some(fingerprint);
                // Nobody listening is fine: the controllers have stopped.
                let _ = site_tx.send(fingerprint);
            }
        }
    });
    (task, site_rx)
}

/// A metadata-only reflector of all nodes: sites come from labels only.
fn node_reflector(client: Client) -> (Store<NodeMeta>, impl Stream<Item = NodeEvent>) {
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(
            Api::<PartialObjectMeta<Node>>::all(client),
            watcher::Config::default(),
        )
        .default_backoff(),
    );
    (reader, stream)
}

/// What the gauges of one grid kind are made of, read at scrape time.
fn census<K: Resource<DynamicType = ()> + Clone>(
    ctx: &Context,
    store: &Store<K>,
    child_kind: &'static str,
) -> KindCensus {
    let reconciled = ctx.reconciled_versions.lock();
    let grids = store
        .state()
        .iter()
        .map(|grid| {
            let key = Context::grid_key(&**grid);
            let done = reconciled.get(&key) == grid.meta().resource_version.as_ref();
            (key, done)
        })
        .collect();
    KindCensus {
        kind: K::kind(&()).into_owned(),
        child_kind,
        grids,
    }
}

/// After `stop`, how long the reconciles in flight may take to finish
/// (Kubernetes sends SIGKILL 30 s after SIGTERM by default; the lease is
/// released after them). One cut short is safe: every write is an
/// idempotent apply, and the next leader reconciles every grid.
const DRAIN: Duration = Duration::from_secs(10);

/// Whether `store` has had its first full list (now, without waiting).
fn is_listed<K: Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> impl Fn() -> bool {
    let store = store.clone();
    move || matches!(store.wait_until_ready().now_or_never(), Some(Ok(())))
}

/// Resolves when a controller stopped by `stop` must be dropped: at once if
/// its store never listed (kube-runtime holds its runner until then, and a
/// graceful shutdown does not release it: a grid kind the API server does
/// not serve, `404`, kept the process from exiting), else after [`DRAIN`].
async fn until_stopped(stop: impl Future<Output = ()>, listed: impl Fn() -> bool) {
    stop.await;
    if listed() {
        tokio::time::sleep(DRAIN).await;
        tracing::warn!(wait = ?DRAIN, "reconciles still running after the drain; stopping them");
    }
}

/// Runs a controller's results until they end (a graceful shutdown after
/// `stop`) or `cut_off` resolves.
async fn drain<S, T, E>(results: S, cut_off: impl Future<Output = ()>)
where
    S: Stream<Item = Result<T, E>>,
    E: std::fmt::Display,
{
    let results = results.for_each(|result| {
        if let Err(err) = result {
            // Reconcile errors are logged by the error policy; these are the
            // controller's own (watch failures, missing objects).
            tracing::debug!(%err, "controller");
        }
        future::ready(())
    });
    tokio::select! {
        () = results => {}
        () = cut_off => {}
    }
}
