//! The proxy's Prometheus metrics: one registry, cheap recorders for the hot
//! paths, and cache gauges read from the [`Cache`] at scrape time.

use std::{
    borrow::Cow,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{exponential_buckets, Histogram},
    },
    registry::{Registry, Unit},
};

use crate::{cache::Cache, resource::ResourceKind};

/// The content type of [`Metrics::encode`]'s output, as prometheus-client documents it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Distinct `{verb, resource, code}` series kept before new resources are
/// folded into `resource="other"`: passthrough resources come from client
/// paths, and a scrape must not grow with whatever a client makes up.
const MAX_REQUEST_SERIES: usize = 1_000;

/// Labels of `requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: Cow<'static, str>,
    resource: Cow<'static, str>,
    code: u16,
}

/// Labels of the request duration histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabel {
    verb: Cow<'static, str>,
}

/// Labels of every per-resource metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource: Cow<'static, str>,
}

impl ResourceLabel {
    fn new(resource: &str) -> Self {
        ResourceLabel {
            resource: known(resource)
                .map(|k| Cow::Borrowed(k.plural()))
                .unwrap_or_else(|| Cow::Owned(resource.to_owned())),
        }
    }
}

/// The per-resource counters, indexing [`ResourceCounters`].
#[derive(Clone, Copy, Debug)]
enum Counted {
    EventsIn,
    EventsOut,
    Lagged,
    Reconnects,
    Errors,
}

/// Name and help of each [`Counted`] metric, in its order.
const COUNTED: [(&str, &str); 5] = [
    (
        "watch_events_in",
        "Upstream watch events applied to the cache",
    ),
    ("watch_events_out", "Watch event frames sent to clients"),
    (
        "watchers_ended_lagging",
        "Watches ended with 410 Expired because they fell behind",
    ),
    ("upstream_reconnects", "Upstream watches re-established"),
    ("upstream_errors", "Errors from upstream lists and watches"),
];

/// One counter family per [`Counted`], with the series of the cached kinds
/// created up front so the hot paths touch an atomic and nothing else.
struct ResourceCounters {
    families: [Family<ResourceLabel, Counter>; 5],
    /// `known[kind.index()][counted as usize]`.
    known: [[Counter; 5]; 4],
}

impl ResourceCounters {
    fn add(&self, which: Counted, resource: &str, n: u64) {
        match known(resource) {
            Some(kind) => self.known[kind.index()][which as usize].inc_by(n),
            None => self.families[which as usize]
                .get_or_create(&ResourceLabel::new(resource))
                .inc_by(n),
        };
    }
}

/// Every metric the proxy exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    /// Series created in `requests` (approximate under races: it only bounds them).
    request_series: AtomicUsize,
    durations: Family<VerbLabel, Histogram, fn() -> Histogram>,
    watchers_open: Family<ResourceLabel, Gauge>,
    watchers_open_known: [Gauge; 4],
    counters: ResourceCounters,
    cache_objects: Family<ResourceLabel, Gauge>,
    cache_log_events: Family<ResourceLabel, Gauge>,
    cache_synced: Family<ResourceLabel, Gauge>,
    cache_rv: Gauge,
}

