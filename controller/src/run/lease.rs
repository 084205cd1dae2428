//! The leader Lease, held as client-go's `leaderelection` holds it.
//!
//! Every write is a replace conditioned on the `resourceVersion` just read:
//! a request sent before the API server went out of reach and delivered
//! late fails (`409`) instead of undoing what another replica wrote since.
//! A standby takes the lease only once it has seen the same record
//! unchanged for a whole lease duration on its own monotonic clock (no
//! comparison of clocks across machines); the leader stops once its last
//! successful renewal is older than the renew deadline (the lease duration
//! less the renew margin), measured from before that renewal was sent, so
//! it has stopped before any standby can take over.
//!
//! Written here rather than taken from kube-lease-manager (used until
//! then): that crate renews and releases with patches that carry no
//! precondition, and renews inside a call that says nothing while the API
//! server leaves it unanswered. A leader cut off from the API server went
//! on writing beside the standby that took its lease, and its release,
//! delivered once the node was back, cleared the new leader's lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::Api;
use tokio::time::Instant;

/// One replica's view of the leader Lease.
pub(super) struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    field_manager: String,
    /// The record last read and when it was first seen as it is.
    observed: Option<(LeaseSpec, Instant)>,
}

/// What one attempt found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Attempt {
    /// This replica holds the lease, renewed by a request sent at this instant.
    Held(Instant),
    /// Another replica holds it (and it has not expired as far as this
    /// replica has seen), or another write came first.
    Other(Option<String>),
}

impl Elector {
    pub(super) fn new(
        api: Api<Lease>,
        name: &str,
        identity: &str,
        duration: Duration,
        field_manager: String,
    ) -> Self {
        Elector {
            api,
            name: name.to_owned(),
            identity: identity.to_owned(),
            duration,
            field_manager,
            observed: None,
        }
    }

    /// Takes the lease if it is free or expired, renews it if this replica
    /// holds it.
    pub(super) async fn acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let sent = Instant::now();
        let now = now();
        let params = self.params();
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.held_spec(None, false, now)),
            };
            return match self.api.create(&params, &lease).await {
                Ok(created) => Ok(self.took(created, sent)),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Other(None)),
                Err(err) => Err(err),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let seen_at = match &self.observed {
            Some((record, at)) if *record == spec => *at,
            _ => sent,
        };
        self.observed = Some((spec.clone(), seen_at));
        let ours = holder.as_deref() == Some(self.identity.as_str());
        if !ours && holder.is_some() && sent.duration_since(seen_at) < lease_duration(&spec) {
            return Ok(Attempt::Other(holder));
        }
        lease.spec = Some(self.held_spec(Some(&spec), ours, now));
        match self.api.replace(&self.name, &params, &lease).await {
            Ok(replaced) => Ok(self.took(replaced, sent)),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Other(holder)),
            Err(err) => Err(err),
        }
    }

    /// Gives the lease up if this replica holds it, conditioned on the
    /// record read: a standby takes it at once instead of after it expires.
    pub(super) async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let now = now();
        // As client-go releases: no holder, a one-second lease renewed now.
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..spec
        });
        match self.api.replace(&self.name, &self.params(), &lease).await {
            Ok(_) => Ok(()),
            // Written by another since: not this replica's any more.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The record of this replica holding the lease: `current` renewed if
    /// `ours`, else taken over from it (one more transition; none for a
    /// Lease created now).
    fn held_spec(&self, current: Option<&LeaseSpec>, ours: bool, now: MicroTime) -> LeaseSpec {
        let duration = i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX);
        match current {
            Some(spec) if ours => LeaseSpec {
                lease_duration_seconds: Some(duration),
                renew_time: Some(now),
                ..spec.clone()
            },
            _ => LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(duration),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(current.map_or(0, |spec| {
                    spec.lease_transitions.unwrap_or(0).saturating_add(1)
                })),
                ..LeaseSpec::default()
            },
        }
    }

    /// Every write's parameters: the field manager the lease is written as.
    fn params(&self) -> PostParams {
        PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        }
    }

    fn took(&mut self, lease: Lease, sent: Instant) -> Attempt {
        self.observed = Some((lease.spec.unwrap_or_default(), sent));
        Attempt::Held(sent)
    }
}

