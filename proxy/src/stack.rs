//! The request stack, written down once. Outermost first:
//!
//! ```text
//! trace → rescue → classify → metrics → steer ─┬─ operator endpoints   (/healthz, /readyz, /metrics, /debug/*)
//!                                              ├─ cached watch         (no limit: watches honour timeoutSeconds)
//!                                              ├─ cached list / get    (concurrency limit + load shedding)
//!                                              ├─ passthrough stream   (watch/follow of other kinds: no limit)
//!                                              └─ passthrough          (concurrency limit + load shedding)
//! ```
//!
//! Metrics sit after classify because their labels (verb, resource) come
//! from the route; they still see shed (429) and failed (500) requests
//! because they record errors before rescue turns them into responses.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{Request, Response};
use sitegrid_apimachinery::Status;
use tower::{
    limit::ConcurrencyLimitLayer, load_shed::LoadShedLayer, util::BoxCloneSyncService, Service,
    ServiceBuilder, ServiceExt,
};
use tower_http::trace::{DefaultMakeSpan, DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::{
    ops::{Metrics, Ops},
    passthrough,
    serve::{
        self,
        response::{self, Body, BoxError},
        route::{classify, Route, Verb},
    },
    server::Shared,
};

/// A branch of the stack.
type Branch = BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// The whole stack as one cloneable service; it never fails (errors become `Status` responses).
pub type Gateway = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// Concurrency bounds of the limited branches.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Concurrent cached lists/gets; more are shed with 429.
    pub cached_inflight: usize,
    /// Concurrent non-streaming passthrough requests; more are shed with 429.
    pub passthrough_inflight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // kube-apiserver's own defaults: 400 read-only requests in flight.
        Limits {
            cached_inflight: 400,
            passthrough_inflight: 400,
        }
    }
}

