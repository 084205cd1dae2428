//! Operator endpoints: `/healthz`, `/readyz`, `/metrics`, and with `--debug`
//! `/debug/cache` and `/debug/pprof/{profile,heap}`.
//!
//! [`Ops::handle`] answers a path it owns and returns `None` for any other, so
//! the stack can try it before the cache handlers and passthrough.

pub mod debug;
pub mod metrics;
pub mod profile;
pub mod watchers;

use std::sync::Arc;

use http::{header, HeaderValue, Method, Response, StatusCode};
use sitegrid_apimachinery::Status;

pub use self::{
    metrics::{Metrics, WatchGuard},
    watchers::{WatcherHandle, WatcherInfo, WatcherRegistry, WatcherSnapshot},
};
use crate::{
    cache::Cache,
    resource::ResourceKind,
    serve::response::{full, json, status, typed, Body},
};

/// The state the operator endpoints read.
pub struct Ops {
    /// The cache whose sync state, sizes and versions are reported.
    pub cache: Arc<Cache>,
    /// The metrics served at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Whether `/debug/...` is served (`--debug`); otherwise those paths fall through.
    pub debug: bool,
    /// The open watches listed by `/debug/cache`.
    pub watchers: Arc<WatcherRegistry>,
}

/// An operator endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Healthz,
    Readyz,
    Metrics,
    DebugCache,
    CpuProfile,
    HeapProfile,
    /// Another path under `/debug/` while debug is on: ours, but nothing there.
    DebugUnknown,
}

impl Ops {
    /// `Some(response)` if `path` is an operator endpoint, else `None` (the
    /// caller routes it elsewhere). Only GET and HEAD are allowed (405 otherwise).
    pub async fn handle(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
    ) -> Option<Response<Body>> {
        let endpoint = self.endpoint(path)?;
        if method != Method::GET && method != Method::HEAD {
            return Some(status(&Status::method_not_allowed(format!(
                "{path} only answers GET, not {method}"
            ))));
        }
        Some(match endpoint {
            Endpoint::Healthz => text(StatusCode::OK, "ok"),
            Endpoint::Readyz => self.readyz(),
            Endpoint::Metrics => {
                let mut resp = text(StatusCode::OK, self.metrics.encode(&self.cache));
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(metrics::CONTENT_TYPE),
                );
                resp
            }
            Endpoint::DebugCache => self.debug_cache(),
            Endpoint::CpuProfile => profile::cpu(query).await,
            Endpoint::HeapProfile => profile::heap(),
            Endpoint::DebugUnknown => status(&Status::failure(
                404,
                Some("NotFound"),
                format!(
                    "{path} is not served; debug endpoints are /debug/cache, \
                     /debug/pprof/profile?seconds=N and /debug/pprof/heap"
                ),
            )),
        })
    }

    /// Which endpoint `path` is, if any.
    fn endpoint(&self, path: &str) -> Option<Endpoint> {
        let path = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        match path {
            "/healthz" => Some(Endpoint::Healthz),
            "/readyz" => Some(Endpoint::Readyz),
            "/metrics" => Some(Endpoint::Metrics),
            _ if !self.debug => None,
            "/debug/cache" => Some(Endpoint::DebugCache),
            "/debug/pprof/profile" => Some(Endpoint::CpuProfile),
            "/debug/pprof/heap" => Some(Endpoint::HeapProfile),
            p if p == "/debug" || p.starts_with("/debug/") => Some(Endpoint::DebugUnknown),
            _ => None,
        }
    }

    /// 200 once every resource has synced; 503 naming those that have not.
    fn readyz(&self) -> Response<Body> {
        let waiting: Vec<&str> = ResourceKind::ALL
            .into_iter()
            .filter(|k| !self.cache.store(*k).is_synced())
            .map(ResourceKind::plural)
            .collect();
        if waiting.is_empty() {
            text(StatusCode::OK, "ok")
        } else {
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "not ready: waiting for the first sync of {}\n",
                    waiting.join(", ")
                ),
            )
        }
    }

    /// The `/debug/cache` JSON.
    fn debug_cache(&self) -> Response<Body> {
        let summary = debug::cache_summary(&self.cache, &self.watchers.snapshot());
        match serde_json::to_vec_pretty(&summary) {
            Ok(mut body) => {
                body.push(b'\n');
                json(StatusCode::OK, body)
            }
            Err(e) => status(&Status::internal_error(format!(
                "encoding the cache summary: {e}"
            ))),
        }
    }
}

/// A plain-text response, not cached by anyone in between.
fn text(code: StatusCode, body: impl Into<bytes::Bytes>) -> Response<Body> {
    let mut resp = typed(code, "text/plain; charset=utf-8", full(body));
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}
