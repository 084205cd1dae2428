//! The controller's Prometheus metrics (`/metrics`).

use std::collections::HashMap;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

/// Counters and gauges, plus the bookkeeping behind the gauges.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindLabel, Counter>,
    errors: Family<KindLabel, Counter>,
    queue_depth: Family<KindLabel, Gauge>,
    objects: Family<KindLabel, Gauge>,
    writes: Family<WriteLabels, Counter>,
    leader: Gauge,
    /// Children each grid had after its last reconcile, by child kind and grid key.
    children: Mutex<HashMap<(String, String), usize>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `sitegrid_controller` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sitegrid_controller");
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
        let queue_depth = Family::<KindLabel, Gauge>::default();
        registry.register(
            "queue_depth",
            "Grids whose current version has not been reconciled yet, by grid kind",
            queue_depth.clone(),
        );
        let objects = Family::<KindLabel, Gauge>::default();
        registry.register(
            "objects",
            "Objects the controller manages: grids by grid kind, children by their kind",
            objects.clone(),
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
        Self {
            registry,
            reconciles,
            errors,
            queue_depth,
            objects,
            writes,
            leader,
            children: Mutex::new(HashMap::new()),
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
        self.children
            .lock()
            .insert((child_kind.to_owned(), grid_key), count);
    }

    /// Refreshes the gauges of one grid kind: `grids` lists each grid's key and
    /// whether its current version has been reconciled.
    pub fn refresh_kind(&self, kind: &str, child_kind: &str, grids: &[(String, bool)]) {
        let pending = grids.iter().filter(|(_, done)| !done).count();
        self.queue_depth
            .get_or_create(&Self::kind(kind))
            .set(pending as i64);
        self.objects
            .get_or_create(&Self::kind(kind))
            .set(grids.len() as i64);
        let mut children = self.children.lock();
        // Forget grids that no longer exist.
        children.retain(|(ck, key), _| ck != child_kind || grids.iter().any(|(k, _)| k == key));
        let total: usize = children
            .iter()
            .filter(|((ck, _), _)| ck == child_kind)
            .map(|(_, n)| n)
            .sum();
        self.objects
            .get_or_create(&Self::kind(child_kind))
            .set(total as i64);
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(err) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(%err, "encoding metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_kinds_and_counts_children_of_live_grids_only() {
        let m = Metrics::new();
        m.reconciled("DeploymentGrid");
        m.wrote("apply", "Deployment");
        m.wrote("apply", "Deployment");
        m.set_children("Deployment", "default/a".into(), 2);
        m.set_children("Deployment", "default/gone".into(), 5);
        m.refresh_kind(
            "DeploymentGrid",
            "Deployment",
            &[("default/a".into(), true), ("default/b".into(), false)],
        );
        let text = m.encode();
        assert!(text.contains("sitegrid_controller_reconciles_total{kind=\"DeploymentGrid\"} 1"));
        assert!(text.contains("sitegrid_controller_queue_depth{kind=\"DeploymentGrid\"} 1"));
        assert!(text.contains("sitegrid_controller_objects{kind=\"DeploymentGrid\"} 2"));
        assert!(text.contains("sitegrid_controller_objects{kind=\"Deployment\"} 2"));
        assert!(text.contains(
            "sitegrid_controller_api_writes_total{verb=\"apply\",kind=\"Deployment\"} 2"
        ));
    }
}
