//! Running the controller: leader election, the node reflector, one
//! kube-runtime `Controller` per grid kind, and graceful shutdown.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{future, Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::metrics::KindCensus;
use crate::reconcile::{self, Context};
use crate::render::GRID_SELECTOR_LABEL;
use crate::{DeploymentGrid, ServiceGrid, StatefulSetGrid};

type NodeMeta = PartialObjectMeta<Node>;
type NodeEvent = Result<watcher::Event<NodeMeta>, watcher::Error>;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reconcile every grid this often when nothing triggers it.
    pub resync: Duration,
    /// Grids reconciled at once, per kind.
    pub concurrency: u16,
    /// Leader election, or `None` to run unconditionally.
    pub election: Option<Election>,
}

/// Leader-election settings.
#[derive(Clone, Debug)]
pub struct Election {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// Lease duration.
    pub lease_duration: Duration,
    /// Renew this long before expiry.
    pub renew_margin: Duration,
}

/// How a run ended.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The leader lease cannot be used (yet): retried, and shown on `/readyz`.
    #[error("leader election ({namespace}/{name}): {source}")]
    Election {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Why.
        source: kube_lease_manager::LeaseManagerError,
    },
    /// Another replica took the lease while this one led; it stops so that
    /// only one replica ever reconciles.
    #[error("lost the leader lease {0}; exiting so the new leader works alone")]
    LostLease(String),
}

/// Runs until `shutdown` resolves (then returns `Ok`), or the lease is lost.
pub async fn run(
    client: Client,
    options: Options,
    ops: Arc<Health>,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let stopped = || shutdown.clone().cancelled_owned();

    let Some(election) = options.election.clone() else {
        ops.metrics.set_leader(true);
        run_controllers(client, &options, ops, stopped()).await;
        return Ok(());
    };

    let lease_name = format!("{}/{}", election.namespace, election.name);
    let to_error = |source| RunError::Election {
        namespace: election.namespace.clone(),
        name: election.name.clone(),
        source,
    };
    let secs = |d: Duration| d.as_secs().max(1);
    // The API server may not answer yet (or RBAC may not allow the Lease):
    // keep trying, alive but not ready, rather than exit.
    let mut stop = std::pin::pin!(stopped());
    let mut delay = Duration::from_secs(1);
    let manager = loop {
        let built = LeaseManagerBuilder::new(client.clone(), &election.name)
            .with_namespace(&election.namespace)
            .with_parameters(
                LeaseParams::new(
                    &election.identity,
                    secs(election.lease_duration),
                    secs(election.renew_margin),
                )
                .with_field_manager(format!("{}-lease", reconcile::FIELD_MANAGER)),
            )
            .build();
        let err = tokio::select! {
            built = built => match built {
                Ok(manager) => break manager,
                Err(err) => to_error(err),
            },
            () = &mut stop => return Ok(()),
        };
        tracing::warn!(%err, retry_in = ?delay, "cannot use the leader lease yet");
        ops.set_not_ready(&err.to_string());
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = &mut stop => return Ok(()),
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    };
    let (mut leading, lease_task) = manager.watch().await;
    // A standby replica is healthy and ready: it is doing what it should.
    ops.set_ready();
    tracing::info!(lease = %lease_name, identity = %election.identity, "waiting for the leader lease");

    loop {
        if *leading.borrow_and_update() {
            break;
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() {
                return Err(RunError::LostLease(lease_name));
            },
            () = &mut stop => {
                drop(leading);
                let _ = lease_task.await;
                return Ok(());
            }
        }
    }
    tracing::info!(lease = %lease_name, identity = %election.identity, "became the leader");
    ops.metrics.set_leader(true);

    let mut watch_lease = leading.clone();
    let lost = async move {
        loop {
            if watch_lease.changed().await.is_err() || !*watch_lease.borrow_and_update() {
                return;
            }
        }
    };
    let outcome = tokio::select! {
        () = run_controllers(client, &options, ops.clone(), stopped()) => Ok(()),
        () = lost => Err(RunError::LostLease(lease_name)),
    };
    ops.metrics.set_leader(false);
    // Dropping the receivers makes the lease task release the lease, so a
    // standby takes over at once rather than after the lease expires.
    drop(leading);
    match lease_task.await {
        Ok(Ok(_)) => tracing::info!("released the leader lease"),
        Ok(Err(err)) => tracing::warn!(%err, "releasing the leader lease"),
        Err(err) => tracing::warn!(%err, "lease task"),
    }
    outcome
}

/// Reflects nodes, then runs the three controllers until `stop`.
async fn run_controllers(
    client: Client,
    options: &Options,
    ops: Arc<Health>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let stop = future::FutureExt::shared(Box::pin(stop));
    let (nodes, node_events) = node_reflector(client.clone());
    let (site_tx, site_rx) = watch::channel(0u64);
    let nodes_for_fingerprint = nodes.clone();
    let node_task = tokio::spawn(async move {
        let mut events = std::pin::pin!(node_events);
        let mut last = None;
        while let Some(event) = events.next().await {
            if let Err(err) = event {
                tracing::warn!(%err, "node watch");
                continue;
            }
            let state = nodes_for_fingerprint.state();
            let fingerprint = crate::sites::label_fingerprint(state.iter().map(|n| {
                (
                    n.metadata.name.as_deref().unwrap_or_default(),
                    n.metadata.labels.as_ref(),
                )
            }));
            if last != Some(fingerprint) {
                last = Some(fingerprint);
                let _ = site_tx.send(fingerprint);
            }
        }
    });
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

    let ctx = Arc::new(Context {
        client: client.clone(),
        nodes,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: reconcile::FIELD_MANAGER.into(),
                instance: options.election.as_ref().map(|e| e.identity.clone()),
            },
        ),
        metrics: ops.metrics.clone(),
        resync: options.resync,
        reconciled: Mutex::new(HashMap::new()),
    });
    let config = controller::Config::default().concurrency(options.concurrency);
    let owned = || watcher::Config::default().labels(GRID_SELECTOR_LABEL);
    let sites_changed = || site_changes(site_rx.clone());

    let deployments = Controller::new(
        Api::<DeploymentGrid>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(config.clone())
    .owns(Api::<Deployment>::all(client.clone()), owned())
    .reconcile_all_on(sites_changed())
    .graceful_shutdown_on(stop.clone());
    let statefulsets = Controller::new(
        Api::<StatefulSetGrid>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(config.clone())
    .owns(Api::<StatefulSet>::all(client.clone()), owned())
    .reconcile_all_on(sites_changed())
    .graceful_shutdown_on(stop.clone());
    let services = Controller::new(
        Api::<ServiceGrid>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(config)
    .owns(Api::<Service>::all(client.clone()), owned())
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

    future::join3(
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
    tracing::info!("controllers stopped");
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

/// One `()` per change of the nodes' label fingerprint: re-reconcile every grid.
fn site_changes(rx: watch::Receiver<u64>) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
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
