//! Control-cluster side: the managed clusters ([`Fleet`]), clusternet's
//! dedicated namespaces, and whether each is reachable, judged from the
//! heartbeat Leases their controllers renew there. What is distributed to
//! them is [`super::distribute`]'s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::{cluster_name, CLUSTER_ID_LABEL, HEARTBEAT_LEASE};
use crate::metrics::ClusterLabels;
use crate::shared::time::k8s_time;
use crate::shared::trigger::{on_change, TriggerBackoff};

/// One managed cluster as the control cluster sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedCluster {
    /// Its dedicated namespace.
    pub namespace: String,
    /// Its name in status.
    pub name: String,
    /// Whether its heartbeat moved within the grace period.
    pub reachable: bool,
    /// Its heartbeat's last renewTime (RFC 3339, seconds), if it has one.
    pub last_report: Option<String>,
}

/// The last heartbeat version seen of one cluster, and when it was first seen.
#[derive(Default)]
struct HeartbeatSeen {
    version: String,
    at: Option<Instant>,
}

impl HeartbeatSeen {
    /// Notes the cluster's `lease` as seen `now`; whether the cluster is
    /// reachable: its heartbeat moved within `grace`, counted from no
    /// earlier than `watching` (since when heartbeats can be seen at all).
    fn observe(
        &mut self,
        lease: Option<&Arc<Lease>>,
        now: Instant,
        watching: Instant,
        grace: Duration,
    ) -> bool {
        let version = lease
            .and_then(|l| l.metadata.resource_version.clone())
            .unwrap_or_default();
        if lease.is_some() && version != self.version {
            self.version = version;
            self.at = Some(now);
        }
        lease.is_some()
            && self
                .at
                .is_some_and(|at| now.duration_since(at.max(watching)) <= grace)
    }

    /// Whether `version` is still the one seen, and seen longer than `grace` ago.
    fn stale(
        &self,
        version: Option<&String>,
        now: Instant,
        watching: Instant,
        grace: Duration,
    ) -> bool {
        version == Some(&self.version)
            && self
                .at
                .is_some_and(|at| now.duration_since(at.max(watching)) > grace)
    }
}

/// The managed clusters: clusternet's dedicated namespaces and the
/// heartbeat Leases the managed controllers renew in them.
///
/// A cluster is reachable while its Lease's resourceVersion changed within
/// the grace period *as observed here* (the managed cluster's clock does not
/// matter, as kube-controller-manager judges node leases).
pub struct Fleet {
    namespaces: Store<PartialObjectMeta<Namespace>>,
    leases: Store<Lease>,
    grace: Duration,
    state: Mutex<FleetState>,
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct FleetState {
    ready: bool,
    /// Since when the heartbeat watch works (`None` while it fails): a
    /// control cluster that cannot see heartbeats judges nobody, and after
    /// it sees again every cluster gets a grace period from then.
    watching: Option<Instant>,
    seen: HashMap<String, HeartbeatSeen>,
    clusters: Vec<ManagedCluster>,
}

impl Fleet {
    /// Starts watching; returns the fleet and the task that keeps it current
    /// (it re-evaluates reachability every second).
    pub fn start(client: Client, grace: Duration) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let (namespaces, ns_writer) = reflector::store();
        let (leases, lease_writer) = reflector::store();
        let ns_stream = reflector::reflector(
            ns_writer,
            watcher(
                Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
                watcher::Config::default().labels(CLUSTER_ID_LABEL),
            )
            .backoff(TriggerBackoff::default()),
        );
        let lease_stream = reflector::reflector(
            lease_writer,
            watcher(
                Api::<Lease>::all(client.clone()),
                watcher::Config::default().fields(&format!("metadata.name={HEARTBEAT_LEASE}")),
            )
            .backoff(TriggerBackoff::default()),
        );
        let fleet = Arc::new(Self {
            namespaces,
            leases,
            grace,
            state: Mutex::new(FleetState::default()),
            changed: watch::channel(0).0,
        });
        let task = tokio::spawn(fleet.clone().keep_current(client, ns_stream, lease_stream));
        (fleet, task)
    }

