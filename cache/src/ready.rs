//! Readiness: which kinds are wanted, and which the cache serves.
//!
//! Services and Nodes (the topology inputs) are always wanted; with
//! on-demand reflection, Endpoints and EndpointSlices are wanted from the
//! first request for them (kube-proxy reads one of the two, never both), and
//! only then listed and watched upstream.
//!
//! ```text
//!  Pending { wanted kinds not served yet } ──► Ready (every wanted kind served)
//!        │  the writer marks a kind served in the commit that completes it:
//!        │  services and nodes after their first full list; endpoints and
//!        │  endpointslices after theirs *and* the topology inputs (services,
//!        │  nodes), so no client ever sees a half-filtered view
//!        ▼
//!  a kind once served stays served (relists are swapped in atomically)
//! ```
//!
//! A proxy restarted with a snapshot (`--data-dir`) has its restored kinds
//! wanted from the start and serves them once the API server fails to answer
//! (or after `--snapshot-wait`): it is then *degraded* — serving a snapshot
//! — until the writer has synced each of them with the API server
//! (*confirmed*).
//!
//! A kind not every API server has (ServiceCIDRs) is wanted only on
//! demand; when discovery finds the API server does not serve it, it is
//! *absent*: not pending, and its requests get kube-apiserver's `404`.
//! While the upstream is known to be *failing* (its lists and watches end in
//! connection errors, timeouts or 5xx), a request for a kind that was never
//! synced is answered at once instead of waiting for a sync that cannot
//! come ([`Readiness::wait_available`]).
//!
//! The one source of truth for `/readyz`, `cache_synced` and the handlers'
//! wait before their first answer.

use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::sync::watch;

use super::kind::{ApiVersion, PerKind, ResourceKind};

/// The set of served kinds, as bits in [`ResourceKind::ALL`] order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct KindSet(u8);

impl KindSet {
    fn bit(kind: ResourceKind) -> u8 {
        let i = ResourceKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_default();
        1 << i
    }

    fn contains(self, kind: ResourceKind) -> bool {
        self.0 & Self::bit(kind) != 0
    }

    fn of(kinds: &[ResourceKind]) -> KindSet {
        KindSet(kinds.iter().fold(0, |bits, k| bits | Self::bit(*k)))
    }
}

/// Which kinds are wanted and which are served; the handlers want, the
/// writer publishes, everyone else reads.
#[derive(Debug)]
pub struct Readiness {
    served: watch::Sender<KindSet>,
    wanted: watch::Sender<KindSet>,
    /// Kinds synced with the API server by this process.
    confirmed: watch::Sender<KindSet>,
    /// Kinds restored from a snapshot, and when it was taken.
    restored: Option<(KindSet, SystemTime)>,
    /// Whether the API server failed to answer before the first sync.
    unreachable: watch::Sender<bool>,
    /// Kinds the API server does not serve (discovery says so).
    absent: watch::Sender<KindSet>,
    /// The versions the API server serves of the kinds discovered on demand.
    versions: Mutex<PerKind<Option<Vec<ApiVersion>>>>,
    /// Why the upstream is failing now, while it is.
    failing: watch::Sender<Option<String>>,
}

/// What a request for a kind finds after waiting ([`Readiness::wait_available`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// The kind is served: answer from the cache.
    Served,
    /// The API server does not serve the kind: `404`, as it answers.
    Absent,
    /// The kind was never synced and the upstream is failing, for this
    /// reason: `503` at once.
    UpstreamFailing(String),
    /// Neither within the wait: `503`.
    TimedOut,
}

impl Default for Readiness {
    /// Every kind wanted from the start, but those only ever wanted on demand.
    fn default() -> Self {
        let kinds: Vec<ResourceKind> = ResourceKind::ALL
            .into_iter()
            .filter(|k| !ResourceKind::ONLY_ON_DEMAND.contains(k))
            .collect();
        Readiness::wanting(&kinds)
    }
}

impl Readiness {
    /// `kinds` wanted from the start (the topology inputs always are), the
    /// others once a request asks for them.
    pub(super) fn wanting(kinds: &[ResourceKind]) -> Readiness {
        let always = [ResourceKind::Services, ResourceKind::Nodes];
        let wanted = KindSet(KindSet::of(kinds).0 | KindSet::of(&always).0);
        Readiness {
            served: watch::channel(KindSet::default()).0,
            wanted: watch::channel(wanted).0,
            confirmed: watch::channel(KindSet::default()).0,
            restored: None,
            unreachable: watch::channel(false).0,
            absent: watch::channel(KindSet::default()).0,
            versions: Mutex::default(),
            failing: watch::channel(None).0,
        }
    }

