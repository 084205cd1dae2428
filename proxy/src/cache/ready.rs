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
//! The one source of truth for `/readyz`, `cache_synced` and the handlers'
//! wait before their first answer.

use std::time::Duration;

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
        }
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
}