/// The time a write records, as a `MicroTime`.
fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// How long a record lasts unchanged before a standby may take the lease:
/// its own `leaseDurationSeconds`, as client-go reads it.
fn lease_duration(spec: &LeaseSpec) -> Duration {
    Duration::from_secs(
        spec.lease_duration_seconds
            .unwrap_or(0)
            .max(0)
            .unsigned_abs()
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;

    use http::{Request, Response};
    use kube::client::Body;
    use parking_lot::Mutex;
    use serde_json::{json, Value};

    use super::*;

    const DURATION: Duration = Duration::from_secs(15);

    /// One Lease kept as the API server keeps it: created once, replaced
    /// only with the resourceVersion it has. `interleave` is written first
    /// when the next replace arrives (another replica's write landing
    /// between a read and the write that follows it).
    #[derive(Clone, Default)]
    struct Server {
        lease: Arc<Mutex<Option<Value>>>,
        interleave: Arc<Mutex<Option<Value>>>,
        writes: Arc<Mutex<Vec<Value>>>,
    }

    impl Server {
        fn elector(&self, identity: &str) -> Elector {
            let server = self.clone();
            let service = tower::service_fn(move |req: Request<Body>| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.handle(req).await) }
            });
            let client = kube::Client::new(service, "kube-system");
            Elector::new(
                Api::namespaced(client, "kube-system"),
                "l",
                identity,
                DURATION,
                "m".into(),
            )
        }

        fn store(lease: &mut Option<Value>, mut new: Value) -> Value {
            let version = lease.as_ref().map_or(0, |l| {
                l["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            });
            new["metadata"]["resourceVersion"] = json!((version + 1).to_string());
            *lease = Some(new.clone());
            new
        }

        async fn handle(&self, req: Request<Body>) -> Response<Body> {
            let method = req.method().clone();
            let body = req.into_body().collect_bytes().await.unwrap();
            let sent: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let mut lease = self.lease.lock();
            let (code, answer) = match (method.as_str(), lease.is_some()) {
                ("GET", true) => (200, lease.clone().unwrap()),
                ("POST", false) => {
                    self.writes.lock().push(sent.clone());
                    (201, Self::store(&mut lease, sent))
                }
                ("PUT", true) => {
                    if let Some(other) = self.interleave.lock().take() {
                        let mut other = other;
                        other["metadata"] = lease.as_ref().unwrap()["metadata"].clone();
                        Self::store(&mut lease, other);
                    }
                    if sent["metadata"]["resourceVersion"]
                        == lease.as_ref().unwrap()["metadata"]["resourceVersion"]
                    {
                        self.writes.lock().push(sent.clone());
                        (200, Self::store(&mut lease, sent))
                    } else {
                        (
                            409,
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "metadata": {}}),
                        )
                    }
                }
                ("POST", true) => (
                    409,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "AlreadyExists", "code": 409, "metadata": {}}),
                ),
                _ => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "metadata": {}}),
                ),
            };
            Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(answer.to_string().into_bytes()))
                .unwrap()
        }

        fn holder(&self) -> Option<String> {
            self.lease.lock().as_ref()?["spec"]["holderIdentity"]
                .as_str()
                .map(str::to_owned)
        }
    }

    fn held(attempt: Attempt) -> bool {
        matches!(attempt, Attempt::Held(_))
    }

    /// `elector` tries the lease and finds `holder` holding it.
    async fn finds(elector: &mut Elector, holder: &str) {
        assert_eq!(
            elector.acquire_or_renew().await.unwrap(),
            Attempt::Other(Some(holder.into()))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_takes_the_lease_only_once_it_saw_it_unchanged_for_a_lease_duration() {
        let server = Server::default();
        let (mut a, mut b) = (server.elector("a"), server.elector("b"));
        assert!(
            held(a.acquire_or_renew().await.unwrap()),
            "a creates and holds the lease"
        );
        finds(&mut b, "a").await;
        tokio::time::advance(DURATION - Duration::from_secs(1)).await;
        finds(&mut b, "a").await;
        // a renews: b starts over.
        assert!(held(a.acquire_or_renew().await.unwrap()));
        tokio::time::advance(Duration::from_secs(2)).await;
        finds(&mut b, "a").await;
        tokio::time::advance(DURATION - Duration::from_secs(1)).await;
        finds(&mut b, "a").await;
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            held(b.acquire_or_renew().await.unwrap()),
            "b takes the lease a left unrenewed"
        );
        assert_eq!(server.holder().as_deref(), Some("b"));
        assert_eq!(
            server.lease.lock().as_ref().unwrap()["spec"]["leaseTransitions"],
            json!(1)
        );
        // a, back, finds b holding it and writes nothing.
        let writes = server.writes.lock().len();
        finds(&mut a, "b").await;
        assert_eq!(server.writes.lock().len(), writes);
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_is_refused_when_another_replica_wrote_after_it_was_read() {
        let server = Server::default();
        let mut a = server.elector("a");
        assert!(held(a.acquire_or_renew().await.unwrap()));
        // b took the lease between a's read and a's write: a's renewal,
        // conditioned on what it read, does not undo b's.
        *server.interleave.lock() = Some(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}}),
        );
        assert!(!held(a.acquire_or_renew().await.unwrap()));
        assert_eq!(server.holder().as_deref(), Some("b"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_lease_is_taken_at_once_and_only_its_holder_releases_it() {
        let server = Server::default();
        let (mut a, mut b) = (server.elector("a"), server.elector("b"));
        assert!(held(a.acquire_or_renew().await.unwrap()));
        finds(&mut b, "a").await;
        b.release().await.unwrap();
        assert_eq!(
            server.holder().as_deref(),
            Some("a"),
            "b released a lease it does not hold"
        );
        a.release().await.unwrap();
        assert_eq!(server.holder(), None);
        assert!(
            held(b.acquire_or_renew().await.unwrap()),
            "b takes a released lease without waiting"
        );
        assert_eq!(server.holder().as_deref(), Some("b"));
    }
}