    /// `kinds` restored from a snapshot taken at `taken`: wanted from the start.
    pub(super) fn restoring(mut self, kinds: &[ResourceKind], taken: SystemTime) -> Readiness {
        let set = KindSet::of(kinds);
        self.wanted.send_modify(|w| w.0 |= set.0);
        self.restored = Some((set, taken));
        self
    }

    /// When the snapshot the cache was restored from was taken, if it was.
    pub fn restored_from(&self) -> Option<SystemTime> {
        self.restored.map(|(_, taken)| taken)
    }

    /// Whether `kind` came from the snapshot.
    pub(super) fn is_restored(&self, kind: ResourceKind) -> bool {
        self.restored.is_some_and(|(set, _)| set.contains(kind))
    }

    /// Serves the restored kinds not served yet; the ones it served.
    pub fn serve_restored(&self) -> Vec<ResourceKind> {
        let newly: Vec<ResourceKind> = ResourceKind::ALL
            .into_iter()
            .filter(|k| self.is_restored(*k) && !self.is_served(*k))
            .collect();
        for kind in &newly {
            self.serve(*kind);
        }
        newly
    }

    /// `kind` is synced with the API server (the writer, on each commit after).
    pub(super) fn confirm(&self, kind: ResourceKind) {
        self.confirmed.send_if_modified(|set| {
            let before = *set;
            set.0 |= KindSet::bit(kind);
            *set != before
        });
    }

    /// Waits until every kind of `kinds` has synced with the API server
    /// since the start.
    pub async fn synced(&self, kinds: &[ResourceKind]) {
        let all = KindSet::of(kinds);
        let mut rx = self.confirmed.subscribe();
        // The sender lives as long as `self`: the wait ends only when synced.
        let _ = rx.wait_for(|set| set.0 & all.0 == all.0).await;
    }

    /// While a served kind still holds the snapshot's data (not synced with
    /// the API server since the start): when that snapshot was taken.
    pub fn degraded(&self) -> Option<SystemTime> {
        let (served, confirmed) = (*self.served.borrow(), *self.confirmed.borrow());
        let (restored, taken) = self.restored?;
        (served.0 & restored.0 & !confirmed.0 != 0).then_some(taken)
    }

    /// The API server failed to answer before the first sync (the sync says so).
    pub fn upstream_unreachable(&self) {
        self.unreachable
            .send_if_modified(|u| !std::mem::replace(u, true));
    }

