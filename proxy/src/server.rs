//! The listener: HTTP/1.1 and HTTP/2 (h2c prior knowledge on plain TCP) on
//! one port, with graceful shutdown.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use http::Request;
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{net::TcpListener, sync::watch};
use tower::{util::Oneshot, ServiceExt};
use tracing::{debug, info, warn};

use crate::{
    cache::Cache,
    serve::{response::Body, ServeSettings},
    stack::{boxed_request, Gateway},
    upstream::Upstream,
};

/// What every request may need: the cache, the settings, the upstream client.
pub struct Shared {
    /// The served state.
    pub cache: Arc<Cache>,
    /// Handler settings.
    pub settings: ServeSettings,
    /// The pooled upstream client for passthrough (None: 404 for everything not cached).
    pub upstream: Option<Upstream>,
    /// The largest request body passthrough accepts.
    pub max_body: usize,
    /// Turns true when the proxy shuts down: open watches end cleanly so clients reconnect.
    pub closing: watch::Receiver<bool>,
}

/// Accepts connections until `shutdown` resolves, then lets open requests
/// finish for up to `grace`.
pub async fn serve(
    listener: TcpListener,
    gateway: Gateway,
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
                let gateway = gateway.clone();
                let svc = hyper::service::service_fn(move |req| dispatch(&gateway, req));
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

/// Hands one request to the stack.
fn dispatch(gateway: &Gateway, req: Request<Incoming>) -> Oneshot<Gateway, Request<Body>> {
    gateway.clone().oneshot(boxed_request(req))
}

/// Binds a listener, with the address in the error.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
}
