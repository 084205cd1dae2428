//! The cache's metrics. Hot paths bump an atomic per kind; everything is
//! read at scrape time by a prometheus-client [`Collector`] over the cache,
//! so gauges (objects, logged events, readiness, open watches) are derived
//! from the one place that holds each state, never kept alongside.

use std::{
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::{SystemTime, UNIX_EPOCH},
};

use prometheus_client::{
    collector::Collector,
    encoding::{
        DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
    },
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
    registry::Registry,
};

use super::{
    kind::{PerKind, ResourceKind},
    Cache,
};

/// Why an upstream list or watch failed: the `reason` label of
/// `upstream_errors_total` (the upstream feeds tell the reason).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum UpstreamErrorReason {
    /// A body that is not the JSON it should be (a list refused whole, or
    /// one watch event skipped).
    Decode,
    /// 429 Too Many Requests, after the client's own retries.
    Throttled,
    /// Any other 5xx answer.
    ServerError,
    /// Another error Status (4xx) than 410.
    Rejected,
    /// 410 Gone: the version watched from was compacted; a relist follows.
    Expired,
    /// No answer in time: a list past its deadline, a watch silent past its timeout.
    Timeout,
    /// The TLS handshake failed (e.g. a serving certificate not trusted).
    Tls,
    /// The connection could not be made or broke.
    Connect,
    /// Anything else.
    Other,
}

impl UpstreamErrorReason {
    /// Whether an error of this reason says the API server is failing (no
    /// list or watch can succeed meanwhile), not that one request was wrong.
    pub fn is_upstream_failing(self) -> bool {
        matches!(
            self,
            UpstreamErrorReason::Throttled
                | UpstreamErrorReason::ServerError
                | UpstreamErrorReason::Timeout
                | UpstreamErrorReason::Tls
                | UpstreamErrorReason::Connect
        )
    }

    /// Every reason, in label order.
    pub const ALL: [UpstreamErrorReason; 9] = [
        UpstreamErrorReason::Decode,
        UpstreamErrorReason::Throttled,
        UpstreamErrorReason::ServerError,
        UpstreamErrorReason::Rejected,
        UpstreamErrorReason::Expired,
        UpstreamErrorReason::Timeout,
        UpstreamErrorReason::Tls,
        UpstreamErrorReason::Connect,
        UpstreamErrorReason::Other,
    ];

    /// The label value (`server_error`).
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamErrorReason::Decode => "decode",
            UpstreamErrorReason::Throttled => "throttled",
            UpstreamErrorReason::ServerError => "server_error",
            UpstreamErrorReason::Rejected => "rejected",
            UpstreamErrorReason::Expired => "expired",
            UpstreamErrorReason::Timeout => "timeout",
            UpstreamErrorReason::Tls => "tls",
            UpstreamErrorReason::Connect => "connect",
            UpstreamErrorReason::Other => "other",
        }
    }
}

impl std::fmt::Display for UpstreamErrorReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the counters count, in [`COUNTED`] order.
#[derive(Clone, Copy, Debug)]
enum Counted {
    EventsIn,
    EventsOut,
    Lagged,
    TooOld,
    Reconnects,
    Skipped,
    ListsMade,
    ListsShared,
}

/// Name and help of each [`Counted`] counter (`_total` is added on encoding).
const COUNTED: [(&str, &str); 8] = [
    (
        "watch_events_in",
        "Upstream watch events applied to the cache, by resource",
    ),
    (
        "watch_events_out",
        "Watch event frames sent to clients, by resource",
    ),
    (
        "watchers_ended_lagging",
        "Watches ended with 410 Expired because they fell behind, by resource",
    ),
    (
        "watches_too_old",
        "Watches answered with a 410 Gone ERROR because their resourceVersion is older than the resume log, by resource",
    ),
    (
        "upstream_reconnects",
        "Upstream watches re-established with a new list, by resource",
    ),
    (
        "upstream_objects_skipped",
        "Upstream objects not taken in because they do not decode as their kind (the last good version stays served), by resource",
    ),
    (
        "lists_encoded",
        "Whole LISTs in JSON or protobuf (no page limit, the newest state) made from the cache's objects for their own request, or made once to be shared (see lists_shared), by resource",
    ),
    (
        "lists_shared",
        "Whole LISTs answered with the bytes another LIST of the same question and version made, by resource",
    ),
];

/// The `reason` label (`reason="server_error"`).
impl EncodeLabelValue for UpstreamErrorReason {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// The per-kind counters the writer, the sync loop and the watch handler record.
#[derive(Debug, Default)]
pub struct CacheMetrics {
    counts: PerKind<[AtomicU64; 8]>,
    errors: PerKind<[AtomicU64; UpstreamErrorReason::ALL.len()]>,
    /// Whether the last upstream answer for the kind was protobuf.
    protobuf: PerKind<AtomicBool>,
    /// Upstream `Retry-After`s shortened to the client's cap.
    retry_after_capped: AtomicU64,
}

impl CacheMetrics {
    fn add(&self, which: Counted, kind: ResourceKind, n: u64) {
        self.counts[kind][which as usize].fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, which: Counted, kind: ResourceKind) -> u64 {
        self.counts[kind][which as usize].load(Ordering::Relaxed)
    }