    /// Waits until the sync found the API server unreachable.
    pub async fn unreachable(&self) {
        let mut rx = self.unreachable.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|u| *u).await;
    }

    /// A client asked for `kind`: it is listed and watched from now on.
    pub fn want(&self, kind: ResourceKind) {
        self.wanted.send_if_modified(|set| {
            let before = *set;
            set.0 |= KindSet::bit(kind);
            *set != before
        });
    }

    /// Whether `kind` is wanted.
    pub fn is_wanted(&self, kind: ResourceKind) -> bool {
        self.wanted.borrow().contains(kind)
    }

    /// Waits until `kind` is wanted.
    pub async fn wanted(&self, kind: ResourceKind) {
        let mut rx = self.wanted.subscribe();
        // The sender lives as long as `self`: the wait ends only when wanted.
        let _ = rx.wait_for(|set| set.contains(kind)).await;
    }

    /// Marks `kind` served (the writer, right after the commit that completes it).
    pub(super) fn serve(&self, kind: ResourceKind) {
        self.served.send_if_modified(|set| {
            let before = *set;
            set.0 |= KindSet::bit(kind);
            *set != before
        });
    }

    /// Whether `kind` is served from the cache.
    pub fn is_served(&self, kind: ResourceKind) -> bool {
        self.served.borrow().contains(kind)
    }

    /// The wanted kinds not served yet (empty: ready); an absent kind is
    /// not pending.
    pub fn pending(&self) -> Vec<ResourceKind> {
        let (served, wanted) = (*self.served.borrow(), *self.wanted.borrow());
        let absent = *self.absent.borrow();
        ResourceKind::ALL
            .into_iter()
            .filter(|k| wanted.contains(*k) && !served.contains(*k) && !absent.contains(*k))
            .collect()
    }

    /// Discovery found the API server serving `kind` in `versions` (none:
    /// it does not serve it, and `kind` is absent and wanted no more, until
    /// a request wants it again).
    pub fn upstream_serves(&self, kind: ResourceKind, versions: &[ApiVersion]) {
        self.versions.lock()[kind] = Some(versions.to_vec());
        let bit = KindSet::bit(kind);
        if versions.is_empty() {
            self.wanted.send_if_modified(|set| {
                let before = *set;
                set.0 &= !bit;
                *set != before
            });
        }
        self.absent.send_if_modified(|set| {
            let before = *set;
            set.0 = if versions.is_empty() {
                set.0 | bit
            } else {
                set.0 & !bit
            };
            *set != before
        });
    }

    /// The versions the API server serves of `kind`, once discovered (only
    /// for the kinds discovered on demand).
    pub fn upstream_versions(&self, kind: ResourceKind) -> Option<Vec<ApiVersion>> {
        self.versions.lock()[kind].clone()
    }

    /// Whether the API server does not serve `kind`.
    pub fn is_absent(&self, kind: ResourceKind) -> bool {
        self.absent.borrow().contains(kind)
    }

    /// The upstream failed, for `reason` (the sync says so on each failure
    /// that is not the request's own fault: connections, timeouts, 5xx).
    pub fn upstream_failing(&self, reason: &str) {
        self.failing.send_if_modified(|f| {
            let changed = f.as_deref() != Some(reason);
            *f = Some(reason.to_owned());
            changed
        });
    }

    /// The upstream answered (any list, watch or discovery that worked).
    pub fn upstream_working(&self) {
        self.failing.send_if_modified(|f| f.take().is_some());
    }

    /// Why the upstream is failing, while it is.
    pub fn failing(&self) -> Option<String> {
        self.failing.borrow().clone()
    }

    /// Waits up to `limit` until `kind` is served or found absent; a kind
    /// never served while the upstream is failing does not wait (unless a
    /// snapshot holds it: that is served once the upstream fails to answer).
    pub async fn wait_available(&self, kind: ResourceKind, limit: Duration) -> Availability {
        let (mut served, mut absent) = (self.served.subscribe(), self.absent.subscribe());
        let mut failing = self.failing.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if served.borrow_and_update().contains(kind) {
                return Availability::Served;
            }
            if absent.borrow_and_update().contains(kind) {
                return Availability::Absent;
            }
            if let Some(why) = failing.borrow_and_update().clone() {
                if !self.is_restored(kind) {
                    return Availability::UpstreamFailing(why);
                }
            }
            // Each sender lives as long as `self`: a change or the deadline.
            tokio::select! {
                _ = served.changed() => {}
                _ = absent.changed() => {}
                _ = failing.changed() => {}
                () = tokio::time::sleep_until(deadline) => return Availability::TimedOut,
            }
        }
    }

    /// Whether every wanted kind is served.
    pub fn is_ready(&self) -> bool {
        self.pending().is_empty()
    }

    /// Waits up to `limit` for `kind` to be served; whether it is.
    pub async fn wait_served(&self, kind: ResourceKind, limit: Duration) -> bool {
        let mut rx = self.served.subscribe();
        let reached = tokio::time::timeout(limit, rx.wait_for(|set| set.contains(kind))).await;
        matches!(reached, Ok(Ok(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind the API server does not serve is not pending, and a request
    /// for it learns so instead of waiting; a kind never synced gets the
    /// upstream's failure at once, unless a snapshot holds it.
    #[tokio::test]
    async fn absent_and_failing_end_the_wait() {
        use ResourceKind::*;
        let r = Readiness::default();
        let long = Duration::from_secs(3600);
        r.want(ServiceCidrs);
        assert_eq!(
            r.pending(),
            [Services, Endpoints, EndpointSlices, Nodes, ServiceCidrs]
        );
        r.upstream_serves(ServiceCidrs, &[]);
        assert!(r.is_absent(ServiceCidrs) && !r.is_wanted(ServiceCidrs));
        assert!(!r.pending().contains(&ServiceCidrs));
        assert_eq!(
            r.wait_available(ServiceCidrs, long).await,
            Availability::Absent
        );
        assert_eq!(r.upstream_versions(ServiceCidrs), Some(vec![]));
        // An upgraded API server serves it: no longer absent.
        r.upstream_serves(ServiceCidrs, &[ApiVersion::V1]);
        assert!(!r.is_absent(ServiceCidrs));
        assert_eq!(
            r.upstream_versions(ServiceCidrs),
            Some(vec![ApiVersion::V1])
        );
        // The upstream fails: a kind never served is answered at once.
        r.upstream_failing("connect");
        assert_eq!(
            r.wait_available(Endpoints, long).await,
            Availability::UpstreamFailing("connect".into())
        );
        r.serve(Endpoints);
        assert_eq!(
            r.wait_available(Endpoints, long).await,
            Availability::Served
        );
        // Working again: a request waits for its sync, up to its limit.
        r.upstream_working();
        assert_eq!(r.failing(), None);
        assert_eq!(
            r.wait_available(EndpointSlices, Duration::from_millis(10))
                .await,
            Availability::TimedOut
        );
        // A kind a snapshot holds waits for the snapshot instead.
        let restored = Readiness::default().restoring(&[EndpointSlices], SystemTime::now());
        restored.upstream_failing("timeout");
        assert_eq!(
            restored
                .wait_available(EndpointSlices, Duration::from_millis(10))
                .await,
            Availability::TimedOut
        );
        restored.serve_restored();
        assert_eq!(
            restored.wait_available(EndpointSlices, long).await,
            Availability::Served
        );
    }

    #[tokio::test]
    async fn pending_until_every_kind_is_served() {
        let r = Readiness::default();
        use ResourceKind::*;
        assert_eq!(
            r.pending(),
            [Services, Endpoints, EndpointSlices, Nodes],
            "every kind but those not every API server has"
        );
        assert!(!r.is_wanted(ServiceCidrs));
        r.serve(ResourceKind::Nodes);
        assert!(r.is_served(ResourceKind::Nodes));
        assert!(!r.is_served(ResourceKind::Services));
        assert!(
            !r.wait_served(ResourceKind::Services, Duration::from_millis(1))
                .await
        );
        for kind in ResourceKind::ALL {
            r.serve(kind);
        }
        assert!(r.is_ready());
        assert!(r.wait_served(ResourceKind::Services, Duration::ZERO).await);
    }

    #[tokio::test]
    async fn on_demand_kinds_count_once_asked_for() {
        let r = Readiness::wanting(&[]);
        assert!(r.is_wanted(ResourceKind::Services) && r.is_wanted(ResourceKind::Nodes));
        assert!(!r.is_wanted(ResourceKind::EndpointSlices));
        r.serve(ResourceKind::Services);
        r.serve(ResourceKind::Nodes);
        assert!(r.is_ready(), "nothing else asked for yet");
        let waiting = r.wanted(ResourceKind::EndpointSlices);
        r.want(ResourceKind::EndpointSlices);
        waiting.await;
        assert_eq!(r.pending(), vec![ResourceKind::EndpointSlices]);
        r.serve(ResourceKind::EndpointSlices);
        assert!(r.is_ready());
        assert!(!r.is_wanted(ResourceKind::Endpoints));
    }

    #[tokio::test]
    async fn a_restored_kind_is_degraded_until_confirmed() {
        let taken = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        let r = Readiness::wanting(&[]).restoring(
            &[
                ResourceKind::Services,
                ResourceKind::Nodes,
                ResourceKind::Endpoints,
            ],
            taken,
        );
        assert!(
            r.is_wanted(ResourceKind::Endpoints),
            "restored kinds are synced at once"
        );
        assert_eq!(r.restored_from(), Some(taken));
        assert_eq!(r.degraded(), None, "nothing served yet");
        let waiting = r.unreachable();
        r.upstream_unreachable();
        waiting.await;
        assert_eq!(r.serve_restored().len(), 3);
        assert!(r.is_ready());
        assert_eq!(r.degraded(), Some(taken));
        r.confirm(ResourceKind::Services);
        r.confirm(ResourceKind::Nodes);
        assert_eq!(
            r.degraded(),
            Some(taken),
            "endpoints still from the snapshot"
        );
        r.confirm(ResourceKind::Endpoints);
        assert_eq!(r.degraded(), None);
        assert!(r.serve_restored().is_empty());
    }
}
