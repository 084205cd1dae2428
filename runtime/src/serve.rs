//! Serving a port: HTTP/1.1 and HTTP/2 on one listener (h2c with prior
//! knowledge on plain TCP, ALPN under TLS), one task per connection, and a
//! graceful end: when the shutdown token is cancelled no new connection is
//! accepted and open ones get `grace` to finish.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Any error a service or a body may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How connections are spoken to.
#[derive(Clone, Default)]
pub enum Transport {
    /// Plain TCP.
    #[default]
    Plain,
    /// TLS with the acceptor this returns when a connection arrives (so a
    /// reloaded certificate applies to new connections at once).
    Tls(Arc<dyn Fn() -> tokio_rustls::TlsAcceptor + Send + Sync>),
}

/// The certificate a TLS client presented and the acceptor verified (leaf
/// first), in the extensions of each request on that connection.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Arc<Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>>);

/// Binds a listener, with the address in the error.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
}

/// Accepts connections until `shutdown` is cancelled, then lets open
/// requests finish for up to `grace`.
pub async fn serve<S, B, F>(
    listener: TcpListener,
    service: S,
    transport: Transport,
    shutdown: CancellationToken,
    grace: Duration,
) where
    S: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<B>, std::convert::Infallible>> + Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    warn!(error = %err, "accept failed");
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Small frames (watch events) go out at once.
        if let Err(err) = stream.set_nodelay(true) {
            debug!(%peer, error = %err, "TCP_NODELAY");
        }
        let service = service.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let transport = transport.clone();
        tokio::spawn(async move {
            let served = match transport {
                Transport::Plain => {
                    let svc = hyper::service::service_fn(service);
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    watcher.watch(conn.into_owned()).await
                }
                Transport::Tls(acceptor) => match acceptor().accept(stream).await {
                    Ok(tls) => {
                        let peer = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .filter(|certs| !certs.is_empty())
                            .map(|certs| PeerCertificates(Arc::new(certs.to_vec())));
                        let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                            if let Some(peer) = &peer {
                                req.extensions_mut().insert(peer.clone());
                            }
                            service(req)
                        });
                        let conn = builder.serve_connection(TokioIo::new(tls), svc);
                        watcher.watch(conn.into_owned()).await
                    }
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
    info!(address = ?listener.local_addr().ok(), "no new connections");
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("grace period over; closing remaining connections");
    }
}