    /// `n` upstream watch events applied.
    pub fn events_in(&self, kind: ResourceKind, n: u64) {
        self.add(Counted::EventsIn, kind, n);
    }

    /// `n` watch frames sent to clients.
    pub fn events_out(&self, kind: ResourceKind, n: u64) {
        self.add(Counted::EventsOut, kind, n);
    }

    /// A watch ended with 410 Expired for falling behind.
    pub fn watcher_lagged(&self, kind: ResourceKind) {
        self.add(Counted::Lagged, kind, 1);
    }

    /// A watch answered with 410 Gone: its version is older than the log.
    pub fn watch_too_old(&self, kind: ResourceKind) {
        self.add(Counted::TooOld, kind, 1);
    }

    /// An upstream watch re-established with a new list.
    pub fn upstream_reconnect(&self, kind: ResourceKind) {
        self.add(Counted::Reconnects, kind, 1);
    }

    /// An upstream answer asked to be retried later than the client waits
    /// (its `Retry-After` was shortened to the cap).
    pub fn upstream_retry_after_capped(&self) {
        self.retry_after_capped.fetch_add(1, Ordering::Relaxed);
    }

    /// Upstream `Retry-After`s shortened so far.
    pub fn upstream_retry_afters_capped(&self) -> u64 {
        self.retry_after_capped.load(Ordering::Relaxed)
    }

    /// An error from an upstream list or watch.
    pub fn upstream_error(&self, kind: ResourceKind, reason: UpstreamErrorReason) {
        self.errors[kind][reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The errors from upstream lists and watches of `kind` so far, for `reason`.
    pub fn upstream_errors(&self, kind: ResourceKind, reason: UpstreamErrorReason) -> u64 {
        self.errors[kind][reason as usize].load(Ordering::Relaxed)
    }

    /// Whether the last upstream answer (a list page or a watch) for `kind`
    /// came in protobuf.
    pub fn upstream_protobuf(&self, kind: ResourceKind, protobuf: bool) {
        self.protobuf[kind].store(protobuf, Ordering::Relaxed);
    }

    /// Whether upstream answers for `kind` come in protobuf now.
    pub fn reads_protobuf(&self, kind: ResourceKind) -> bool {
        self.protobuf[kind].load(Ordering::Relaxed)
    }

    /// An upstream object not taken in: it does not decode as its kind.
    pub fn object_skipped(&self, kind: ResourceKind) {
        self.add(Counted::Skipped, kind, 1);
    }

    /// A whole LIST answered: with bytes it encoded (`shared: false`), or
    /// with those another LIST encoded at the same version.
    pub fn list_answered(&self, kind: ResourceKind, shared: bool) {
        let which = if shared {
            Counted::ListsShared
        } else {
            Counted::ListsMade
        };
        self.add(which, kind, 1);
    }
}

/// The `resource` and `reason` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    resource: ResourceKind,
    reason: UpstreamErrorReason,
}

/// The `resource` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource: ResourceKind,
}

/// Encodes one metric with a series per kind.
fn per_kind<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    metric_type: MetricType,
    value: impl Fn(ResourceKind) -> M,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for resource in ResourceKind::ALL {
        value(resource).encode(metric.encode_family(&ResourceLabel { resource })?)?;
    }
    Ok(())
}

/// Reads the cache at scrape time.
#[derive(Debug)]
struct CacheCollector(Cache);

