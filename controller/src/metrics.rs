//! The controller's Prometheus metrics (`/metrics`): counters recorded where
//! things happen, and the gauges of the grids (queue depth, objects, sites)
//! and of the managed clusters read at scrape time by a [`Collector`], so a
//! grid or cluster that is gone is gone from `/metrics` too.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// A resource kind (`DeploymentGrid`, `Deployment`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The kind.
    pub kind: String,
}

/// One kind of API write the controller made.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `apply`, `delete` or `patch`.
    pub verb: String,
    /// The kind written (`Deployment`, `DeploymentGrid` for status, `Event`, ...).
    pub kind: String,
}

/// The grids of one kind as a scrape sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindCensus {
    /// The grid kind (`DeploymentGrid`).
    pub kind: String,
    /// The kind of its children (`Deployment`).
    pub child_kind: &'static str,
    /// Each grid's key and whether its current version has been reconciled.
    pub grids: Vec<(String, bool)>,
}

/// One grid: the labels of its per-grid gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GridLabels {
    /// The grid kind (`DeploymentGrid`).
    pub kind: String,
    /// The grid's namespace.
    pub namespace: String,
    /// The grid's name.
    pub grid: String,
}

/// A workload grid's sites after its last reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteCount {
    /// Sites the grid targets: this cluster's (from node labels) and those
    /// its managed clusters report.
    pub targeted: usize,
    /// Sites whose workload has all replicas available (`status.readySites`).
    pub ready: usize,
}

/// One managed cluster (multi-cluster control side) as a scrape sees it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Its name (as in grid status).
    pub cluster: String,
    /// Its dedicated namespace (two clusters may share a name, never a namespace).
    pub namespace: String,
}

type CensusFn = Box<dyn Fn() -> Vec<KindCensus> + Send + Sync>;
type FleetFn = Box<dyn Fn() -> Vec<(ClusterLabels, bool)> + Send + Sync>;

/// What the scrape-time gauges are computed from.
#[derive(Default)]
struct Census {
    /// Children each grid had after its last reconcile, by child kind and grid key.
    children: Mutex<HashMap<(String, String), usize>>,
    /// Sites of each workload grid after its last reconcile, by grid key.
    sites: Mutex<HashMap<String, (GridLabels, SiteCount)>>,
    /// Reads the grids from the controllers' stores; set once they run.
    grids: OnceLock<CensusFn>,
    /// Reads the managed clusters' reachability; set once the controllers run.
    fleet: OnceLock<FleetFn>,
}

impl std::fmt::Debug for Census {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Census")
    }
}

/// Counters, and the bookkeeping behind the gauges.
pub struct Metrics {
    reconciles: Family<KindLabel, Counter>,
    errors: Family<KindLabel, Counter>,
    writes: Family<WriteLabels, Counter>,
    leader: Gauge,
    census: Arc<Census>,
}

