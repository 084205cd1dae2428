//! Serving a port: HTTP/1.1 and HTTP/2 on one listener (h2c with prior
//! knowledge on plain TCP, ALPN under TLS), one task per connection, and a
//! graceful end: when the shutdown token is cancelled no new connection is
//! accepted and open ones get `grace` to finish.
//!
//! Every connection is bounded against slow and abusive clients
//! ([`ConnLimits`]): a request head must arrive within a time and a size
//! (slowloris, oversized headers and URLs: the connection is closed, or 431;
//! a client that connects and sends nothing is closed after the same time),
//! a TLS handshake within a time, HTTP/2 streams per connection are capped
//! and streams reset before they are served end the connection (rapid
//! reset), silent HTTP/2 peers are pinged and dropped; when accepting fails
//! (no file descriptors left) the loop backs off instead of spinning.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Bounds on what one connection may hold or take, against slow and abusive
/// clients. The defaults follow kube-apiserver's (Go's `http.Server` as
/// kube-apiserver sets it up) where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Time a client gets to send a request's head (request line and
    /// headers). An HTTP/1.1 connection idle that long between requests is
    /// closed too (hyper runs one timer for both). kube-apiserver: 32 s.
    pub header_read_timeout: Duration,
    /// Time a client gets to finish a TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Largest request head: HTTP/1.1 request line and headers (larger: 431
    /// and the connection closes), HTTP/2 header list (larger: the stream is
    /// refused). kube-apiserver allows 1 MiB; 256 KiB still carries any
    /// selector a client writes and bounds what a connection holds.
    pub max_header_bytes: usize,
    /// Concurrent streams on one HTTP/2 connection (kube-apiserver: 250 unless
    /// `--http2-max-streams-per-connection`).
    pub h2_max_concurrent_streams: u32,
    /// Streams a peer may reset before the server accepted them, before the
    /// connection is ended with GOAWAY (HTTP/2 rapid reset, CVE-2023-44487).
    pub h2_max_pending_accept_reset_streams: usize,
    /// Interval of HTTP/2 PINGs on a connection (a peer that does not answer
    /// within the same time is dropped: a vanished edge client's watches end).
    pub h2_keep_alive_interval: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_read_timeout: Duration::from_secs(32),
            tls_handshake_timeout: Duration::from_secs(10),
            max_header_bytes: 256 * 1024,
            h2_max_concurrent_streams: 250,
            h2_max_pending_accept_reset_streams: 20,
            h2_keep_alive_interval: Duration::from_secs(30),
        }
    }
}

impl ConnLimits {
    /// The connection builder these limits configure.
    fn builder(&self) -> auto::Builder<TokioExecutor> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            // hyper's floor for its read buffer is 8 KiB.
            .max_buf_size(self.max_header_bytes.max(8192));
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(self.max_header_bytes).unwrap_or(u32::MAX))
            .max_concurrent_streams(self.h2_max_concurrent_streams)
            .max_pending_accept_reset_streams(self.h2_max_pending_accept_reset_streams)
            .keep_alive_interval(self.h2_keep_alive_interval)
            .keep_alive_timeout(self.h2_keep_alive_interval);
        builder
    }
}

/// A connection whose first byte must arrive within a time. hyper's header
/// read timer starts only once hyper-util has seen enough bytes to tell
/// HTTP/1.1 from HTTP/2, so a client that connects and stays silent would
/// otherwise hold its connection forever.
struct FirstByteWithin<IO> {
    io: IO,
    /// `None` once a byte arrived.
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<IO> FirstByteWithin<IO> {
    fn new(io: IO, within: Duration) -> Self {
        FirstByteWithin {
            io,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
        }
    }
}

impl<IO: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for FirstByteWithin<IO> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.deadline = None;
                }
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no request arrived in time",
                ))),
                _ => Poll::Pending,
            },
        }
    }
}

impl<IO: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for FirstByteWithin<IO> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Go's `net/http` backoff after a failed accept: 5 ms, doubling, at most 1 s.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

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

/// Binds a listener, with the address in the error. Its accept queue is as
/// long as the kernel allows (`net.core.somaxconn`), as Go's listeners are
/// (kube-apiserver's): a burst of connections (every kube-proxy of a site
/// reconnecting after an outage, or a flood) waits there instead of being
/// dropped by the kernel before the proxy could see it.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listen = || -> std::io::Result<TcpListener> {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(listen_backlog())
    };
    listen().map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
}

/// `net.core.somaxconn` (the kernel caps a listen backlog there), else 4096.
fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &u32| n > 0)
        .unwrap_or(4096)
}

/// Accepts connections until `shutdown` is cancelled, then lets open
/// requests finish for up to `grace`; each connection within `limits`.
pub async fn serve<S, B, F>(
    listener: TcpListener,
    service: S,
    transport: Transport,
    limits: ConnLimits,
    shutdown: CancellationToken,
    grace: Duration,
) where
    S: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<B>, std::convert::Infallible>> + Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let builder = limits.builder();
    let graceful = GracefulShutdown::new();
    let mut backoff: Option<Duration> = None;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    // Out of file descriptors (EMFILE/ENFILE) or memory: accept
                    // fails at once again until a connection closes, so wait
                    // (as Go's net/http does) instead of spinning on a core,
                    // and say it once per run of failures.
                    let wait = backoff.map_or(ACCEPT_BACKOFF_FIRST, |b| (b * 2).min(ACCEPT_BACKOFF_MAX));
                    if backoff.is_none() {
                        warn!(error = %err, "accept failed; retrying with backoff until a connection is accepted again");
                    }
                    backoff = Some(wait);
                    tokio::select! {
                        () = tokio::time::sleep(wait) => continue,
                        () = shutdown.cancelled() => break,
                    }
                }
            },
            () = shutdown.cancelled() => break,
        };
        if backoff.take().is_some() {
            info!("accepting connections again");
        }
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
                    let io = FirstByteWithin::new(stream, limits.header_read_timeout);
                    let conn = builder.serve_connection(TokioIo::new(io), svc);
                    watcher.watch(conn.into_owned()).await
                }
                Transport::Tls(acceptor) => match tokio::time::timeout(
                    limits.tls_handshake_timeout,
                    acceptor().accept(stream),
                )
                .await
                {
                    Err(_) => {
                        debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                    Ok(Ok(tls)) => {
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
                        let io = FirstByteWithin::new(tls, limits.header_read_timeout);
                        let conn = builder.serve_connection(TokioIo::new(io), svc);
                        watcher.watch(conn.into_owned()).await
                    }
                    Ok(Err(err)) => {
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
