//! Control-cluster side: the managed clusters ([`Fleet`]), copies of each
//! original grid in their dedicated namespaces, and the original's status.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::aggregate::{self, ClusterReport};
use super::object;
use super::{
    copy_labels, Role, CLUSTER_ID_LABEL, DIS_LABEL, FINALIZER, HEARTBEAT_LEASE, LOCAL_CLUSTER,
    ORIGINAL_UID_ANNOTATION, TARGET_NAMESPACE_LABEL, YES,
};
use crate::metrics::Metrics;
use crate::reconcile::Error;

/// What a grid kind needs to be distributed (all three are).
pub trait FedKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> FedKind for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

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

#[derive(Default)]
struct Seen {
    version: String,
    at: Option<Instant>,
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
    seen: HashMap<String, Seen>,
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
            .backoff(crate::run::TriggerBackoff::default()),
        );
        let lease_stream = reflector::reflector(
            lease_writer,
            watcher(
                Api::<Lease>::all(client.clone()),
                watcher::Config::default().fields(&format!("metadata.name={HEARTBEAT_LEASE}")),
            )
            .backoff(crate::run::TriggerBackoff::default()),
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
                let mut state = self.state.lock();
                match event {
                    Ok(_) => {
                        state.watching.get_or_insert_with(Instant::now);
                    }
                    Err(err) => {
                        if state.watching.take().is_some() {
                            tracing::warn!(%err, "heartbeat lease watch (multi-cluster): reachability kept as it was until it works again");
                        }
                    }
                }
                futures::future::ready(())
            }),
        );
        let evaluate = async {
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
        };
        futures::future::join(drive, evaluate).await;
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
                versions.get(&c.namespace) == Some(&seen.version)
                    && seen
                        .at
                        .is_some_and(|at| now.duration_since(at.max(watching)) > self.grace)
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
                let name = super::cluster_name(&namespace, ns.metadata.labels.as_ref());
                let lease = leases.get(&namespace);
                let seen = state.seen.entry(namespace.clone()).or_default();
                let version = lease
                    .and_then(|l| l.metadata.resource_version.clone())
                    .unwrap_or_default();
                if lease.is_some() && version != seen.version {
                    seen.version = version;
                    seen.at = Some(now);
                }
                let reachable = lease.is_some()
                    && seen
                        .at
                        .is_some_and(|at| now.duration_since(at.max(watching)) <= self.grace);
                let last_report = lease
                    .and_then(|l| l.spec.as_ref()?.renew_time.as_ref())
                    .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
                ManagedCluster {
                    namespace,
                    name,
                    reachable,
                    last_report,
                }
            })
            .collect();
        clusters.sort_by(|a, b| a.name.cmp(&b.name).then(a.namespace.cmp(&b.namespace)));
        if clusters != state.clusters {
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
        let FleetState { seen, clusters, .. } = &mut *state;
        seen.retain(|ns, _| leases.contains_key(ns) || clusters.iter().any(|c| &c.namespace == ns));
    }

    /// The managed clusters, or `None` until both watches have listed (a
    /// copy is never deleted on an incomplete view).
    pub fn clusters(&self) -> Option<Vec<ManagedCluster>> {
        let state = self.state.lock();
        state.ready.then(|| state.clusters.clone())
    }

    /// One `()` each time the clusters or their reachability change.
    pub fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        crate::grid_sites::on_change(self.changed.subscribe())
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

/// Maps a copy (as the control cluster's watch sees it) to its original.
pub fn original_of<K: FedKind>(copy: &K) -> Option<ObjectRef<K>> {
    match Role::of(copy.meta().labels.as_ref()) {
        Role::Copy { target_namespace } => {
            Some(ObjectRef::new(&copy.name_any()).within(&target_namespace))
        }
        _ => None,
    }
}

/// The watcher config that sees only copies.
pub fn copies_config() -> watcher::Config {
    watcher::Config::default().labels(&format!("{DIS_LABEL}={YES}"))
}

