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
    ops::{Metrics, Ops, WatcherRegistry},
    serve::{response::Body, ServeSettings, WatchContext},
    stack::{boxed_request, Gateway},
    tls::ReloadingTls,
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
    /// What watches listen for (shutdown) and report to (metrics, `/debug/cache`).
    pub watch: WatchContext,
    /// The operator endpoints, when served on this port.
    pub ops: Option<Arc<Ops>>,
}

impl Shared {
    /// State for tests and embedding: no upstream, no operator endpoints,
    /// nobody ever closing.
    pub fn detached(cache: Arc<Cache>, settings: ServeSettings, max_body: usize) -> Shared {
        let (closing_tx, closing) = watch::channel(false);
        // Leaked on purpose: a detached stack is never shut down.
        std::mem::forget(closing_tx);
        Shared {
            cache,
            settings,
            upstream: None,
            max_body,
            watch: WatchContext {
                closing,
                metrics: Arc::new(Metrics::new()),
                watchers: WatcherRegistry::new(),
            },
            ops: None,
        }
    }
}

/// Accepts connections until `shutdown` resolves, then lets open requests
/// finish for up to `grace`.
pub async fn serve(
    listener: TcpListener,
    gateway: Gateway,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    tls: Option<Arc<ReloadingTls>>,
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
                let builder = builder.clone();
                let watcher = graceful.watcher();
                // The certificate in force when the connection arrives (it is reloaded on change).
                let acceptor = tls.as_ref().map(|t| t.acceptor());
                tokio::spawn(async move {
                    let served = match acceptor {
                        None => watcher.watch(builder.serve_connection(TokioIo::new(stream), svc).into_owned()).await,
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(tls) => watcher.watch(builder.serve_connection(TokioIo::new(tls), svc).into_owned()).await,
                            Err(err) => {
                                debug!(%peer, error = %err, "TLS handshake failed");
                                return;
                            }
                        },
                    };
                    if let Err(err) = served {
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

/// Serves only the operator endpoints (`--metrics-bind-address`); runs until aborted.
pub async fn serve_ops(listener: TcpListener, ops: Arc<Ops>) {
    let svc = tower::service_fn(move |req: Request<Body>| {
        let ops = ops.clone();
        async move {
            let found = ops
                .handle(req.method(), req.uri().path(), req.uri().query())
                .await;
            Ok::<_, std::convert::Infallible>(found.unwrap_or_else(|| {
                crate::serve::response::status(&sitegrid_apimachinery::Status::not_found_resource())
            }))
        }
    });
    let gateway: Gateway = tower::util::BoxCloneSyncService::new(svc);
    serve(
        listener,
        gateway,
        std::future::pending(),
        Duration::ZERO,
        None,
    )
    .await;
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
