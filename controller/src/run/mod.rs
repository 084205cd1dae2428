//! Running the controller: leader election, the node reflector, one
//! kube-runtime `Controller` per grid kind, and graceful shutdown.

mod controllers;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::shared::FIELD_MANAGER;
use controllers::run_controllers;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reconcile every grid this often when nothing triggers it.
    pub resync: Duration,
    /// Grids reconciled at once, per kind.
    pub concurrency: u16,
    /// Leader election, or `None` to run unconditionally.
    pub election: Option<Election>,
    /// The site-manager controller (NodeUnits and NodeGroups), or `None` (`--sites=false`).
    pub site_manager: Option<crate::site_manager::SiteManagerOptions>,
    /// Managed-cluster mode (`--parent-secret`), or `None`.
    pub managed: Option<crate::fed::managed::ManagedOptions>,
    /// Control-cluster mode: when a managed cluster counts as unreachable.
    pub cluster_grace: Duration,
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
    /// The leader could not show that its lease was renewed before a
    /// standby may take it (the API server unreachable or too slow): it
    /// stops rather than write beside a new leader.
    #[error(
        "the leader lease {0} was not seen renewed before it could expire; \
         exiting so that a new leader works alone"
    )]
    LeaseOverdue(String),
}

/// Runs until `shutdown` resolves (then returns `Ok`), or the lease is lost.
pub async fn run(
    client: Client,
    options: Options,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let stopped = || shutdown.clone().cancelled_owned();

    let Some(election) = options.election.clone() else {
        health.metrics.set_leader(true);
        run_controllers(client, &options, health, stopped()).await;
        return Ok(());
    };

    let lease_name = format!("{}/{}", election.namespace, election.name);
    let mut stop = std::pin::pin!(stopped());
    let Some(manager) = lease_manager(&client, &election, &health, stop.as_mut()).await else {
        return Ok(());
    };
    let release = CancellationToken::new();
    let (mut leading, lease_task) = hold_lease(manager, release.clone());
    // A standby replica is healthy and ready: it is doing what it should.
    health.set_ready();
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
                release.cancel();
                finish(lease_task).await;
                return Ok(());
            }
        }
    }
    tracing::info!(lease = %lease_name, identity = %election.identity, "became the leader");
    health.metrics.set_leader(true);

    let leases = Api::namespaced(client.clone(), &election.namespace);
    let outcome = tokio::select! {
        () = run_controllers(client, &options, health.clone(), stopped()) => Ok(()),
        () = lost(leading.clone()) => Err(RunError::LostLease(lease_name)),
        () = renewal_overdue(leases, &election) => Err(RunError::LeaseOverdue(lease_name)),
    };
    health.metrics.set_leader(false);
    // Released only now that the controllers have stopped, so that a
    // standby takes over at once (not after the lease expires) and never
    // while this replica still writes.
    release.cancel();
    finish(lease_task).await;
    outcome
}

/// How long a stopping replica tries to release the lease. Kubernetes
/// sends SIGKILL 30 s after SIGTERM by default, and the controllers drain
/// first; a lease not released expires by itself.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Longest wait between two failed attempts at the lease.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Renews or contends for the lease until `release` is cancelled, then
/// releases it (within [`RELEASE_WAIT`]). The receiver says whether this
/// replica leads.
///
/// kube-lease-manager's own `watch()` task is not used: on an error (a
/// `404` when the Lease is gone or the API serves none) it sleeps its
/// backoff, up to 30 s, and releases with no time limit, without looking
/// at its channel, so a SIGTERM waited that long, or for as long as the
/// API server kept a request unanswered. Here every wait also watches `release`.
fn hold_lease(
    manager: LeaseManager,
    release: CancellationToken,
) -> (watch::Receiver<bool>, JoinHandle<()>) {
    let (leading_tx, leading) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut delay = Duration::from_secs(1);
        loop {
            let changed = tokio::select! {
                () = release.cancelled() => break,
                changed = manager.changed() => changed,
            };
            match changed {
                Ok(now_leading) => {
                    delay = Duration::from_secs(1);
                    if leading_tx.send(now_leading).is_err() {
                        break;
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, retry_in = ?delay, "leader lease");
                    tokio::select! {
                        () = release.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(MAX_RETRY);
                }
            }
        }
        match tokio::time::timeout(RELEASE_WAIT, manager.release()).await {
            Ok(Ok(())) => tracing::info!("released the leader lease"),
            Ok(Err(err)) => tracing::warn!(%err, "releasing the leader lease"),
            Err(_) => tracing::warn!(
                wait = ?RELEASE_WAIT,
                "releasing the leader lease: no answer in time; it expires by itself"
            ),
        }
    });
    (leading, task)
}

