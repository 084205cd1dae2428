//! The request stack, written down once. Outermost first:
//!
//! ```text
//! trace → rescue → classify → metrics → steer ─┬─ operator endpoints   (/healthz, /readyz, /metrics, /debug/*)
//!                                              ├─ offline reports     (a site proxy: its nodes' kubelets' pods, while it is offline)
//!                                              ├─ cached watch         (open-watch limit: 429 beyond it)
//!                                              ├─ cached list / get    (concurrency limit + load shedding)
//!                                              ├─ kubelet stream       (the node cache: the kubelet's other watches; the open-watch limit)
//!                                              ├─ kubelet              (the node cache: the kubelet's other requests)
//!                                              ├─ passthrough stream   (watch/follow of other kinds: the same open-watch limit)
//!                                              └─ passthrough          (concurrency limit + load shedding)
//! ```
//!
//! Classify also decides who the caller is ([`crate::http::Caller`]), once:
//! steer sends this node's kubelet to the node cache and refuses strangers
//! on the kubelet port; passthrough acts as the caller upstream.
//!
//! Metrics sit after classify because their labels (verb, resource) come
//! from the route; they still see shed (429) and failed (500) requests
//! because they record errors before rescue turns them into responses.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response};
use tower::{
    limit::ConcurrencyLimitLayer, load_shed::LoadShedLayer, util::BoxCloneSyncService,
    ServiceBuilder, ServiceExt,
};
use tower_http::trace::{DefaultMakeSpan, DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;

use super::{
    metrics::{RequestMetrics, RequestResource, RequestVerb},
    rescue::{is_overloaded, rescuing},
    route::{classify, Route, RouteConfig},
    steer::{CachedBranch, PassthroughBranch, Steer},
    watch_slots::WatchSlots,
    GatewayConfig,
};
use crate::{
    handlers::{self, request::CachedRequest, request::Verb},
    http::{response, Body, BoxError, Caller},
    kubelet::KubeletBranch,
};

/// The whole stack as one cloneable service; it never fails (errors become `Status` responses).
pub type Gateway = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// Concurrency bounds of the limited branches.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Concurrent cached lists/gets; more are shed with 429.
    pub cached_inflight: usize,
    /// Concurrent non-streaming passthrough requests; more are shed with 429.
    pub passthrough_inflight: usize,
    /// Watches (and log follows) open at once, cached and passed through; more get 429.
    pub watches: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // kube-apiserver's own defaults: 400 read-only requests in flight.
        Limits {
            cached_inflight: 400,
            passthrough_inflight: 400,
            watches: 1_000,
        }
    }
}

/// Builds the stack.
pub fn build(config: GatewayConfig) -> Gateway {
    let routes = RouteConfig {
        ops: config.ops.is_some(),
        debug: config.ops.as_ref().is_some_and(|o| o.debug),
        nodes: config.nodes.clone(),
        reports: config.reports.is_some(),
    };
    let metrics = config.metrics.clone();
    let limits = config.limits;
    let cached = cached_branch(&config);
    let upstream = passthrough_branch(&config);
    let watch_slots = WatchSlots::new(limits.watches);
    let node_read = config.kubelet.as_ref().map(|b| b.node_read.clone());
    let kubelet = config.kubelet.clone().map(|branch| {
        let service = kubelet_branch(branch);
        (watch_slots.guard(service.clone()), service)
    });
    let steer = Steer {
        watch: watch_slots.guard(cached.clone()),
        // Shed instead of queueing: a client gets 429 and retries, nobody waits behind a burst.
        cached: BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(LoadShedLayer::new())
                .layer(ConcurrencyLimitLayer::new(limits.cached_inflight))
                .service(cached),
        ),
        stream: watch_slots.guard(upstream.clone()),
        passthrough: BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(LoadShedLayer::new())
                .layer(ConcurrencyLimitLayer::new(limits.passthrough_inflight))
                .service(upstream),
        ),
        kubelet,
        node_read,
        ops: config.ops,
        clients: config.clients,
        reports: config.reports,
    };
    BoxCloneSyncService::new(
        ServiceBuilder::new()
            // (the trace layer wraps response bodies; unwrap them back to the one body type)
            .map_response(|resp: Response<_>| resp.map(Body::new))
            // trace: one debug line per request with method, path, status and latency (no headers: no secrets).
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(DefaultMakeSpan::new().level(Level::DEBUG))
                    .on_request(())
                    .on_response(DefaultOnResponse::new().level(Level::DEBUG))
                    // A 5xx is an answer, not the proxy failing (offline, the
                    // kubelet's writes get 503 every few seconds): debug too.
                    .on_failure(DefaultOnFailure::new().level(Level::DEBUG)),
            )
            // rescue: whatever fails below becomes a Kubernetes Status with the right code.
            .layer_fn(rescuing)
            // classify: parse method, path, query and Accept once; the route travels in the extensions.
            .map_request(move |req: Request<Body>| {
                let (mut parts, body) = req.into_parts();
                let route = classify(&parts, &routes);
                let caller = Caller::of(&parts);
                parts.extensions.insert(route);
                parts.extensions.insert(caller);
                Request::from_parts(parts, body)
            })
            // metrics: requests by verb, resource and code; latency of non-streaming ones.
            .layer_fn(move |inner: Steer| {
                let metrics = metrics.clone();
                tower::service_fn(move |req| metered(inner.clone(), metrics.clone(), req))
            })
            .service(steer),
    )
}

