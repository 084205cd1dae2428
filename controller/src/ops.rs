//! `/healthz`, `/readyz` and `/metrics` on the `--bind-address` port.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::TcpListener;

use crate::metrics::{Metrics, CONTENT_TYPE};

type Refresh = Box<dyn Fn() + Send + Sync>;

/// What the operator endpoints report.
pub struct OpsState {
    /// The metrics.
    pub metrics: Arc<Metrics>,
    ready: AtomicBool,
    why_not_ready: Mutex<String>,
    refresh: Mutex<Option<Refresh>>,
}

impl OpsState {
    /// Not ready yet, for `reason`.
    pub fn new(metrics: Arc<Metrics>, reason: &str) -> Arc<Self> {
        Arc::new(Self {
            metrics,
            ready: AtomicBool::new(false),
            why_not_ready: Mutex::new(reason.to_owned()),
            refresh: Mutex::new(None),
        })
    }

    /// `/readyz` answers 200 from now on.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// `/readyz` answers 503 with `reason`.
    pub fn set_not_ready(&self, reason: &str) {
        *self.why_not_ready.lock() = reason.to_owned();
        self.ready.store(false, Ordering::Release);
    }

    /// Called before each `/metrics` scrape to update the gauges.
    pub fn set_refresh(&self, refresh: impl Fn() + Send + Sync + 'static) {
        *self.refresh.lock() = Some(Box::new(refresh));
    }

    fn respond(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let text = |status: StatusCode, body: String| {
            let mut resp = Response::new(Full::new(Bytes::from(body)));
            *resp.status_mut() = status;
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            resp
        };
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
        }
        match req.uri().path() {
            "/healthz" | "/livez" => text(StatusCode::OK, "ok\n".into()),
            "/readyz" if self.ready.load(Ordering::Acquire) => text(StatusCode::OK, "ok\n".into()),
            "/readyz" => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {}\n", self.why_not_ready.lock()),
            ),
            "/metrics" => {
                if let Some(refresh) = &*self.refresh.lock() {
                    refresh();
                }
                let mut resp = text(StatusCode::OK, self.metrics.encode());
                resp.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(CONTENT_TYPE),
                );
                resp
            }
            _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
        }
    }
}

/// Serves the operator endpoints on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    state: Arc<OpsState>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    tracing::warn!(%err, "accepting an operator connection");
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let resp = state.respond(&req);
                async move { Ok::<_, Infallible>(resp) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(err) = conn.await {
                tracing::debug!(%err, "operator connection");
            }
        });
    }
}
