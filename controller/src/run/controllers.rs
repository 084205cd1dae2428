//! The controllers themselves: a metadata-only reflector of nodes whose label
//! fingerprint re-reconciles every grid when sites change, and one
//! kube-runtime `Controller` per grid kind.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{future, Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
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
use crate::metrics::KindCensus;
use crate::reconcile::{self, Context};
use crate::shared::trigger::{on_change, TriggerBackoff};
use crate::shared::FIELD_MANAGER;

type NodeMeta = PartialObjectMeta<Node>;
type NodeEvent = Result<watcher::Event<NodeMeta>, watcher::Error>;

/// Reflects nodes, then runs the three controllers until `stop`.
pub(super) async fn run_controllers(
    client: Client,
    options: &Options,
    ops: Arc<Health>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let stop = future::FutureExt::shared(Box::pin(stop));
    let (nodes, node_events) = node_reflector(client.clone());
    let (node_task, site_rx) = watch_sites(nodes.clone(), node_events);
    ops.set_not_ready("waiting for the node cache");
    tokio::select! {
        ready = nodes.wait_until_ready() => if ready.is_err() {
            node_task.abort();
            return;
        },
        () = stop.clone() => {
            node_task.abort();
            return;
        }
    }
    ops.set_ready();
    tracing::info!(
        nodes = nodes.state().len(),
        "node cache synced; reconciling"
    );

    let (fleet, fleet_task) = Fleet::start(client.clone(), options.cluster_grace);
    let ctx = Arc::new(Context {
        client: client.clone(),
        nodes,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: FIELD_MANAGER.into(),
                instance: options.election.as_ref().map(|e| e.identity.clone()),
            },
        ),
        metrics: ops.metrics.clone(),
        resync: options.resync,
        reconciled: Mutex::new(HashMap::new()),
        fleet: fleet.clone(),
        failures: Mutex::new(HashMap::new()),
    });
    let config = controller::Config::default().concurrency(options.concurrency);
    let owned = || watcher::Config::default().labels(GRID_SELECTOR_LABEL);
    let sites_changed = || on_change(site_rx.clone());

    let deployments = Controller::new(
        Api::<DeploymentGrid>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(config.clone())
    .trigger_backoff(TriggerBackoff::default())
    .owns(Api::<Deployment>::all(client.clone()), owned())
    .watches(
        Api::<DeploymentGrid>::all(client.clone()),
        distribute::copies_config(),
        |copy| distribute::original_of(&copy),
    )
    .reconcile_all_on(sites_changed())
    .reconcile_all_on(fleet.changes())
    .graceful_shutdown_on(stop.clone());
    let statefulsets = Controller::new(
        Api::<StatefulSetGrid>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(config.clone())
    .trigger_backoff(TriggerBackoff::default())
    .owns(Api::<StatefulSet>::all(client.clone()), owned())
    .watches(
        Api::<StatefulSetGrid>::all(client.clone()),
        distribute::copies_config(),
        |copy| distribute::original_of(&copy),
    )
    .reconcile_all_on(sites_changed())
    .reconcile_all_on(fleet.changes())
    .graceful_shutdown_on(stop.clone());
    let services = Controller::new(
        Api::<ServiceGrid>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(config)
    .trigger_backoff(TriggerBackoff::default())
    .owns(Api::<Service>::all(client.clone()), owned())
    .reconcile_all_on(fleet.changes())
    .graceful_shutdown_on(stop.clone());

    let stores = (deployments.store(), statefulsets.store(), services.store());
    let census_ctx = ctx.clone();
    ops.metrics.set_census(move || {
        vec![
            census(&census_ctx, &stores.0, "Deployment"),
            census(&census_ctx, &stores.1, "StatefulSet"),
            census(&census_ctx, &stores.2, "Service"),
        ]
    });

    // The site-manager controller (NodeUnits and NodeGroups) shares the lease.
    let sites = {
        let site_options = options.site_manager;
        let (client, metrics, stop) = (client.clone(), ops.metrics.clone(), stop.clone());
        async move {
            if let Some(site_options) = site_options {
                crate::site_manager::sync::run(client, site_options, metrics, stop).await;
            }
        }
    };
    // Managed-cluster mode: follows the control cluster named by the
    // parent Secret, if there is one.
    let managed = {
        let (client, nodes, metrics, stop) = (
            client.clone(),
            ctx.nodes.clone(),
            ops.metrics.clone(),
            stop.clone(),
        );
        let (managed, site_rx) = (options.managed.clone(), site_rx.clone());
        async move {
            if let Some(managed) = managed {
                fed::managed::run(client, managed, nodes, site_rx, metrics, stop).await;
            }
        }
    };
    future::join4(
        future::join(sites, managed),
        drain(deployments.run(
            reconcile::reconcile_workload,
            reconcile::error_policy,
            ctx.clone(),
        )),
        drain(statefulsets.run(
            reconcile::reconcile_workload,
            reconcile::error_policy,
            ctx.clone(),
        )),
        drain(services.run(
            reconcile::reconcile_service,
            reconcile::error_policy,
            ctx.clone(),
        )),
    )
    .await;
    node_task.abort();
    fleet_task.abort();
    tracing::info!("controllers stopped");
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
    let reconciled = ctx.reconciled.lock();
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

async fn drain<S, T, E>(results: S)
where
    S: Stream<Item = Result<T, E>>,
    E: std::fmt::Display,
{
    results
        .for_each(|result| {
            if let Err(err) = result {
                // Reconcile errors are logged by the error policy; these are the
                // controller's own (watch failures, missing objects).
                tracing::debug!(%err, "controller");
            }
            future::ready(())
        })
        .await;
}