/// Keeps `watchers_open` counted up while a watch is open; dropping it counts down.
#[derive(Debug)]
pub struct WatchGuard {
    gauge: Gauge,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Buckets from 0.5 ms to about 8 s: cached gets take well under a
/// millisecond, a large cached list or a slow passthrough seconds.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

/// The cached kind whose plural is `resource`.
fn known(resource: &str) -> Option<ResourceKind> {
    ResourceKind::ALL
        .into_iter()
        .find(|k| k.plural() == resource)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered under `sitegrid_proxy_`.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("sitegrid_proxy");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by verb (list, watch, get, passthrough, ops), resource and HTTP code",
            requests.clone(),
        );
        let durations: Family<VerbLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(duration_histogram);
        registry.register_with_unit(
            "request_duration",
            "Time to answer non-watch requests, by verb",
            Unit::Seconds,
            durations.clone(),
        );
        let watchers_open = Family::<ResourceLabel, Gauge>::default();
        registry.register(
            "watchers_open",
            "Watches currently open, by resource",
            watchers_open.clone(),
        );
        let families: [Family<ResourceLabel, Counter>; 5] = Default::default();
        for ((name, help), family) in COUNTED.iter().zip(&families) {
            registry.register(*name, format!("{help}, by resource"), family.clone());
        }
        let known = ResourceKind::ALL.map(|kind| {
            let label = ResourceLabel::new(kind.plural());
            families
                .each_ref()
                .map(|family| family.get_or_create_owned(&label))
        });
        let watchers_open_known = ResourceKind::ALL
            .map(|kind| watchers_open.get_or_create_owned(&ResourceLabel::new(kind.plural())));
        let cache_objects = Family::<ResourceLabel, Gauge>::default();
        registry.register(
            "cache_objects",
            "Objects in the cache, by resource",
            cache_objects.clone(),
        );
        let cache_log_events = Family::<ResourceLabel, Gauge>::default();
        registry.register(
            "cache_log_events",
            "Events kept for watch resume, by resource",
            cache_log_events.clone(),
        );
        let cache_synced = Family::<ResourceLabel, Gauge>::default();
        registry.register(
            "cache_synced",
            "1 once the resource's first full sync from the upstream is done",
            cache_synced.clone(),
        );
        let cache_rv = Gauge::default();
        registry.register(
            "cache_resource_version",
            "The newest resourceVersion the cache has handed out",
            cache_rv.clone(),
        );
        Metrics {
            registry,
            requests,
            request_series: AtomicUsize::new(0),
            durations,
            watchers_open,
            watchers_open_known,
            counters: ResourceCounters { families, known },
            cache_objects,
            cache_log_events,
            cache_synced,
            cache_rv,
        }
    }

    /// Counts one answered request; `elapsed` feeds the duration histogram
    /// (pass `None` for watches, whose duration is the client's choice).
    pub fn request(&self, verb: &str, resource: &str, code: u16, elapsed: Option<Duration>) {
        let verb = label_str(verb);
        let mut labels = RequestLabels {
            verb: verb.clone(),
            resource: ResourceLabel::new(resource).resource,
            code,
        };
        // The guard `get` returns is dropped at the end of this statement,
        // before `get_or_create` may take the family's write lock.
        let counted = self.requests.get(&labels).map(|c| c.inc()).is_some();
        if !counted {
            if self.request_series.load(Ordering::Relaxed) >= MAX_REQUEST_SERIES {
                labels.resource = Cow::Borrowed("other");
            } else {
                self.request_series.fetch_add(1, Ordering::Relaxed);
            }
            self.requests.get_or_create(&labels).inc();
        }
        if let Some(elapsed) = elapsed {
            self.durations
                .get_or_create(&VerbLabel { verb })
                .observe(elapsed.as_secs_f64());
        }
    }

    /// Counts a watch as open until the returned guard is dropped.
    pub fn watch_opened(&self, resource: &str) -> WatchGuard {
        let gauge = match known(resource) {
            Some(kind) => self.watchers_open_known[kind.index()].clone(),
            None => self
                .watchers_open
                .get_or_create_owned(&ResourceLabel::new(resource)),
        };
        gauge.inc();
        WatchGuard { gauge }
    }

    /// Counts `n` upstream watch events applied to the cache.
    pub fn events_in(&self, resource: &str, n: u64) {
        self.counters.add(Counted::EventsIn, resource, n);
    }

    /// Counts `n` watch event frames sent to clients.
    pub fn events_out(&self, resource: &str, n: u64) {
        self.counters.add(Counted::EventsOut, resource, n);
    }

    /// Counts a watch ended with 410 Expired for falling behind.
    pub fn watcher_lagged(&self, resource: &str) {
        self.counters.add(Counted::Lagged, resource, 1);
    }

    /// Counts an upstream watch re-established.
    pub fn upstream_reconnect(&self, resource: &str) {
        self.counters.add(Counted::Reconnects, resource, 1);
    }

    /// Counts an error from an upstream list or watch.
    pub fn upstream_error(&self, resource: &str) {
        self.counters.add(Counted::Errors, resource, 1);
    }

    /// Reads the cache gauges from `cache` and renders every metric in the
    /// OpenMetrics text format (serve it as [`CONTENT_TYPE`]).
    pub fn encode(&self, cache: &Cache) -> String {
        for kind in ResourceKind::ALL {
            let store = cache.store(kind);
            let (objects, logged) = store.sizes();
            let label = ResourceLabel::new(kind.plural());
            self.cache_objects
                .get_or_create(&label)
                .set(saturating_i64(objects as u64));
            self.cache_log_events
                .get_or_create(&label)
                .set(saturating_i64(logged as u64));
            self.cache_synced
                .get_or_create(&label)
                .set(i64::from(store.is_synced()));
        }
        self.cache_rv.set(saturating_i64(cache.current_rv()));
        let mut out = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail; an error here would come from a
        // label encoder, and a partial scrape is still worth serving.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics");
        }
        out
    }
}

/// Verbs are a small fixed set: borrow the common ones instead of allocating.
fn label_str(s: &str) -> Cow<'static, str> {
    const COMMON: [&str; 6] = ["list", "watch", "get", "passthrough", "ops", "other"];
    match COMMON.into_iter().find(|c| *c == s) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(s.to_owned()),
    }
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
