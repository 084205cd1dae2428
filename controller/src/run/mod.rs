//! Running the controller: leader election, the node reflector, one
//! kube-runtime `Controller` per grid kind, and graceful shutdown.

mod controllers;
mod lease;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::shared::FIELD_MANAGER;
use controllers::run_controllers;
use lease::{Attempt, Elector};

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
        source: kube::Error,
    },
    /// Another replica took the lease while this one led; it stops so that
    /// only one replica ever reconciles.
    #[error("lost the leader lease {0}; exiting so the new leader works alone")]
    LostLease(String),
    /// The leader could not renew its lease within the renew deadline (the
    /// API server unreachable or too slow): it stops before a standby may
    /// take the lease rather than write beside a new leader.
    #[error(
        "the leader lease {0} was not renewed within its renew deadline; \
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
    let mut elector = Elector::new(
        Api::namespaced(client.clone(), &election.namespace),
        &election.name,
        &election.identity,
        election.lease_duration,
        format!("{FIELD_MANAGER}-lease"),
    );
    let mut stop = std::pin::pin!(stopped());
    let Some(mut renewed) =
        contend(&mut elector, &election, &lease_name, &health, stop.as_mut()).await
    else {
        return Ok(());
    };
    tracing::info!(lease = %lease_name, identity = %election.identity, "became the leader");
    health.set_ready();
    health.metrics.set_leader(true);

    let outcome = tokio::select! {
        () = run_controllers(client, &options, health.clone(), stopped()) => Ok(()),
        lost = keep(&mut elector, &election, &mut renewed) => Err(match lost {
            Lost::ToAnother => RunError::LostLease(lease_name),
            Lost::Overdue => RunError::LeaseOverdue(lease_name),
        }),
    };
    health.metrics.set_leader(false);
    // Released only now that the controllers have stopped, so that a
    // standby takes over at once (not after the lease expires) and never
    // while this replica still writes; only while it still holds it.
    if outcome.is_ok() && Instant::now() < renewed + renew_deadline(&election) {
        match tokio::time::timeout(RELEASE_WAIT, elector.release()).await {
            Ok(Ok(())) => tracing::info!("released the leader lease"),
            Ok(Err(err)) => tracing::warn!(%err, "releasing the leader lease"),
            Err(_) => tracing::warn!(
                wait = ?RELEASE_WAIT,
                "releasing the leader lease: no answer in time; it expires by itself"
            ),
        }
    }
    outcome
}

/// How long a stopping replica tries to release the lease. Kubernetes
/// sends SIGKILL 30 s after SIGTERM by default, and the controllers drain
/// first; a lease not released expires by itself.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Longest wait between two failed attempts at the lease.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// How often a standby tries the lease and the leader renews it: client-go's
/// retry period (2 s beside its 15 s lease and 10 s renew deadline), less
/// with a shorter renew margin.
fn retry_period(election: &Election) -> Duration {
    (election.renew_margin / 2).clamp(Duration::from_millis(100), Duration::from_secs(2))
}

/// How long after its last successful renewal was sent the leader stops:
/// the lease duration less the renew margin, so it has stopped before a
/// standby may take the lease.
fn renew_deadline(election: &Election) -> Duration {
    election
        .lease_duration
        .saturating_sub(election.renew_margin)
}

/// Tries the lease every retry period until this replica takes it (`Some`
/// with when the winning request was sent) or `stop` resolves (`None`).
/// While the Lease cannot be used (the API server unreachable, RBAC
/// missing) it is alive but not ready, and backs off up to [`MAX_RETRY`];
/// a standby that reaches it is ready: it is doing what it should.
async fn contend(
    elector: &mut Elector,
    election: &Election,
    lease_name: &str,
    health: &Health,
    mut stop: Pin<&mut impl Future<Output = ()>>,
) -> Option<Instant> {
    let retry = retry_period(election);
    let mut delay = retry;
    let mut waiting = false;
    loop {
        let attempt = tokio::select! {
            attempt = tokio::time::timeout(renew_deadline(election).max(retry), elector.acquire_or_renew()) => attempt,
            () = stop.as_mut() => return None,
        };
        match attempt {
            Ok(Ok(Attempt::Held(sent))) => return Some(sent),
            Ok(Ok(Attempt::Other(_))) => {
                delay = retry;
                if !waiting {
                    waiting = true;
                    health.set_ready();
                    tracing::info!(
                        lease = %lease_name,
                        identity = %election.identity,
                        "waiting for the leader lease"
                    );
                }
            }
            Ok(Err(source)) => {
                let err = RunError::Election {
                    namespace: election.namespace.clone(),
                    name: election.name.clone(),
                    source,
                };
                tracing::warn!(%err, retry_in = ?delay, "cannot use the leader lease yet");
                health.set_not_ready(&err.to_string());
                waiting = false;
                delay = (delay * 2).min(MAX_RETRY);
            }
            Err(_) => {
                tracing::warn!(retry_in = ?delay, "the leader lease: no answer in time");
                waiting = false;
                delay = (delay * 2).min(MAX_RETRY);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stop.as_mut() => return None,
        }
    }
}

/// Why a leader stopped leading.
enum Lost {
    /// Another replica holds the lease.
    ToAnother,
    /// No renewal succeeded within the renew deadline.
    Overdue,
}

/// Renews the lease every retry period; resolves when this replica can no
/// longer count on it. `renewed` is when the last successful renewal was
/// sent.
async fn keep(elector: &mut Elector, election: &Election, renewed: &mut Instant) -> Lost {
    let (retry, renew_deadline) = (retry_period(election), renew_deadline(election));
    loop {
        tokio::time::sleep(retry).await;
        let deadline = *renewed + renew_deadline;
        match tokio::time::timeout_at(deadline, elector.acquire_or_renew()).await {
            Ok(Ok(Attempt::Held(sent))) => *renewed = sent,
            Ok(Ok(Attempt::Other(holder)))
                if holder.as_deref() != Some(election.identity.as_str()) =>
            {
                tracing::warn!(
                    holder = holder.as_deref().unwrap_or(""),
                    "the leader lease is held by another replica"
                );
                return Lost::ToAnother;
            }
            // Written meanwhile, still naming this replica: tried again.
            Ok(Ok(Attempt::Other(_))) => {}
            Ok(Err(err)) => tracing::warn!(%err, "renewing the leader lease"),
            Err(_) => {}
        }
        if Instant::now() >= *renewed + renew_deadline {
            tracing::warn!(
                lease = %election.name,
                deadline = ?renew_deadline,
                "the leader lease was not renewed within its renew deadline; stopping"
            );
            return Lost::Overdue;
        }
    }
}
