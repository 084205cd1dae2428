//! The operator endpoints every sitegrid binary serves the same way:
//!
//! | path               | answer                                                   |
//! |--------------------|----------------------------------------------------------|
//! | `/healthz`, `/livez` | `200 ok` while the process serves at all               |
//! | `/readyz`          | `200 ok`, `200 ok, degraded: <why>`, or `503 not ready: <reason>` |
//! | `/metrics`         | the binary's registry and the process metrics, OpenMetrics text |
//!
//! Only GET and HEAD are allowed (`405` with a Kubernetes `Status` otherwise);
//! on a port of their own, any other path is a `404` `Status`. A binary
//! with more read-only endpoints (the proxy's `/debug/*`) routes those itself.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use prometheus_client::registry::Registry;
use sitegrid_apimachinery::Status;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::process::ProcessCollector;
use crate::response::{status, text};

/// The content type of the `/metrics` exposition, as prometheus-client documents it.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// One of the operator endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` and `/livez`: the process is alive.
    Live,
    /// `/readyz`: the process can do its job.
    Ready,
    /// `/metrics`.
    Metrics,
}

impl Endpoint {
    /// The endpoint `path` names (a trailing `/` is allowed), if any.
    pub fn of(path: &str) -> Option<Endpoint> {
        let path = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        match path {
            "/healthz" | "/livez" => Some(Endpoint::Live),
            "/readyz" => Some(Endpoint::Ready),
            "/metrics" => Some(Endpoint::Metrics),
            _ => None,
        }
    }
}

/// Why a process is not ready; `Ok` when it is.
/// `Ok(None)`: ready; `Ok(Some(why))`: ready but degraded; `Err(reason)`: not ready.
pub type ReadyCheck = Arc<dyn Fn() -> Result<Option<String>, String> + Send + Sync>;

/// What the operator endpoints report: readiness and the metrics registry.
#[derive(Clone)]
pub struct Operator {
    registry: Arc<Registry>,
    /// The process metrics, in a registry of their own: the binary's
    /// registry has the binary's prefix, and these keep their standard names.
    process: Arc<Registry>,
    ready: ReadyCheck,
}

impl Operator {
    /// Endpoints over a finished registry and a readiness check; `/metrics`
    /// adds the standard process metrics (`process_resident_memory_bytes`, ...).
    pub fn new(registry: Registry, ready: ReadyCheck) -> Operator {
        Operator {
            registry: Arc::new(registry),
            process: Arc::new(ProcessCollector::registry()),
            ready,
        }
    }

    /// The answer of `endpoint` to a request with `method`.
    pub fn answer(&self, method: &Method, endpoint: Endpoint) -> Response<Full<Bytes>> {
        if method != Method::GET && method != Method::HEAD {
            return status(&Status::method_not_allowed(format!(
                "the operator endpoints only answer GET and HEAD, not {method}"
            )));
        }
        match endpoint {
            Endpoint::Live => text(StatusCode::OK, "ok"),
            Endpoint::Ready => match (self.ready)() {
                Ok(None) => text(StatusCode::OK, "ok"),
                Ok(Some(why)) => text(StatusCode::OK, format!("ok, degraded: {why}\n")),
                Err(reason) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {reason}\n"),
                ),
            },
            Endpoint::Metrics => {
                let mut resp = text(StatusCode::OK, self.metrics_text());
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(METRICS_CONTENT_TYPE),
                );
                resp
            }
        }
    }

    /// The answer on a port of their own: the endpoints, 404 for anything else.
    pub fn respond<B>(&self, req: &Request<B>) -> Response<Full<Bytes>> {
        match Endpoint::of(req.uri().path()) {
            Some(endpoint) => self.answer(req.method(), endpoint),
            None => status(&Status::failure(
                404,
                Some("NotFound"),
                format!(
                    "{} is not served here; try /healthz, /livez, /readyz or /metrics",
                    req.uri().path()
                ),
            )),
        }
    }

    /// Serves the endpoints alone on `listener` (plain HTTP, a task of its
    /// own) until `shutdown`; what the controller and dnsd run on their
    /// `--bind-address`.
    pub fn spawn(self, listener: TcpListener, shutdown: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(crate::serve::serve(
            listener,
            move |req| std::future::ready(Ok(self.respond(&req))),
            crate::serve::Transport::Plain,
            crate::serve::ConnLimits::default(),
            shutdown,
            Duration::ZERO,
        ))
    }

    /// The registry and the process metrics in the OpenMetrics text format.
    pub fn metrics_text(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail; an error would come from a
        // collector, and a partial scrape is still worth serving.
        let encoded = encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &self.process))
            .and_then(|()| encode_eof(&mut out));
        if let Err(e) = encoded {
            tracing::error!(error = %e, "encoding metrics");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use prometheus_client::metrics::counter::Counter;

    fn operator(ready: Result<Option<String>, String>) -> Operator {
        let mut registry = Registry::with_prefix("demo");
        let c = Counter::<u64>::default();
        c.inc();
        registry.register("things", "Things done", c);
        Operator::new(registry, Arc::new(move || ready.clone()))
    }

    async fn call(op: &Operator, method: Method, path: &str) -> (u16, String, String) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        let resp = op.respond(&req);
        let ct = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let code = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (code, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn health_readiness_and_metrics() {
        let op = operator(Err("waiting for the node cache".into()));
        for path in ["/healthz", "/livez", "/healthz/"] {
            assert_eq!(call(&op, Method::GET, path).await.0, 200, "{path}");
        }
        let (code, _, body) = call(&op, Method::GET, "/readyz").await;
        assert_eq!(
            (code, body.as_str()),
            (503, "not ready: waiting for the node cache\n")
        );
        assert_eq!(
            call(&operator(Ok(None)), Method::GET, "/readyz").await.0,
            200
        );
        let (code, _, body) = call(
            &operator(Ok(Some("serving a snapshot".into()))),
            Method::GET,
            "/readyz",
        )
        .await;
        assert_eq!(
            (code, body.as_str()),
            (200, "ok, degraded: serving a snapshot\n")
        );
        let (code, ct, body) = call(&op, Method::GET, "/metrics").await;
        assert_eq!((code, ct.as_str()), (200, METRICS_CONTENT_TYPE));
        assert!(body.contains("demo_things_total 1"), "{body}");
        // The process metrics keep their standard names, without the prefix,
        // and the exposition ends once, after them.
        assert!(body.contains("\nprocess_resident_memory_bytes "), "{body}");
        assert!(!body.contains("demo_process_"), "{body}");
        assert!(body.ends_with("# EOF\n") && body.matches("# EOF").count() == 1);
    }

    #[tokio::test]
    async fn other_methods_and_paths_are_statuses() {
        let op = operator(Ok(None));
        let (code, ct, body) = call(&op, Method::POST, "/healthz").await;
        assert_eq!((code, ct.as_str()), (405, "application/json"));
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "MethodNotAllowed");
        let (code, _, body) = call(&op, Method::GET, "/nope").await;
        assert_eq!(code, 404);
        assert!(body.contains("/nope is not served here"), "{body}");
        assert_eq!(call(&op, Method::HEAD, "/livez").await.0, 200);
    }
}
