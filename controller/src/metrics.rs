//! The controller's Prometheus metrics (`/metrics`): counters recorded where
//! things happen, and the gauges of the grids (queue depth, objects) read from
//! the controllers' stores at scrape time by a [`Collector`].

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

type CensusFn = Box<dyn Fn() -> Vec<KindCensus> + Send + Sync>;

/// What the scrape-time gauges are computed from.
#[derive(Default)]
struct Census {
    /// Children each grid had after its last reconcile, by child kind and grid key.
    children: Mutex<HashMap<(String, String), usize>>,
    /// Reads the grids from the controllers' stores; set once they run.
    grids: OnceLock<CensusFn>,
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

    /// How a scrape reads the grids (once the controllers run; later calls are ignored).
    pub fn set_census(&self, grids: impl Fn() -> Vec<KindCensus> + Send + Sync + 'static) {
        // Set once per process: a second controller run keeps the first reader.
        let _ = self.census.grids.set(Box::new(grids));
    }
}

impl Collector for Census {
    /// `queue_depth{kind}` and `objects{kind}`: grids by grid kind, children
    /// of live grids by their kind.
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(read) = self.grids.get() else {
            return Ok(());
        };
        let kinds = read();
        let mut queue = Vec::new();
        let mut objects = Vec::new();
        let mut children = self.children.lock();
        for census in &kinds {
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
                ConstGauge::new(value as i64).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
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
}
