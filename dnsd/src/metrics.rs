//! dnsd's Prometheus metrics (`/metrics`, prefix `sitegrid_dnsd`), recorded
//! where things happen: by the run loop (the file) and the watches.

use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::hosts::Hosts;

/// The resource a watch reads (`nodes`, `statefulsetgrids`, `pods`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    /// The plural resource name.
    pub resource: String,
}

/// Every metric dnsd exports.
#[derive(Debug, Default)]
pub struct Metrics {
    names: Gauge,
    records: Gauge,
    skipped: Gauge,
    writes: Counter,
    write_errors: Counter,
    last_write: Gauge<f64, AtomicU64>,
    watch_errors: Family<ResourceLabel, Counter>,
    selector_changes: Family<ResourceLabel, Counter>,
}

impl Metrics {
    /// Registers every metric in `registry` (the binary gives it the `sitegrid_dnsd` prefix).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Metrics::default();
        registry.register("names", "Distinct names in the hosts file", m.names.clone());
        registry.register(
            "records",
            "Lines (name, address) in the hosts file",
            m.records.clone(),
        );
        registry.register(
            "skipped_names",
            "Names left out of the hosts file because DNS cannot carry them (a label over 63 characters)",
            m.skipped.clone(),
        );
        registry.register(
            "writes",
            "Times the hosts file was replaced",
            m.writes.clone(),
        );
        registry.register(
            "write_errors",
            "Failed replacements of the hosts file (the old file stays; retried)",
            m.write_errors.clone(),
        );
        registry.register(
            "last_write_timestamp_seconds",
            "When the hosts file was last replaced (Unix time)",
            m.last_write.clone(),
        );
        registry.register(
            "watch_errors",
            "Errors of the API watches, by resource (each is retried with backoff)",
            m.watch_errors.clone(),
        );
        registry.register(
            "selector_changes",
            "Times a watch was restarted with a new selector (the site's StatefulSets or pods changed), by resource",
            m.selector_changes.clone(),
        );
        m
    }

    /// The file now holds `hosts`.
    pub fn wrote(&self, hosts: &Hosts) {
        self.writes.inc();
        self.last_write.set(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        self.shows(hosts);
    }

    /// The file holds `hosts` (written now or found so at start).
    pub fn shows(&self, hosts: &Hosts) {
        self.names.set(saturating_i64(hosts.names()));
        self.records.set(saturating_i64(hosts.records.len()));
        self.skipped.set(saturating_i64(hosts.skipped.len()));
    }

    /// A write of the file failed.
    pub fn write_failed(&self) {
        self.write_errors.inc();
    }

    /// A watch of `resource` starts: its error counter is exported from 0 on,
    /// so that `rate()` sees the first error (a series that appears with its
    /// first increment shows none).
    pub fn watching(&self, resource: &str) {
        // The guard of the family is not needed: creating the series is all.
        drop(self.watch_errors.get_or_create(&label(resource)));
    }

    /// The watch of `resource` failed (and will retry).
    pub fn watch_failed(&self, resource: &str) {
        self.watch_errors.get_or_create(&label(resource)).inc();
    }

    /// The watch of `resource` restarts with a new selector.
    pub fn selector_changed(&self, resource: &str) {
        self.selector_changes.get_or_create(&label(resource)).inc();
    }
}

fn label(resource: &str) -> ResourceLabel {
    ResourceLabel {
        resource: resource.to_owned(),
    }
}

fn saturating_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
