//! Readiness: which kinds the cache serves.
//!
//! ```text
//!  Pending { kinds not served yet } ──► Ready (every kind served)
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
}

/// Which kinds are served; the writer publishes, everyone else reads.
#[derive(Debug)]
pub struct Readiness {
    served: watch::Sender<KindSet>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness {
            served: watch::channel(KindSet::default()).0,
        }
    }
}

impl Readiness {
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

    /// The kinds not served yet (empty: ready).
    pub fn pending(&self) -> Vec<ResourceKind> {
        let set = *self.served.borrow();
        ResourceKind::ALL
            .into_iter()
            .filter(|k| !set.contains(*k))
            .collect()
    }

    /// Whether every kind is served.
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
}