/// Builds the stack over the shared state.
pub fn gateway(shared: Arc<Shared>, limits: Limits) -> Gateway {
    let metrics = shared.watch.metrics.clone();
    let steer = Steer {
        watch: cached_branch(shared.clone()),
        cached: BoxCloneSyncService::new(
            ServiceBuilder::new()
                // Shed instead of queueing: a client gets 429 and retries, nobody waits behind a burst.
                .layer(LoadShedLayer::new())
                .layer(ConcurrencyLimitLayer::new(limits.cached_inflight))
                .service(cached_branch(shared.clone())),
        ),
        stream: passthrough_branch(shared.clone()),
        ops: shared.ops.clone(),
        passthrough: BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(LoadShedLayer::new())
                .layer(ConcurrencyLimitLayer::new(limits.passthrough_inflight))
                .service(passthrough_branch(shared)),
        ),
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
                    .on_response(DefaultOnResponse::new().level(Level::DEBUG)),
            )
            // rescue: whatever fails below becomes a Kubernetes Status with the right code.
            // (A `service_fn` around `oneshot`: readiness is awaited per request, so
            // a failure there is rescued too; `map_result` would not see it.)
            .layer_fn(rescuing)
            // classify: parse method, path and query once; the route travels in the extensions.
            .map_request(|mut req: Request<Body>| {
                let route = classify(req.method(), req.uri().path(), req.uri().query());
                req.extensions_mut().insert(Arc::new(route));
                req
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

/// The rescue layer's service: never fails.
fn rescuing<S>(
    inner: S,
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
       + Clone
       + Send
       + Sync
       + 'static
where
    S: Service<Request<Body>, Response = Response<Body>, Error = BoxError>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    tower::service_fn(move |req| {
        let inner = inner.clone();
        async move { rescue(inner.oneshot(req).await) }
    })
}

fn rescue(result: Result<Response<Body>, BoxError>) -> Result<Response<Body>, Infallible> {
    Ok(match result {
        Ok(resp) => resp,
        Err(err) if err.is::<tower::load_shed::error::Overloaded>() => response::status(
            &Status::too_many_requests("too many requests in flight, please try again later", 1),
        ),
        Err(err) => response::status(&Status::internal_error(format!("sitegrid-proxy: {err}"))),
    })
}

fn route_of(req: &Request<Body>) -> Arc<Route> {
    req.extensions()
        .get::<Arc<Route>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(classify(req.method(), req.uri().path(), req.uri().query())))
}

fn cached_branch(shared: Arc<Shared>) -> Branch {
    BoxCloneSyncService::new(tower::service_fn(move |req: Request<Body>| {
        let shared = shared.clone();
        async move {
            let route = route_of(&req);
            Ok::<_, BoxError>(match &*route {
                Route::Cached(cached) => {
                    serve::handle(
                        &shared.cache,
                        &shared.settings,
                        cached.clone(),
                        req.headers(),
                        shared.watch.clone(),
                    )
                    .await
                }
                Route::Invalid(status) => response::status(status),
                Route::Passthrough => response::status(&Status::not_found_resource()),
            })
        }
    }))
}

fn passthrough_branch(shared: Arc<Shared>) -> Branch {
    BoxCloneSyncService::new(tower::service_fn(move |req: Request<Body>| {
        let shared = shared.clone();
        async move {
            Ok::<_, BoxError>(match &shared.upstream {
                Some(upstream) => passthrough::forward(upstream, req, shared.max_body).await,
                None => response::status(&Status::not_found_resource()),
            })
        }
    }))
}

/// The metrics layer: times the request and records it by verb, resource and code.
async fn metered(
    inner: Steer,
    metrics: Arc<Metrics>,
    req: Request<Body>,
) -> Result<Response<Body>, BoxError> {
    let (verb, resource, streaming) = labels(&route_of(&req), req.uri());
    let started = tokio::time::Instant::now();
    let result = inner.oneshot(req).await;
    let code = match &result {
        Ok(resp) => resp.status().as_u16(),
        Err(err) if err.is::<tower::load_shed::error::Overloaded>() => 429,
        Err(_) => 500,
    };
    // A watch's "latency" is its lifetime: keep it out of the histogram.
    metrics.request(
        verb,
        &resource,
        code,
        (!streaming).then(|| started.elapsed()),
    );
    result
}

/// Verb and resource labels, and whether the request streams.
fn labels(route: &Route, uri: &http::Uri) -> (&'static str, String, bool) {
    match route {
        Route::Cached(c) => {
            let verb = match c.verb {
                Verb::List => "list",
                Verb::Watch => "watch",
                Verb::Get => "get",
            };
            (
                verb,
                c.served.kind.plural().to_owned(),
                c.verb == Verb::Watch,
            )
        }
        Route::Invalid(_) => ("invalid", String::new(), false),
        Route::Passthrough if is_operator_path(uri.path()) => ("ops", String::new(), false),
        Route::Passthrough => (
            "passthrough",
            resource_segment(uri.path()).to_owned(),
            is_stream(uri.query()),
        ),
    }
}

/// The resource a Kubernetes API path names (`/api/v1/namespaces/x/configmaps/y` → `configmaps`).
fn resource_segment(path: &str) -> &str {
    let mut segs = path.trim_start_matches('/').split('/');
    let rest: Vec<&str> = match segs.next() {
        Some("api") => segs.skip(1).collect(),
        Some("apis") => segs.skip(2).collect(),
        _ => return "",
    };
    match rest.as_slice() {
        ["namespaces", _, res, ..] => res,
        [res, ..] => res,
        [] => "",
    }
}

/// Paths the operator endpoints own (when served on this port).
fn is_operator_path(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics") || path.starts_with("/debug/")
}

/// Picks the branch for a classified request.
#[derive(Clone)]
struct Steer {
    watch: Branch,
    cached: Branch,
    stream: Branch,
    passthrough: Branch,
    ops: Option<Arc<Ops>>,
}

impl Service<Request<Body>> for Steer {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each branch is driven to readiness per request (`oneshot`), so that
        // one saturated branch never blocks the others.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        if let Some(ops) = self
            .ops
            .clone()
            .filter(|_| is_operator_path(req.uri().path()))
        {
            let fallback = self.passthrough.clone();
            return Box::pin(async move {
                let (method, uri) = (req.method().clone(), req.uri().clone());
                match ops.handle(&method, uri.path(), uri.query()).await {
                    Some(resp) => Ok(resp),
                    // e.g. /debug/* without --debug: the API server's own paths.
                    None => fallback.oneshot(req).await,
                }
            });
        }
        let branch = match &*route_of(&req) {
            Route::Cached(c) if c.verb == Verb::Watch => self.watch.clone(),
            Route::Cached(_) | Route::Invalid(_) => self.cached.clone(),
            Route::Passthrough if is_stream(req.uri().query()) => self.stream.clone(),
            Route::Passthrough => self.passthrough.clone(),
        };
        Box::pin(branch.oneshot(req))
    }
}

/// Long-lived passthrough requests (watches, log follows) are not limited.
fn is_stream(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| {
            (k == "watch" || k == "follow") && matches!(&*v, "1" | "true" | "True" | "TRUE" | "t")
        })
    })
}
