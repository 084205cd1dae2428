//! Operator endpoints, all read-only: `/healthz`, `/livez`, `/readyz` and
//! `/metrics` (the shared operator server's), and with `--debug`
//! `/debug/cache` and `/debug/pprof/{profile,heap}`.

pub mod debug;
pub mod profile;

use http::{Method, Request, Response, StatusCode};
use sitegrid_apimachinery::Status;
use sitegrid_runtime::ops::{self as runtime_ops, Operator};

use crate::http::{
    response::{boxed, json, status},
    Body,
};
use sitegrid_cache::Cache;

/// An operator endpoint of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz`, `/livez`, `/readyz`, `/metrics`.
    Operator(runtime_ops::Endpoint),
    /// `/debug/cache`.
    DebugCache,
    /// `/debug/pprof/profile?seconds=N`.
    CpuProfile,
    /// `/debug/pprof/heap`.
    HeapProfile,
    /// Another path under `/debug/` while debug is on: ours, but nothing there.
    DebugUnknown,
}

impl Endpoint {
    /// The endpoint `path` names, if any; `/debug/*` only with `debug`
    /// (otherwise those are the API server's own paths).
    pub fn of(path: &str, debug: bool) -> Option<Endpoint> {
        if let Some(e) = runtime_ops::Endpoint::of(path) {
            return Some(Endpoint::Operator(e));
        }
        if !debug {
            return None;
        }
        let path = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        match path {
            "/debug/cache" => Some(Endpoint::DebugCache),
            "/debug/pprof/profile" => Some(Endpoint::CpuProfile),
            "/debug/pprof/heap" => Some(Endpoint::HeapProfile),
            p if p == "/debug" || p.starts_with("/debug/") => Some(Endpoint::DebugUnknown),
            _ => None,
        }
    }
}

/// What the operator endpoints read.
#[derive(Clone)]
pub struct Ops {
    /// Readiness and metrics.
    pub operator: Operator,
    /// The cache `/debug/cache` describes.
    pub cache: Cache,
    /// Whether `/debug/*` is served.
    pub debug: bool,
}

impl Ops {
    /// The answer of `endpoint` to `method` (with the query, for profiles).
    pub async fn answer(
        &self,
        method: &Method,
        endpoint: Endpoint,
        query: Option<&str>,
    ) -> Response<Body> {
        if let Endpoint::Operator(e) = endpoint {
            return boxed(self.operator.answer(method, e));
        }
        if method != Method::GET && method != Method::HEAD {
            return status(&Status::method_not_allowed(format!(
                "the debug endpoints only answer GET and HEAD, not {method}"
            )));
        }
        match endpoint {
            Endpoint::DebugCache => debug_cache(&self.cache),
            Endpoint::CpuProfile => profile::cpu(query).await,
            Endpoint::HeapProfile => profile::heap(),
            _ => status(&Status::failure(
                404,
                Some("NotFound"),
                "no such debug endpoint; they are /debug/cache, \
                 /debug/pprof/profile?seconds=N and /debug/pprof/heap",
            )),
        }
    }

    /// The answer on a port of their own (`--metrics-bind-address`): 404 for other paths.
    pub async fn respond<B>(&self, req: Request<B>) -> Response<Body> {
        match Endpoint::of(req.uri().path(), self.debug) {
            Some(endpoint) => self.answer(req.method(), endpoint, req.uri().query()).await,
            None => boxed(self.operator.respond(&req)),
        }
    }
}

/// The `/debug/cache` JSON.
fn debug_cache(cache: &Cache) -> Response<Body> {
    match serde_json::to_vec_pretty(&debug::cache_summary(cache)) {
        Ok(mut body) => {
            body.push(b'\n');
            json(StatusCode::OK, body)
        }
        Err(e) => status(&Status::internal_error(format!(
            "encoding the cache summary: {e}"
        ))),
    }
}