/// Turns downstream requests of any body type into the stack's body type.
pub fn boxed_request<B>(req: Request<B>) -> Request<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    req.map(Body::new)
}

/// The cache handlers as a service of parsed requests.
fn cached_branch(config: &GatewayConfig) -> CachedBranch {
    let (cache, settings, closing) = (
        config.cache.clone(),
        config.settings,
        config.closing.clone(),
    );
    BoxCloneSyncService::new(tower::service_fn(move |req: Box<CachedRequest>| {
        let (cache, closing) = (cache.clone(), closing.clone());
        async move { Ok::<_, BoxError>(handlers::handle(&cache, &settings, *req, &closing).await) }
    }))
}

/// Passthrough to the API server (404 without an upstream).
fn passthrough_branch(config: &GatewayConfig) -> PassthroughBranch {
    let passthrough = config.passthrough.clone();
    BoxCloneSyncService::new(tower::service_fn(move |req: Request<Body>| {
        let passthrough = passthrough.clone();
        async move {
            Ok::<_, BoxError>(match &passthrough {
                Some(passthrough) => passthrough.forward(req).await,
                None => response::status(&sitegrid_apimachinery::Status::not_found_resource()),
            })
        }
    }))
}

/// The node cache's branch as a service.
fn kubelet_branch(branch: KubeletBranch) -> PassthroughBranch {
    BoxCloneSyncService::new(tower::service_fn(move |req: Request<Body>| {
        let branch = branch.clone();
        async move { Ok::<_, BoxError>(branch.handle(req).await) }
    }))
}

/// The metrics layer: times the request and records it by verb, resource and code.
async fn metered(
    inner: Steer,
    metrics: RequestMetrics,
    req: Request<Body>,
) -> Result<Response<Body>, BoxError> {
    let (verb, resource, streaming) = match req.extensions().get::<Route>() {
        Some(route) => labels(route),
        None => (RequestVerb::Invalid, RequestResource::None, false),
    };
    let cached = match &resource {
        RequestResource::Cached(kind) => Some(*kind),
        _ => None,
    };
    let started = tokio::time::Instant::now();
    let result = inner.oneshot(req).await;
    let code = match &result {
        Ok(resp) => resp.status().as_u16(),
        Err(err) if is_overloaded(err) => 429,
        Err(_) => 500,
    };
    if let (Some(kind), Ok(resp)) = (cached, &result) {
        if resp.status().is_success() {
            let content_type = resp
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            metrics.record_content(verb, kind, content_type);
        }
    }
    // A watch's "latency" is its lifetime: keep it out of the histogram.
    metrics.record(
        verb,
        resource,
        code,
        (!streaming).then(|| started.elapsed()),
    );
    result
}

/// Verb and resource labels of a route, and whether the request streams.
fn labels(route: &Route) -> (RequestVerb, RequestResource, bool) {
    match route {
        Route::Cached(c) => {
            let verb = match c.verb {
                Verb::List(_) => RequestVerb::List,
                Verb::Watch(_) => RequestVerb::Watch,
                Verb::Get { .. } => RequestVerb::Get,
            };
            let resource = RequestResource::Cached(c.served.kind);
            (verb, resource, verb == RequestVerb::Watch)
        }
        Route::Rejected(_) => (RequestVerb::Invalid, RequestResource::None, false),
        Route::Ops(_) | Route::Report(_) => (RequestVerb::Ops, RequestResource::None, false),
        Route::Passthrough(p) => {
            let resource = match p.resource.as_str() {
                "" => RequestResource::None,
                name => RequestResource::Named(name.to_owned()),
            };
            (RequestVerb::Passthrough, resource, p.streaming)
        }
    }
}