/// Waits for the lease task (bounded: it gives up releasing after [`RELEASE_WAIT`]).
async fn finish(lease_task: JoinHandle<()>) {
    if let Err(err) = lease_task.await {
        tracing::warn!(%err, "lease task");
    }
}

/// The manager of the leader Lease. The API server may not answer yet (or
/// RBAC may not allow the Lease): keeps trying, alive but not ready, rather
/// than exit. `None` once `stop` resolves.
async fn lease_manager(
    client: &Client,
    election: &Election,
    health: &Health,
    mut stop: Pin<&mut impl Future<Output = ()>>,
) -> Option<LeaseManager> {
    let secs = |d: Duration| d.as_secs().max(1);
    let mut delay = Duration::from_secs(1);
    loop {
        let built = LeaseManagerBuilder::new(client.clone(), &election.name)
            .with_namespace(&election.namespace)
            .with_parameters(
                LeaseParams::new(
                    &election.identity,
                    secs(election.lease_duration),
                    secs(election.renew_margin),
                )
                .with_field_manager(format!("{FIELD_MANAGER}-lease")),
            )
            .build();
        let source = tokio::select! {
            built = built => match built {
                Ok(manager) => return Some(manager),
                Err(err) => err,
            },
            () = stop.as_mut() => return None,
        };
        let err = RunError::Election {
            namespace: election.namespace.clone(),
            name: election.name.clone(),
            source,
        };
        tracing::warn!(%err, retry_in = ?delay, "cannot use the leader lease yet");
        health.set_not_ready(&err.to_string());
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stop.as_mut() => return None,
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Resolves once this leader cannot show that it still holds the lease
/// for a while: no read of the Lease since has named it with a renewal
/// that is good for more than half the renew margin (on this replica's
/// clock, which wrote the renewal). Read every quarter margin (at most
/// every second), each read given as long.
///
/// kube-lease-manager renews inside one call that returns only when the
/// leadership changes: while the API server leaves its request unanswered
/// (a node cut off from it) the leader hears nothing, a standby takes the
/// expired lease, and the old leader went on reconciling from watches that
/// had stopped, writing beside the new one (DeploymentGrid replicas set
/// back and forth: pods created and deleted). client-go's leader election
/// stops at its renew deadline for the same reason.
async fn renewal_overdue(leases: Api<Lease>, election: &Election) {
    let guard = election.renew_margin / 2;
    let period =
        (election.renew_margin / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    // It has just taken or renewed the lease.
    let mut valid_until =
        tokio::time::Instant::now() + election.lease_duration.saturating_sub(guard);
    loop {
        let now = tokio::time::Instant::now();
        if now >= valid_until {
            tracing::warn!(
                lease = %election.name,
                "the leader lease was not seen renewed in time; stopping"
            );
            return;
        }
        tokio::time::sleep(period.min(valid_until - now)).await;
        let (sent, wall) = (tokio::time::Instant::now(), SystemTime::now());
        let Ok(Ok(lease)) = tokio::time::timeout(period, leases.get(&election.name)).await else {
            continue;
        };
        if let Some(renewed) = renewed_by(&lease, &election.identity) {
            let left = (renewed + election.lease_duration)
                .duration_since(wall)
                .unwrap_or_default()
                .saturating_sub(guard);
            valid_until = valid_until.max(sent + left);
        }
    }
}

/// When `identity` last renewed `lease`, if it holds it.
fn renewed_by(lease: &Lease, identity: &str) -> Option<SystemTime> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    Some(SystemTime::from(spec.renew_time.as_ref()?.0))
}

/// Resolves when this replica stops leading (the lease task ended, or
/// another replica holds the lease).
async fn lost(mut leading: watch::Receiver<bool>) {
    loop {
        if leading.changed().await.is_err() || !*leading.borrow_and_update() {
            return;
        }
    }
}
