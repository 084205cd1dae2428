//! The listener: HTTP/1.1 and HTTP/2 (h2c prior knowledge on plain TCP) on
//! one port, with graceful shutdown.

use std::{convert::Infallible, future::Future, net::SocketAddr, sync::Arc, time::Duration};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::{
    cache::Cache,
    passthrough,
    serve::{
        self,
        response::Body,
        route::{classify, Route},
        ServeSettings,
    },
};

/// Everything a request needs: the cache, the settings, the upstream client.
pub struct App {
    /// The served state.
    pub cache: Arc<Cache>,
    /// Handler settings.
    pub settings: ServeSettings,
    /// The pooled upstream client for passthrough (None: 404 for everything not cached).
    pub upstream: Option<kube::Client>,
    /// The largest request body passthrough accepts.
    pub max_body: usize,
}

impl App {
    /// Routes one request.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = bytes::Bytes>,
        B::Error: Into<serve::response::BoxError>,
    {
        let route = classify(req.method(), req.uri().path(), req.uri().query());
        debug!(method = %req.method(), uri = %req.uri(), "request");
        match route {
            Route::Cached(cached) => {
                serve::handle(&self.cache, &self.settings, cached, req.headers()).await
            }
            Route::Invalid(status) => serve::response::status(&status),
            Route::Passthrough => match &self.upstream {
                Some(client) => passthrough::forward(client, req, self.max_body).await,
                None => serve::response::status(&apimachinery::Status::not_found_resource()),
            },
        }
    }
}

/// Accepts connections until `shutdown` resolves, then lets open requests
/// finish for up to `grace`.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(err) => {
                        warn!(error = %err, "accept failed");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let app = app.clone();
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let app = app.clone();
                    async move { Ok::<_, Infallible>(app.handle(req).await) }
                });
                let conn = builder.serve_connection(TokioIo::new(stream), svc).into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(err) = conn.await {
                        debug!(%peer, error = %err, "connection ended with an error");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    info!("shutting down: no new connections");
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("grace period over; closing remaining connections");
    }
}

/// Binds a listener, with the address in the error.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
}
