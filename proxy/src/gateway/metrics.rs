//! Request metrics, recorded by the metrics layer of the stack:
//! `requests_total{verb, resource, code}`, `request_duration_seconds{verb}`
//! (watches excluded: their duration is the client's choice), and
//! `cached_responses_total{verb, resource, content_type}` (which wire format
//! the cache's clients get: JSON or protobuf).

use std::{
    fmt::{self, Write as _},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use prometheus_client::{
    encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder},
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{exponential_buckets, Histogram},
    },
    registry::{Registry, Unit},
};

use sitegrid_cache::ResourceKind;

/// Distinct `{verb, resource, code}` series kept before new resources are
/// folded into `resource="other"`: passthrough resources come from client
/// paths, and a scrape must not grow with whatever a client makes up.
const MAX_REQUEST_SERIES: usize = 1_000;

/// What a request did, as a label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RequestVerb {
    /// A cached LIST.
    List,
    /// A cached WATCH.
    Watch,
    /// A cached GET.
    Get,
    /// Forwarded to the API server.
    Passthrough,
    /// An operator endpoint.
    Ops,
    /// A cached path refused before a handler (bad query, 406).
    Invalid,
}

impl EncodeLabelValue for RequestVerb {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        encoder.write_str(match self {
            RequestVerb::List => "list",
            RequestVerb::Watch => "watch",
            RequestVerb::Get => "get",
            RequestVerb::Passthrough => "passthrough",
            RequestVerb::Ops => "ops",
            RequestVerb::Invalid => "invalid",
        })
    }
}

/// Which resource a request was for, as a label.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum RequestResource {
    /// A cached kind.
    Cached(ResourceKind),
    /// A passthrough resource, as its path names it.
    Named(String),
    /// Too many distinct resources were seen: folded together.
    Other,
    /// None (operator endpoints, discovery, `/version`).
    None,
}

impl EncodeLabelValue for RequestResource {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        match self {
            RequestResource::Cached(kind) => encoder.write_str(kind.plural()),
            RequestResource::Named(name) => encoder.write_str(name),
            RequestResource::Other => encoder.write_str("other"),
            RequestResource::None => Ok(()),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: RequestVerb,
    resource: RequestResource,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ContentLabels {
    verb: RequestVerb,
    resource: RequestResource,
    content_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabel {
    verb: RequestVerb,
}

/// The request metric families.
#[derive(Clone)]
pub struct RequestMetrics {
    requests: Family<RequestLabels, Counter>,
    /// Series created in `requests` (approximate under races: it only bounds them).
    series: std::sync::Arc<AtomicUsize>,
    durations: Family<VerbLabel, Histogram, fn() -> Histogram>,
    content: Family<ContentLabels, Counter>,
}

/// Buckets from 0.5 ms to about 8 s: cached gets take well under a
/// millisecond, a large cached list or a slow passthrough seconds.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

impl RequestMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &mut Registry) -> RequestMetrics {
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by verb (list, watch, get, passthrough, ops, invalid), resource and HTTP code",
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
        let content = Family::<ContentLabels, Counter>::default();
        registry.register(
            "cached_responses",
            "Successful answers from the cache, by verb, resource and Content-Type",
            content.clone(),
        );
        RequestMetrics {
            requests,
            series: Default::default(),
            durations,
            content,
        }
    }

    /// Metrics registered nowhere (a stack built for tests or embedding).
    pub fn unregistered() -> RequestMetrics {
        RequestMetrics::register(&mut Registry::default())
    }

    /// Counts one answered request; `elapsed` feeds the duration histogram
    /// (`None` for watches).
    pub fn record(
        &self,
        verb: RequestVerb,
        resource: RequestResource,
        code: u16,
        elapsed: Option<Duration>,
    ) {
        let mut labels = RequestLabels {
            verb,
            resource,
            code,
        };
        // The guard `get` returns is dropped at the end of this statement,
        // before `get_or_create` may take the family's write lock.
        let counted = self.requests.get(&labels).map(|c| c.inc()).is_some();
        if !counted {
            if self.series.load(Ordering::Relaxed) >= MAX_REQUEST_SERIES {
                labels.resource = RequestResource::Other;
            } else {
                self.series.fetch_add(1, Ordering::Relaxed);
            }
            self.requests.get_or_create(&labels).inc();
        }
        if let Some(elapsed) = elapsed {
            self.durations
                .get_or_create(&VerbLabel { verb })
                .observe(elapsed.as_secs_f64());
        }
    }

    /// Counts one successful answer from the cache by its `Content-Type`
    /// (one of the few the cache writes; anything else is `other`).
    pub fn record_content(&self, verb: RequestVerb, kind: ResourceKind, content_type: &str) {
        let content_type = match content_type {
            "application/json"
            | "application/vnd.kubernetes.protobuf"
            | "application/vnd.kubernetes.protobuf;stream=watch" => content_type,
            _ => "other",
        };
        self.content
            .get_or_create(&ContentLabels {
                verb,
                resource: RequestResource::Cached(kind),
                content_type: content_type.to_owned(),
            })
            .inc();
    }
}