impl Metrics {
    /// Registers every metric in `registry` (the binary gives it the
    /// `sitegrid_controller` prefix).
    pub fn register(registry: &mut Registry) -> Self {
        let reconciles = Family::<KindLabel, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles run, by grid kind",
            reconciles.clone(),
        );
        let errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciles that failed and were retried, by grid kind",
            errors.clone(),
        );
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "api_writes",
            "Writes the controller made to the API server, by verb and kind (the lease excluded)",
            writes.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without election)",
            leader.clone(),
        );
        let census = Arc::new(Census::default());
        registry.register_collector(Box::new(census.clone()));
        Self {
            reconciles,
            errors,
            writes,
            leader,
            census,
        }
    }

    fn kind(kind: &str) -> KindLabel {
        KindLabel {
            kind: kind.to_owned(),
        }
    }

    /// The controller of `kind` grids starts: its reconcile and error
    /// counters are exported from 0 on, so that `rate()` and `increase()`
    /// see the first error (a series born with its first increment shows none).
    pub fn controlling(&self, kind: &str) {
        // Creating the series is all: the guards are dropped at once.
        drop(self.reconciles.get_or_create(&Self::kind(kind)));
        drop(self.errors.get_or_create(&Self::kind(kind)));
    }

    /// A reconcile of a `kind` grid started.
    pub fn reconciled(&self, kind: &str) {
        self.reconciles.get_or_create(&Self::kind(kind)).inc();
    }

    /// A reconcile of a `kind` grid failed.
    pub fn failed(&self, kind: &str) {
        self.errors.get_or_create(&Self::kind(kind)).inc();
    }

    /// The controller wrote a `kind` object.
    pub fn wrote(&self, verb: &str, kind: &str) {
        self.writes
            .get_or_create(&WriteLabels {
                verb: verb.to_owned(),
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// Whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// After a reconcile: how many `child_kind` objects the grid `grid_key` has.
    pub fn set_children(&self, child_kind: &str, grid_key: String, count: usize) {
        self.census
            .children
            .lock()
            .insert((child_kind.to_owned(), grid_key), count);
    }

    /// After a reconcile: the sites of the workload grid `grid_key` (the key
    /// the census knows it by, see [`KindCensus::grids`]).
    pub fn set_sites(&self, grid_key: String, labels: GridLabels, sites: SiteCount) {
        self.census.sites.lock().insert(grid_key, (labels, sites));
    }

    /// How a scrape reads the managed clusters and whether each is reachable
    /// (once the controllers run; later calls are ignored).
    pub fn set_fleet(
        &self,
        clusters: impl Fn() -> Vec<(ClusterLabels, bool)> + Send + Sync + 'static,
    ) {
        // Set once per process, as the census reader.
        let _ = self.census.fleet.set(Box::new(clusters));
    }

    /// How a scrape reads the grids (once the controllers run; later calls are ignored).
    pub fn set_census(&self, grids: impl Fn() -> Vec<KindCensus> + Send + Sync + 'static) {
        // Set once per process: a second controller run keeps the first reader.
        let _ = self.census.grids.set(Box::new(grids));
    }
}

impl Collector for Census {
    /// The grids' gauges (by kind, and per workload grid) and the managed
    /// clusters' reachability.
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(read) = self.grids.get() {
            let kinds = read();
            self.encode_kinds(&kinds, &mut encoder)?;
            self.encode_sites(&kinds, &mut encoder)?;
        }
        if let Some(read) = self.fleet.get() {
            let mut metric = encoder.encode_descriptor(
                "cluster_reachable",
                "1 while a managed cluster's heartbeat moves within the grace period (multi-cluster control side), by cluster",
                None,
                MetricType::Gauge,
            )?;
            for (labels, reachable) in read() {
                ConstGauge::new(i64::from(reachable)).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

impl Census {
    /// `queue_depth{kind}` and `objects{kind}`: grids by grid kind, children
    /// of live grids by their kind.
    fn encode_kinds(
        &self,
        kinds: &[KindCensus],
        encoder: &mut DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        let mut queue = Vec::new();
        let mut objects = Vec::new();
        let mut children = self.children.lock();
        for census in kinds {
            let pending = census.grids.iter().filter(|(_, done)| !done).count();
            queue.push((census.kind.clone(), pending));
            objects.push((census.kind.clone(), census.grids.len()));
            // Forget grids that no longer exist.
            children.retain(|(ck, key), _| {
                ck != census.child_kind || census.grids.iter().any(|(k, _)| k == key)
            });
            let total = children
                .iter()
                .filter(|((ck, _), _)| ck == census.child_kind)
                .map(|(_, n)| n)
                .sum();
            objects.push((census.child_kind.to_owned(), total));
        }
        drop(children);
        for (name, help, values) in [
            (
                "queue_depth",
                "Grids whose current version has not been reconciled yet, by grid kind",
                queue,
            ),
            (
                "objects",
                "Objects the controller manages: grids by grid kind, children by their kind",
                objects,
            ),
        ] {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (kind, value) in values {
                let labels = KindLabel { kind };
                ConstGauge::new(saturating_i64(value)).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }

    /// `grid_sites` and `grid_sites_ready` of each live workload grid
    /// reconciled at least once; a grid no longer in the stores is forgotten.
    fn encode_sites(
        &self,
        kinds: &[KindCensus],
        encoder: &mut DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        let mut sites = self.sites.lock();
        sites.retain(|key, _| {
            kinds
                .iter()
                .any(|census| census.grids.iter().any(|(k, _)| k == key))
        });
        let mut rows: Vec<&(GridLabels, SiteCount)> = sites.values().collect();
        rows.sort_by(|a, b| {
            (&a.0.kind, &a.0.namespace, &a.0.grid).cmp(&(&b.0.kind, &b.0.namespace, &b.0.grid))
        });
        for (name, help, value) in [
            (
                "grid_sites",
                "Sites a DeploymentGrid or StatefulSetGrid targets (this cluster's and its managed clusters'), after its last reconcile",
                (|c: &SiteCount| c.targeted) as fn(&SiteCount) -> usize,
            ),
            (
                "grid_sites_ready",
                "Sites of a DeploymentGrid or StatefulSetGrid whose workload has all replicas available (status.readySites), after its last reconcile",
                |c: &SiteCount| c.ready,
            ),
        ] {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (labels, count) in &rows {
                ConstGauge::new(saturating_i64(value(count)))
                    .encode(metric.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}

fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_kinds_and_counts_children_of_live_grids_only() {
        let mut registry = Registry::with_prefix("sitegrid_controller");
        let m = Metrics::register(&mut registry);
        m.reconciled("DeploymentGrid");
        m.wrote("apply", "Deployment");
        m.wrote("apply", "Deployment");
        m.set_children("Deployment", "default/a".into(), 2);
        m.set_children("Deployment", "default/gone".into(), 5);
        m.set_census(|| {
            vec![KindCensus {
                kind: "DeploymentGrid".into(),
                child_kind: "Deployment",
                grids: vec![("default/a".into(), true), ("default/b".into(), false)],
            }]
        });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("sitegrid_controller_reconciles_total{kind=\"DeploymentGrid\"} 1"));
        assert!(text.contains("sitegrid_controller_queue_depth{kind=\"DeploymentGrid\"} 1"));
        assert!(text.contains("sitegrid_controller_objects{kind=\"DeploymentGrid\"} 2"));
        assert!(text.contains("sitegrid_controller_objects{kind=\"Deployment\"} 2"));
        assert!(text.contains(
            "sitegrid_controller_api_writes_total{verb=\"apply\",kind=\"Deployment\"} 2"
        ));
    }

    /// The exposition of `registry`.
    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn reconcile_errors_are_exported_from_zero_once_a_controller_starts() {
        let mut registry = Registry::with_prefix("sitegrid_controller");
        let m = Metrics::register(&mut registry);
        m.controlling("StatefulSetGrid");
        let text = scrape(&registry);
        assert!(
            text.contains(
                "sitegrid_controller_reconcile_errors_total{kind=\"StatefulSetGrid\"} 0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("sitegrid_controller_reconciles_total{kind=\"StatefulSetGrid\"} 0\n"),
            "{text}"
        );
        m.failed("StatefulSetGrid");
        assert!(scrape(&registry)
            .contains("sitegrid_controller_reconcile_errors_total{kind=\"StatefulSetGrid\"} 1\n"));
    }

    #[test]
    fn sites_per_grid_follow_the_grids_in_the_stores() {
        let mut registry = Registry::with_prefix("sitegrid_controller");
        let m = Metrics::register(&mut registry);
        let grids = Arc::new(Mutex::new(vec![(
            "DeploymentGrid/edge/web".to_owned(),
            true,
        )]));
        let live = grids.clone();
        m.set_census(move || {
            vec![KindCensus {
                kind: "DeploymentGrid".into(),
                child_kind: "Deployment",
                grids: live.lock().clone(),
            }]
        });
        let labels = GridLabels {
            kind: "DeploymentGrid".into(),
            namespace: "edge".into(),
            grid: "web".into(),
        };
        let sites = SiteCount {
            targeted: 3,
            ready: 2,
        };
        m.set_sites("DeploymentGrid/edge/web".into(), labels, sites);
        let text = scrape(&registry);
        let series = "{kind=\"DeploymentGrid\",namespace=\"edge\",grid=\"web\"}";
        assert!(
            text.contains(&format!("sitegrid_controller_grid_sites{series} 3\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("sitegrid_controller_grid_sites_ready{series} 2\n")),
            "{text}"
        );
        // The grid is deleted: its series go with it.
        grids.lock().clear();
        let text = scrape(&registry);
        assert!(!text.contains("grid=\"web\""), "{text}");
    }

    #[test]
    fn cluster_reachability_is_one_series_per_managed_cluster() {
        let mut registry = Registry::with_prefix("sitegrid_controller");
        let m = Metrics::register(&mut registry);
        assert!(!scrape(&registry).contains("cluster_reachable"));
        let cluster = |name: &str, namespace: &str| ClusterLabels {
            cluster: name.into(),
            namespace: namespace.into(),
        };
        let clusters = vec![
            (cluster("edge-a", "clusternet-aaaaa"), true),
            (cluster("edge-b", "clusternet-bbbbb"), false),
        ];
        m.set_fleet(move || clusters.clone());
        let text = scrape(&registry);
        assert!(text.contains("sitegrid_controller_cluster_reachable{cluster=\"edge-a\",namespace=\"clusternet-aaaaa\"} 1\n"), "{text}");
        assert!(text.contains("sitegrid_controller_cluster_reachable{cluster=\"edge-b\",namespace=\"clusternet-bbbbb\"} 0\n"), "{text}");
    }
}