impl Collector for CacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let cache = &self.0;
        let metrics = cache.metrics();
        for (i, which) in [
            Counted::EventsIn,
            Counted::EventsOut,
            Counted::Lagged,
            Counted::TooOld,
            Counted::Reconnects,
            Counted::Skipped,
            Counted::ListsMade,
            Counted::ListsShared,
        ]
        .into_iter()
        .enumerate()
        {
            per_kind(&mut encoder, COUNTED[i], MetricType::Counter, |k| {
                ConstCounter::new(metrics.get(which, k))
            })?;
        }
        let mut errors = encoder.encode_descriptor(
            "upstream_errors",
            "Errors from upstream lists and watches (each retried with backoff; the cache keeps serving), by resource and reason",
            None,
            MetricType::Counter,
        )?;
        for resource in ResourceKind::ALL {
            for reason in UpstreamErrorReason::ALL {
                ConstCounter::new(metrics.upstream_errors(resource, reason))
                    .encode(errors.encode_family(&ErrorLabels { resource, reason })?)?;
            }
        }
        ConstCounter::new(metrics.upstream_retry_afters_capped()).encode(
            encoder.encode_descriptor(
                "upstream_retry_after_capped",
                "Upstream answers whose Retry-After asked for a longer wait than the client's cap, retried at the cap instead",
                None,
                MetricType::Counter,
            )?,
        )?;
        per_kind(
            &mut encoder,
            (
                "upstream_protobuf",
                "1 while upstream answers for the resource come in protobuf (Services, Endpoints, EndpointSlices; see --upstream-protobuf), 0 in JSON",
            ),
            MetricType::Gauge,
            |k| ConstGauge::new(i64::from(metrics.reads_protobuf(k))),
        )?;
        let open = cache.watchers().count();
        per_kind(
            &mut encoder,
            ("watchers_open", "Watches currently open, by resource"),
            MetricType::Gauge,
            |k| ConstGauge::new(gauge(open[k] as u64)),
        )?;
        let sizes = PerKind::new(|k| cache.store(k).sizes());
        per_kind(
            &mut encoder,
            ("cache_objects", "Objects in the cache, by resource"),
            MetricType::Gauge,
            |k| ConstGauge::new(gauge(sizes[k].objects as u64)),
        )?;
        per_kind(
            &mut encoder,
            (
                "cache_log_events",
                "Events kept for watch resume, by resource",
            ),
            MetricType::Gauge,
            |k| ConstGauge::new(gauge(sizes[k].log_events as u64)),
        )?;
        per_kind(
            &mut encoder,
            (
                "cache_log_bytes",
                "Bytes the events kept for watch resume pin, about, by resource",
            ),
            MetricType::Gauge,
            |k| ConstGauge::new(gauge(sizes[k].log_bytes as u64)),
        )?;
        per_kind(
            &mut encoder,
            (
                "cache_list_bytes",
                "Bytes of whole lists kept encoded for the LISTs of the resource's current version",
            ),
            MetricType::Gauge,
            |k| ConstGauge::new(gauge(sizes[k].list_bytes as u64)),
        )?;
        per_kind(
            &mut encoder,
            (
                "cache_synced",
                "1 once the resource is served from the cache (first full sync done)",
            ),
            MetricType::Gauge,
            |k| ConstGauge::new(i64::from(cache.readiness().is_served(k))),
        )?;
        per_kind(
            &mut encoder,
            (
                "cache_wanted",
                "1 once the resource is listed and watched upstream: services and nodes always, the others (with on-demand reflection) from the first request for them",
            ),
            MetricType::Gauge,
            |k| ConstGauge::new(i64::from(cache.readiness().is_wanted(k))),
        )?;
        ConstGauge::new(gauge(cache.current_rv())).encode(encoder.encode_descriptor(
            "cache_resource_version",
            "The newest resourceVersion the cache has handed out",
            None,
            MetricType::Gauge,
        )?)?;
        encode_persisted(cache, &mut encoder)
    }
}

/// The snapshot's figures (`--data-dir`).
fn encode_persisted(cache: &Cache, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let persisted = cache.persisted();
    let now = SystemTime::now();
    let seconds = |t: SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let mut gauge_f64 = |name: &str, help: &str, value: f64| -> Result<(), std::fmt::Error> {
        ConstGauge::new(value).encode(encoder.encode_descriptor(
            name,
            help,
            None,
            MetricType::Gauge,
        )?)
    };
    if let Some(taken) = persisted.taken() {
        gauge_f64(
            "snapshot_age_seconds",
            "Age of the newest snapshot on disk (written by this process or found at start)",
            now.duration_since(taken).map_or(0.0, |d| d.as_secs_f64()),
        )?;
    }
    gauge_f64(
        "snapshot_serving_since_timestamp_seconds",
        "While some served kinds still hold a snapshot's data (not yet synced with the API server): when that snapshot was taken; 0 otherwise",
        cache.readiness().degraded().map_or(0.0, seconds),
    )?;
    gauge_f64(
        "snapshot_size_bytes",
        "Size of the last snapshot written",
        persisted.size() as f64,
    )?;
    for (name, help, value) in [
        ("snapshot_writes", "Snapshots written", persisted.writes()),
        (
            "snapshot_written_bytes",
            "Bytes of snapshots written",
            persisted.bytes_written(),
        ),
        (
            "snapshot_write_errors",
            "Snapshot writes that failed (the previous snapshot stays)",
            persisted.errors(),
        ),
    ] {
        ConstCounter::new(value).encode(encoder.encode_descriptor(
            name,
            help,
            None,
            MetricType::Counter,
        )?)?;
    }
    Ok(())
}

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Cache {
    /// Registers the cache's metrics (counters and scrape-time gauges) in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(CacheCollector(self.clone())));
    }
}
