//! The listener: HTTP/1.1 and h2c on one port (hyper-util's auto builder),
//! one task per connection, all of them ended when the handle goes; and the
//! layers every request goes through ([`stack`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use super::{egress, faults, Body, ClientUser, Shared};

/// A running server. Dropping it stops the server the same way as
/// [`ServerHandle::shutdown`], without waiting.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ServerHandle {
    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop accepting and close every open connection (watches included), so
    /// clients see the upstream gone; returns once all of them are closed.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            // Err only if the accept loop already ended, which is the goal.
            let _already_stopped = stop.send(()).is_err();
        }
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                tracing::debug!(error = %e, "apiserver accept loop ended abnormally");
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every
        // connection task and so closes their sockets.
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Bind and spawn the accept loop; with `tls`, every connection is TLS.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    addr: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> std::io::Result<ServerHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            tokio::select! {
                // A send or a dropped sender both mean stop.
                _ = &mut stopped => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        conns.spawn(serve_connection(Arc::clone(&shared), stream, tls.clone()));
                    }
                    Err(e) => {
                        // E.g. out of file descriptors: back off instead of spinning.
                        tracing::warn!(error = %e, "apiserver accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
        drop(listener);
        conns.shutdown().await;
    });
    Ok(ServerHandle {
        addr,
        stop: Some(stop),
        task: Some(task),
    })
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "set_nodelay failed");
    }
    let builder = auto::Builder::new(TokioExecutor::new());
    let served = match tls {
        None => {
            let service = service_fn(move |req| stack(Arc::clone(&shared), req));
            builder
                .serve_connection(TokioIo::new(stream), service)
                .await
        }
        Some(acceptor) => {
            let stream = match acceptor.accept(stream).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    return;
                }
            };
            let user = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|leaf| client_user(leaf));
            let service = service_fn(move |mut req: Request<hyper::body::Incoming>| {
                if let Some(u) = &user {
                    req.extensions_mut().insert(u.clone());
                }
                stack(Arc::clone(&shared), req)
            });
            builder
                .serve_connection(TokioIo::new(stream), service)
                .await
        }
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "apiserver connection ended with an error");
    }
}

/// The CN of a DER certificate.
fn client_user(der: &[u8]) -> Option<ClientUser> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .find_map(|a| a.as_str().ok())?;
    Some(ClientUser(cn.to_owned()))
}

/// Serve one request through the server's layers, outermost first.
async fn stack<B>(shared: Arc<Shared>, req: Request<B>) -> Result<Response<Body>, Infallible>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let meter = Arc::clone(&shared.egress);
    // Faults around the real handler (which routes, answers and tags each
    // read for egress): a test's broken server rewrites or replaces answers.
    let resp = faults::handle(shared, req).await?;
    // Egress outermost, so that what is counted is what is written.
    Ok(egress::layer(&meter, resp))
}
