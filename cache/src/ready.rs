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
//! The one source of truth for `/readyz`, `cache_synced` and the handlers'
//! wait before their first answer.

use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::kind::ResourceKind;

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
}

impl Default for Readiness {
    /// Every kind wanted from the start.
    fn default() -> Self {
        Readiness::wanting(&ResourceKind::ALL)
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

    /// The wanted kinds not served yet (empty: ready).
    pub fn pending(&self) -> Vec<ResourceKind> {
        let (served, wanted) = (*self.served.borrow(), *self.wanted.borrow());
        ResourceKind::ALL
            .into_iter()
            .filter(|k| wanted.contains(*k) && !served.contains(*k))
            .collect()
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

    #[tokio::test]
    async fn pending_until_every_kind_is_served() {
        let r = Readiness::default();
        assert_eq!(r.pending(), ResourceKind::ALL.to_vec());
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