/// Distributes an original and returns its status: `local` (what this
/// cluster rendered itself, `None` for a ServiceGrid) aggregated with what
/// each managed cluster reported. Also the clean-up paths: an original being
/// deleted, or no longer labelled for distribution, loses its copies and
/// then the finalizer. Returns `Ok(None)` when the grid is gone or going.
pub async fn distribute<K: FedKind>(
    grid: &K,
    client: &Client,
    fleet: &Fleet,
    metrics: &Metrics,
    local: Option<&Value>,
    previous: Option<&Value>,
    now: &str,
) -> Result<Option<Value>, Error> {
    let original = Role::of(grid.meta().labels.as_ref()) == Role::Original;
    let has_finalizer = grid.finalizers().iter().any(|f| f == FINALIZER);
    let namespace = grid.namespace().unwrap_or_default();
    let name = grid.name_any();
    if grid.meta().deletion_timestamp.is_some() || !original {
        if has_finalizer {
            delete_copies::<K>(client, metrics, &namespace, &name).await?;
            set_finalizer(grid, client, metrics, false).await?;
        }
        return Ok(None);
    }
    if !has_finalizer {
        set_finalizer(grid, client, metrics, true).await?;
    }
    let Some(clusters) = fleet.clusters() else {
        // Not listed yet: touch no copy (the fleet's first list triggers
        // every grid again).
        return Ok(None);
    };

    let all: Api<K> = Api::all(client.clone());
    let selector = format!("{DIS_LABEL}={YES},{TARGET_NAMESPACE_LABEL}={namespace}");
    let mut copies: BTreeMap<String, K> = all
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|c| c.name_any() == name)
        .filter_map(|c| Some((c.namespace()?, c)))
        .collect();

    let desired_spec = serde_json::to_value(grid)?
        .get("spec")
        .cloned()
        .unwrap_or(Value::Null);
    let labels = copy_labels(grid.meta().labels.as_ref(), &namespace);
    let uid = grid.uid().unwrap_or_default();
    let mut reports = Vec::new();
    if let Some(local) = local
        .and_then(|l| l.get("states"))
        .and_then(Value::as_object)
    {
        if !local.is_empty() {
            reports.push(ClusterReport {
                name: LOCAL_CLUSTER.into(),
                states: local.clone(),
                reachable: true,
                ..ClusterReport::default()
            });
        }
    }
    for cluster in &clusters {
        let api: Api<K> = Api::namespaced(client.clone(), &cluster.namespace);
        let existing = copies.remove(&cluster.namespace);
        let mut report = ClusterReport {
            name: cluster.name.clone(),
            reachable: cluster.reachable,
            last_report: (!cluster.reachable)
                .then(|| cluster.last_report.clone())
                .flatten(),
            ..ClusterReport::default()
        };
        let outcome = match &existing {
            Some(copy) => {
                if let Some(states) = serde_json::to_value(copy)?
                    .pointer("/status/states")
                    .and_then(Value::as_object)
                {
                    report.states = states.clone();
                }
                update_copy(&api, metrics, copy, &desired_spec, &labels, &uid).await
            }
            None => {
                // The slot may hold another namespace's grid of the same name.
                match api.get_opt(&name).await {
                    Ok(Some(other)) => Err(format!(
                        "{}/{name} there belongs to {} (same grid name in two namespaces); not distributed to this cluster",
                        cluster.namespace,
                        match Role::of(other.meta().labels.as_ref()) {
                            Role::Copy { target_namespace } => format!("namespace {target_namespace}"),
                            _ => "a grid that is not a copy".to_owned(),
                        }
                    )),
                    Ok(None) => create_copy(&api, metrics, grid, &cluster.namespace, &desired_spec, &labels, &uid).await,
                    Err(err) => Err(err.to_string()),
                }
            }
        };
        if let Err(message) = outcome {
            tracing::warn!(grid = %name, %namespace, cluster = %cluster.name, "{message}");
            report.message = Some(message);
        }
        reports.push(report);
    }
    // Copies left are in namespaces that are no longer a cluster's.
    for (ns, _) in copies {
        delete_copy::<K>(client, metrics, &ns, &name).await?;
    }
    Ok(Some(aggregate::workload_status(&reports, previous, now)))
}

async fn create_copy<K: FedKind>(
    api: &Api<K>,
    metrics: &Metrics,
    grid: &K,
    namespace: &str,
    spec: &Value,
    labels: &BTreeMap<String, String>,
    uid: &str,
) -> Result<(), String> {
    let annotations = BTreeMap::from([(ORIGINAL_UID_ANNOTATION.to_owned(), uid.to_owned())]);
    let copy: K = object::new_grid(&grid.name_any(), namespace, labels, &annotations, spec)
        .map_err(|e| e.to_string())?;
    match api.create(&PostParams::default(), &copy).await {
        Ok(_) => {
            metrics.wrote("create", &K::kind(&()));
            tracing::info!(grid = %grid.name_any(), %namespace, "distributed a copy");
            Ok(())
        }
        // Created meanwhile: the next reconcile compares it.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(err) => Err(format!("creating the copy in {namespace}: {err}")),
    }
}

async fn update_copy<K: FedKind>(
    api: &Api<K>,
    metrics: &Metrics,
    copy: &K,
    spec: &Value,
    labels: &BTreeMap<String, String>,
    uid: &str,
) -> Result<(), String> {
    let annotations = BTreeMap::from([(ORIGINAL_UID_ANNOTATION.to_owned(), uid.to_owned())]);
    let Some(replaced) =
        object::respecced(copy, spec, labels, &annotations).map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    match api
        .replace(&copy.name_any(), &PostParams::default(), &replaced)
        .await
    {
        Ok(_) => {
            metrics.wrote("update", &K::kind(&()));
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(err) => Err(format!(
            "updating the copy in {}: {err}",
            copy.namespace().unwrap_or_default()
        )),
    }
}

async fn delete_copies<K: FedKind>(
    client: &Client,
    metrics: &Metrics,
    namespace: &str,
    name: &str,
) -> Result<(), Error> {
    let all: Api<K> = Api::all(client.clone());
    let selector = format!("{DIS_LABEL}={YES},{TARGET_NAMESPACE_LABEL}={namespace}");
    for copy in all
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        if copy.name_any() == name {
            delete_copy::<K>(client, metrics, &copy.namespace().unwrap_or_default(), name).await?;
        }
    }
    Ok(())
}

async fn delete_copy<K: FedKind>(
    client: &Client,
    metrics: &Metrics,
    namespace: &str,
    name: &str,
) -> Result<(), Error> {
    if object::delete_grid::<K>(client, metrics, namespace, name).await? {
        tracing::info!(grid = %name, %namespace, "deleted a copy");
    }
    Ok(())
}

/// Adds or removes [`FINALIZER`], guarded by the grid's resourceVersion so a
/// concurrent change of the list is never overwritten (a conflict is retried
/// by the next reconcile, which that change triggers).
async fn set_finalizer<K: FedKind>(
    grid: &K,
    client: &Client,
    metrics: &Metrics,
    present: bool,
) -> Result<(), Error> {
    let mut finalizers: Vec<String> = grid
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    if present {
        finalizers.push(FINALIZER.to_owned());
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": grid.meta().resource_version,
            "finalizers": finalizers,
        }
    });
    let api: Api<K> = Api::namespaced(client.clone(), &grid.namespace().unwrap_or_default());
    match api
        .patch(
            &grid.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            metrics.wrote("patch", &K::kind(&()));
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;

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