    async fn keep_current<E1, E2>(
        self: Arc<Self>,
        client: Client,
        namespaces: impl Stream<Item = Result<E1, watcher::Error>> + Send + 'static,
        leases: impl Stream<Item = Result<E2, watcher::Error>> + Send + 'static,
    ) {
        let drive = futures::future::join(
            namespaces.for_each(log_errors("dedicated namespace")),
            leases.for_each(|event| {
                self.heartbeat_watch(event.map(|_| ()));
                futures::future::ready(())
            }),
        );
        futures::future::join(drive, self.judge_every_second(client)).await;
    }

    /// Notes whether the heartbeat watch works.
    fn heartbeat_watch(&self, event: Result<(), watcher::Error>) {
        let mut state = self.state.lock();
        match event {
            Ok(()) => {
                state.watching.get_or_insert_with(Instant::now);
            }
            Err(err) => {
                if state.watching.take().is_some() {
                    tracing::warn!(%err, "heartbeat lease watch (multi-cluster): reachability kept as it was until it works again");
                }
            }
        }
    }

    /// Once both watches have listed, re-evaluates the clusters every second.
    async fn judge_every_second(&self, client: Client) {
        let ready = futures::future::join(
            self.namespaces.wait_until_ready(),
            self.leases.wait_until_ready(),
        )
        .await;
        if ready.0.is_err() || ready.1.is_err() {
            return;
        }
        self.state.lock().ready = true;
        // Grids reconciled before the first list kept their copies and
        // status: now they can be compared.
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            // About to call a cluster unreachable: first make sure this
            // cluster's own API server answers. One going away keeps its
            // open watches quiet for seconds before it closes them; a
            // control cluster that cannot see judges nobody.
            if self.due(Instant::now()) {
                let answers =
                    tokio::time::timeout(Duration::from_secs(2), client.apiserver_version())
                        .await
                        .is_ok_and(|r| r.is_ok());
                if !answers {
                    if self.state.lock().watching.take().is_some() {
                        tracing::warn!("this cluster's API server does not answer: managed clusters' reachability kept as it was");
                    }
                    continue;
                }
            }
            self.evaluate(Instant::now());
        }
    }

    /// Whether a cluster shown reachable has a heartbeat older than the
    /// grace period now (the next evaluation would call it unreachable).
    fn due(&self, now: Instant) -> bool {
        let state = self.state.lock();
        let Some(watching) = state.watching else {
            return false;
        };
        let versions: HashMap<String, String> = self
            .leases
            .state()
            .iter()
            .filter_map(|l| Some((l.namespace()?, l.metadata.resource_version.clone()?)))
            .collect();
        state.clusters.iter().filter(|c| c.reachable).any(|c| {
            state.seen.get(&c.namespace).is_some_and(|seen| {
                seen.stale(versions.get(&c.namespace), now, watching, self.grace)
            })
        })
    }

    /// Recomputes the clusters; tells the controllers when reachability or
    /// the set of clusters changed.
    fn evaluate(&self, now: Instant) {
        let leases: HashMap<String, Arc<Lease>> = self
            .leases
            .state()
            .into_iter()
            .filter_map(|l| Some((l.namespace()?, l)))
            .collect();
        let mut state = self.state.lock();
        let Some(watching) = state.watching else {
            return;
        };
        let mut clusters: Vec<ManagedCluster> = self
            .namespaces
            .state()
            .iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_none())
            .map(|ns| {
                let namespace = ns.name_any();
                let lease = leases.get(&namespace);
                let seen = state.seen.entry(namespace.clone()).or_default();
                ManagedCluster {
                    name: cluster_name(&namespace, ns.metadata.labels.as_ref()),
                    reachable: seen.observe(lease, now, watching, self.grace),
                    last_report: lease
                        .and_then(|l| l.spec.as_ref()?.renew_time.as_ref())
                        .map(|t| k8s_time(t.0)),
                    namespace,
                }
            })
            .collect();
        clusters.sort_by(|a, b| a.name.cmp(&b.name).then(a.namespace.cmp(&b.namespace)));
        self.replace_clusters(&mut state, clusters);
        let FleetState { seen, clusters, .. } = &mut *state;
        seen.retain(|ns, _| leases.contains_key(ns) || clusters.iter().any(|c| &c.namespace == ns));
    }

    /// Keeps `clusters` as the fleet's; tells the controllers when a cluster
    /// came, went, or changed reachability (not for a heartbeat's time alone).
    fn replace_clusters(&self, state: &mut FleetState, clusters: Vec<ManagedCluster>) {
        if clusters == state.clusters {
            return;
        }
        let reach_changed = clusters.len() != state.clusters.len()
            || clusters.iter().zip(&state.clusters).any(|(a, b)| {
                (&a.namespace, &a.name, a.reachable) != (&b.namespace, &b.name, b.reachable)
            });
        state.clusters = clusters;
        if reach_changed {
            for c in state.clusters.iter().filter(|c| !c.reachable) {
                tracing::info!(cluster = %c.name, namespace = %c.namespace, last_report = ?c.last_report, "managed cluster unreachable");
            }
            self.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The managed clusters, or `None` until both watches have listed (a
    /// copy is never deleted on an incomplete view).
    pub fn clusters(&self) -> Option<Vec<ManagedCluster>> {
        let state = self.state.lock();
        state.ready.then(|| state.clusters.clone())
    }

    /// Each managed cluster and whether it is reachable, for `/metrics`
    /// (none until both watches have listed).
    pub fn reachability(&self) -> Vec<(ClusterLabels, bool)> {
        let state = self.state.lock();
        if !state.ready {
            return Vec::new();
        }
        state
            .clusters
            .iter()
            .map(|c| {
                let labels = ClusterLabels {
                    cluster: c.name.clone(),
                    namespace: c.namespace.clone(),
                };
                (labels, c.reachable)
            })
            .collect()
    }

    /// One `()` each time the clusters or their reachability change.
    pub fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        on_change(self.changed.subscribe())
    }
}

fn log_errors<T>(
    what: &'static str,
) -> impl FnMut(Result<T, watcher::Error>) -> futures::future::Ready<()> {
    move |event| {
        if let Err(err) = event {
            tracing::warn!(%err, "{what} watch (multi-cluster)");
        }
        futures::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;
    use serde_json::json;

    use super::*;

    fn namespace(name: &str, cluster: &str) -> PartialObjectMeta<Namespace> {
        serde_json::from_value(json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": name, "labels": {
                CLUSTER_ID_LABEL: format!("id-{cluster}"),
                super::super::CLUSTER_NAME_LABEL: cluster,
            }},
        }))
        .unwrap()
    }

    fn lease(namespace: &str, version: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": HEARTBEAT_LEASE, "namespace": namespace, "resourceVersion": version},
            "spec": {"holderIdentity": "x", "renewTime": format!("2026-11-23T12:00:{version:0>2}.123456Z")},
        }))
        .unwrap()
    }

    struct Harness {
        fleet: Fleet,
        leases: Writer<Lease>,
        t0: Instant,
    }

    impl Harness {
        fn new() -> Self {
            let (namespaces, mut ns_writer) = reflector::store();
            let (leases, lease_writer) = reflector::store();
            for (ns, cluster) in [
                ("clusternet-aaaaa", "edge-a"),
                ("clusternet-bbbbb", "edge-b"),
            ] {
                ns_writer.apply_watcher_event(&watcher::Event::Apply(namespace(ns, cluster)));
            }
            let fleet = Fleet {
                namespaces,
                leases,
                grace: Duration::from_secs(40),
                state: Mutex::new(FleetState::default()),
                changed: watch::channel(0).0,
            };
            let t0 = Instant::now();
            fleet.state.lock().ready = true;
            fleet.state.lock().watching = Some(t0);
            Self {
                fleet,
                leases: lease_writer,
                t0,
            }
        }

        fn beat(&mut self, ns: &str, version: &str) {
            self.leases
                .apply_watcher_event(&watcher::Event::Apply(lease(ns, version)));
        }

        /// (name, reachable, last report) per cluster, after evaluating at t0 + secs.
        fn at(&self, secs: u64) -> Vec<(String, bool, Option<String>)> {
            self.fleet.evaluate(self.t0 + Duration::from_secs(secs));
            self.fleet
                .clusters()
                .unwrap()
                .into_iter()
                .map(|c| (c.name, c.reachable, c.last_report))
                .collect()
        }
    }

    fn reachable(view: &[(String, bool, Option<String>)]) -> Vec<bool> {
        view.iter().map(|(_, r, _)| *r).collect()
    }

    #[test]
    fn a_cluster_is_reachable_while_its_heartbeat_moves_within_the_grace_period() {
        let mut h = Harness::new();
        h.beat("clusternet-aaaaa", "1");
        let view = h.at(0);
        assert_eq!(reachable(&view), [true, false], "edge-b never reported");
        assert_eq!(view[1].2, None);
        assert_eq!(view[0].2.as_deref(), Some("2026-11-23T12:00:01Z"));
        // A keeps beating, the versions move.
        h.beat("clusternet-aaaaa", "2");
        assert_eq!(reachable(&h.at(30)), [true, false]);
        assert_eq!(reachable(&h.at(69)), [true, false]);
        // Silent for longer than the grace period: unreachable, with its last report.
        let view = h.at(71);
        assert_eq!(reachable(&view), [false, false]);
        assert_eq!(view[0].2.as_deref(), Some("2026-11-23T12:00:02Z"));
        let exported: Vec<(String, bool)> = h
            .fleet
            .reachability()
            .into_iter()
            .map(|(labels, up)| (labels.cluster, up))
            .collect();
        assert_eq!(
            exported,
            [("edge-a".to_owned(), false), ("edge-b".to_owned(), false)]
        );
        // Back.
        h.beat("clusternet-aaaaa", "3");
        assert_eq!(reachable(&h.at(80)), [true, false]);
    }

    #[test]
    fn a_verdict_of_unreachable_is_announced_before_it_is_made() {
        let mut h = Harness::new();
        h.beat("clusternet-aaaaa", "1");
        h.at(0);
        assert!(!h.fleet.due(h.t0 + Duration::from_secs(40)));
        // At +41 s A would be called unreachable: the caller checks its own
        // API server first.
        assert!(h.fleet.due(h.t0 + Duration::from_secs(41)));
        // A beat arrived meanwhile: nothing is due.
        h.beat("clusternet-aaaaa", "2");
        assert!(!h.fleet.due(h.t0 + Duration::from_secs(41)));
    }

    #[test]
    fn a_control_cluster_that_cannot_see_heartbeats_judges_nobody() {
        let mut h = Harness::new();
        h.beat("clusternet-aaaaa", "1");
        h.beat("clusternet-bbbbb", "1");
        assert_eq!(reachable(&h.at(0)), [true, true]);
        let mut changes = h.fleet.changed.subscribe();
        changes.mark_unchanged();
        // The lease watch fails (this API server went away) for ten minutes.
        h.fleet.state.lock().watching = None;
        assert_eq!(reachable(&h.at(600)), [true, true], "kept as it was");
        assert!(!changes.has_changed().unwrap());
        // It works again at +600 s: everyone gets a grace period from then,
        // and only a cluster that stays silent goes unreachable.
        h.fleet.state.lock().watching = Some(h.t0 + Duration::from_secs(600));
        assert_eq!(reachable(&h.at(610)), [true, true]);
        assert!(
            !changes.has_changed().unwrap(),
            "no flap, no status written"
        );
        h.beat("clusternet-aaaaa", "2");
        assert_eq!(reachable(&h.at(630)), [true, true]);
        assert_eq!(reachable(&h.at(645)), [true, false]);
        assert!(
            changes.has_changed().unwrap(),
            "edge-b's change triggers the grids"
        );
    }
}
