//! The node cache's metrics: counters bumped where answers are given and
//! files written; what is kept is counted at scrape time from the state
//! itself (a prometheus-client [`Collector`]), never kept alongside.

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicU64, Ordering},
};

use parking_lot::Mutex;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
    registry::Registry,
};

use crate::{Flushed, NodeCache};

/// The counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Offline answers given, by (resource, verb).
    answers: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// Offline requests refused, by (resource, reason).
    refusals: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// Watches answered `410` because they did not continue what is kept.
    pub(crate) gaps: AtomicU64,
    writes: AtomicU64,
    write_errors: AtomicU64,
    written_bytes: AtomicU64,
}

impl Counters {
    pub(crate) fn answered(&self, resource: &'static str, verb: &'static str) {
        *self.answers.lock().entry((resource, verb)).or_default() += 1;
    }

    pub(crate) fn refused(&self, resource: &'static str, reason: &'static str) {
        *self.refusals.lock().entry((resource, reason)).or_default() += 1;
    }

    pub(crate) fn written(&self, f: &Flushed) {
        self.writes.fetch_add(f.files, Ordering::Relaxed);
        self.write_errors.fetch_add(f.errors, Ordering::Relaxed);
        self.written_bytes.fetch_add(f.bytes, Ordering::Relaxed);
    }
}

impl NodeCache {
    /// Registers the node cache's metrics (`node_cache_*`) in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(NodeCacheCollector(self.clone())));
    }

    /// What is kept, per resource: (objects, scopes).
    pub fn kept(&self) -> BTreeMap<&'static str, (usize, usize)> {
        let state = self.inner.state.read();
        state
            .resources
            .iter()
            .map(|(r, s)| (r.plural(), (s.objects.len(), s.scopes.len())))
            .collect()
    }

    /// How many service-account tokens are kept.
    pub fn kept_tokens(&self) -> usize {
        self.inner.state.read().tokens.len()
    }
}

#[derive(Clone)]
struct NodeCacheCollector(NodeCache);

impl std::fmt::Debug for NodeCacheCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCacheCollector")
    }
}

impl Collector for NodeCacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let cache = &self.0;
        let c = &cache.inner.counters;
        let kept = cache.kept();
        let mut objects = encoder.encode_descriptor(
            "node_cache_objects",
            "Objects the node cache keeps for the kubelet, by resource",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (resource, (n, _)) in &kept {
            let g = ConstGauge::new(*n as i64);
            g.encode(objects.encode_family(&[("resource", *resource)])?)?;
        }
        let mut scopes = encoder.encode_descriptor(
            "node_cache_scopes",
            "Lists (scopes) the node cache keeps, by resource",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (resource, (_, n)) in &kept {
            let g = ConstGauge::new(*n as i64);
            g.encode(scopes.encode_family(&[("resource", *resource)])?)?;
        }
        ConstGauge::new(cache.kept_tokens() as i64).encode(encoder.encode_descriptor(
            "node_cache_tokens",
            "Service-account tokens the node cache keeps",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?)?;
        let mut answers = encoder.encode_descriptor(
            "node_cache_answers",
            "Requests of the kubelet answered from the node cache while the API server was unreachable",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for ((resource, verb), n) in c.answers.lock().iter() {
            ConstCounter::new(*n)
                .encode(answers.encode_family(&[("resource", *resource), ("verb", *verb)])?)?;
        }
        let mut refusals = encoder.encode_descriptor(
            "node_cache_refusals",
            "Requests of the kubelet the node cache could not answer while the API server was unreachable, by reason",
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for ((resource, reason), n) in c.refusals.lock().iter() {
            ConstCounter::new(*n)
                .encode(refusals.encode_family(&[("resource", *resource), ("reason", *reason)])?)?;
        }
        for (name, help, value) in [
            (
                "node_cache_watch_gaps",
                "Watches of the kubelet answered 410 because they did not start where the kept list was (the kubelet lists again)",
                &c.gaps,
            ),
            ("node_cache_writes", "Node cache files written", &c.writes),
            ("node_cache_write_errors", "Node cache files that could not be written", &c.write_errors),
            ("node_cache_written_bytes", "Bytes of node cache files written", &c.written_bytes),
        ] {
            ConstCounter::new(value.load(Ordering::Relaxed)).encode(encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Counter,
            )?)?;
        }
        ConstGauge::new(
            i64::try_from(cache.inner.size.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
        )
        .encode(encoder.encode_descriptor(
            "node_cache_size_bytes",
            "Bytes the node cache's files take on disk",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?)?;
        Ok(())
    }
}
