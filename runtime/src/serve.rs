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
//! reset), silent HTTP/2 peers are pinged and dropped, HTTP/2 connections
//! without a stream are closed as idle HTTP/1.1 ones are; when accepting fails
//! (no file descriptors left) the loop backs off instead of spinning.

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use http::{Request, Response};
use hyper::{
    body::Incoming,
    server::conn::{http1, http2},
};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::graceful::{GracefulShutdown, Watcher},
};
use rustix::net::RecvFlags;
use tokio::{
    io::Interest,
    net::{TcpListener, TcpStream},
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::reap::reap;

/// Bounds on what one connection may hold or take, against slow and abusive
/// clients. The defaults follow kube-apiserver's (Go's `http.Server` as
/// kube-apiserver sets it up) where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Time a client gets to send a request's head (request line and
    /// headers). An HTTP/1.1 connection idle that long between requests is
    /// closed too (hyper runs one timer for both), and so is an HTTP/2
    /// connection without an open stream for that long (GOAWAY: the client
    /// opens a new one when it has a request; PINGs alone keep nothing
    /// open). kube-apiserver: 32 s.
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

/// The connection builders of one listener, configured by its [`ConnLimits`].
///
/// The protocol is told before hyper sees the connection: a plain TCP client
/// by its first bytes, peeked at ([`speaks_h2`]); a TLS client by ALPN, as
/// Go's server (kube-apiserver's) tells it: HTTP/2 when it negotiated `h2`,
/// else HTTP/1.1.
///
/// hyper-util's automatic choice did it by reading the first 24 bytes and
/// giving them to HTTP/1.1 as a first read of their own; hyper then asked
/// for 8 KiB of room behind them and its 8 KiB read buffer doubled, so every
/// HTTP/1.1 connection (one per watch, for clients without HTTP/2) held
/// 16 KiB for reading, and the size of a request head was checked only
/// where that buffer happened to fill (a 300 KiB head could get through).
/// Here hyper's own head limit applies (`max_header_size`: 431 beyond it).
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
    /// An HTTP/2 connection without a stream this long is closed.
    h2_idle: Duration,
}

impl Builders {
    fn new(limits: &ConnLimits) -> Self {
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_header_size(limits.max_header_bytes)
            // hyper's floor for its read buffer is 8 KiB.
            .max_buf_size(limits.max_header_bytes.max(8192));
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .max_concurrent_streams(limits.h2_max_concurrent_streams)
            .max_pending_accept_reset_streams(limits.h2_max_pending_accept_reset_streams)
            .keep_alive_interval(limits.h2_keep_alive_interval)
            .keep_alive_timeout(limits.h2_keep_alive_interval);
        Builders {
            http1,
            http2,
            h2_idle: limits.header_read_timeout,
        }
    }

    /// Serves `io` in HTTP/2 (`h2`) or HTTP/1.1 until it ends, or until the
    /// shutdown `watcher` belongs to (signalled by `shutdown`) has let it
    /// finish.
    async fn serve<I, S, B>(
        &self,
        h2: bool,
        io: I,
        service: S,
        watcher: Watcher,
        shutdown: &CancellationToken,
    ) -> Result<(), hyper::Error>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        if h2 {
            // hyper has no idle rule for HTTP/2: streams are counted here,
            // and the connection is ended like the watcher would end it
            // (GOAWAY, open streams finish) when it has had none for
            // `h2_idle`, or at shutdown. Holding the watcher keeps the
            // server's shutdown waiting for this connection.
            let _watcher = watcher;
            let (streams, mut open) = tokio::sync::watch::channel(0usize);
            let streams = Arc::new(streams);
            let conn = self.http2.serve_connection(
                io,
                CountStreams {
                    inner: service,
                    streams,
                },
            );
            // Boxed to be handed to the reaper once it ended (see `reap`).
            let mut conn = Box::pin(conn);
            let mut closing = false;
            let served = loop {
                tokio::select! {
                    served = conn.as_mut() => break served,
                    () = shutdown.cancelled(), if !closing => {
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    () = idle_for(&mut open, self.h2_idle), if !closing => {
                        debug!(idle = ?self.h2_idle, "closing an HTTP/2 connection without streams");
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                }
            };
            reap(conn);
            served
        } else {
            // hyper's connection keeps its socket, buffers and response
            // body after it ended, until dropped: by the reaper.
            let mut conn = Box::pin(watcher.watch(self.http1.serve_connection(io, service)));
            let served = conn.as_mut().await;
            reap(conn);
            served
        }
    }
}

/// Resolves once `open` (a connection's open streams) has stayed at zero
/// for `idle`.
async fn idle_for(open: &mut tokio::sync::watch::Receiver<usize>, idle: Duration) {
    loop {
        if open.wait_for(|n| *n == 0).await.is_err() {
            // The connection's service is gone: the connection is ending.
            return std::future::pending().await;
        }
        tokio::select! {
            () = tokio::time::sleep(idle) => {
                if *open.borrow() == 0 {
                    return;
                }
            }
            changed = open.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
            }
        }
    }
}

/// A service that counts its open streams: from the request until its
/// response body is done (or dropped: a reset stream, a client gone).
#[derive(Clone)]
struct CountStreams<S> {
    inner: S,
    streams: Arc<tokio::sync::watch::Sender<usize>>,
}

/// One open stream; dropped when its response body is.
struct StreamOpen(Arc<tokio::sync::watch::Sender<usize>>);

impl StreamOpen {
    fn new(streams: &Arc<tokio::sync::watch::Sender<usize>>) -> Self {
        streams.send_modify(|n| *n += 1);
        StreamOpen(Arc::clone(streams))
    }
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl<S, B> hyper::service::Service<Request<Incoming>> for CountStreams<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
{
    type Response = Response<CountedBody<B>>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>,
    >;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let open = StreamOpen::new(&self.streams);
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| CountedBody {
                inner: Box::pin(body),
                _open: open,
            }))
        })
    }
}

/// A response body that holds its stream open (see [`CountStreams`]).
struct CountedBody<B> {
    inner: std::pin::Pin<Box<B>>,
    _open: StreamOpen,
}

impl<B: http_body::Body> http_body::Body for CountedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        self.inner.as_mut().poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the client on `stream` speaks HTTP/2 (its first bytes are the
/// preface) or HTTP/1.1 (they are not), told from bytes peeked at, not
/// read; `None` when it closed before sending any. As hyper-util tells it:
/// HTTP/1.1 as soon as a byte differs from the preface.
///
/// Woken by the socket, not by a timer: a peek that finds no more bytes
/// than the last one reports `WouldBlock` inside `try_io`, which clears the
/// readiness tokio holds for the socket (unless an event came meanwhile), so
/// the next `readable()` waits for the client's next bytes.
async fn speaks_h2(stream: &TcpStream) -> std::io::Result<Option<bool>> {
    let mut buf = [0; H2_PREFACE.len()];
    let mut seen = None;
    loop {
        stream.readable().await?;
        let peeked = stream.try_io(Interest::READABLE, || {
            let flags = RecvFlags::PEEK | RecvFlags::DONTWAIT;
            let (n, _) = rustix::net::recv(stream, &mut buf[..], flags)?;
            if seen == Some(n) {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        let n = match peeked {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(None);
        }
        if buf[..n] != H2_PREFACE[..n] {
            return Ok(Some(false));
        }
        if n == H2_PREFACE.len() {
            return Ok(Some(true));
        }
        seen = Some(n);
    }
}

/// A TLS connection whose first byte must arrive within a time after the
/// handshake. hyper's HTTP/2 server has no timer for a client that never
/// sends its preface, so a client that connects and stays silent would
/// otherwise hold its connection forever. (HTTP/1.1 has hyper's header read
/// timer; a plain TCP client must say which HTTP it speaks within the same
/// time: [`speaks_h2`] under a timeout.)
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

/// The certificates a TLS client presented and the acceptor verified (leaf
/// first), with the leaf's subject read once when the connection was made;
/// every request on that connection carries a clone of the same value.
#[derive(Clone, Debug)]
pub struct PeerCertificates(pub Arc<Peer>);

/// What [`PeerCertificates`] holds.
#[derive(Debug)]
pub struct Peer {
    /// The chain, leaf first.
    pub chain: Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>,
    /// The leaf's user and groups, as kube-apiserver reads them; `None`
    /// when the leaf has no common name or does not parse.
    pub subject: Option<Subject>,
}

/// A certificate's user (its CN) and groups (its O values), as
/// kube-apiserver's x509 authenticator reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The CN.
    pub user: String,
    /// The O values, in order.
    pub groups: Vec<String>,
}

impl PeerCertificates {
    /// The chain presented on a connection, its leaf's subject read now.
    pub fn new(chain: Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>>) -> Self {
        let subject = chain.first().and_then(|leaf| Subject::of(leaf));
        PeerCertificates(Arc::new(Peer { chain, subject }))
    }

    /// The leaf's subject.
    pub fn subject(&self) -> Option<&Subject> {
        self.0.subject.as_ref()
    }
}

impl Subject {
    /// The user (CN) and groups (O) of a DER certificate; `None` without a
    /// CN (kube-apiserver refuses such a certificate as a user too).
    pub fn of(der: &[u8]) -> Option<Subject> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        let user = subject
            .iter_common_name()
            .find_map(|a| a.as_str().ok())
            .filter(|cn| !cn.is_empty())?
            .to_owned();
        let groups = subject
            .iter_organization()
            .filter_map(|a| a.as_str().ok().map(str::to_owned))
            .collect();
        Some(Subject { user, groups })
    }
}

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

/// Tells the trimmer (`memory::note_freed`) that a connection ended, when
/// its task ends, whichever way.
struct Ended;

impl Drop for Ended {
    fn drop(&mut self) {
        crate::memory::note_freed();
    }
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
    let builders = Arc::new(Builders::new(&limits));
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
        let builders = builders.clone();
        let watcher = graceful.watcher();
        let transport = transport.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _ended = Ended;
            let served = match transport {
                Transport::Plain => {
                    let h2 =
                        match tokio::time::timeout(limits.header_read_timeout, speaks_h2(&stream))
                            .await
                        {
                            Ok(Ok(Some(h2))) => h2,
                            Ok(Ok(None)) => return reap(stream),
                            Ok(Err(err)) => {
                                debug!(%peer, error = %err, "reading the first bytes");
                                return reap(stream);
                            }
                            Err(_) => {
                                debug!(%peer, "no request arrived in time");
                                return reap(stream);
                            }
                        };
                    let svc = hyper::service::service_fn(service);
                    builders
                        .serve(h2, TokioIo::new(stream), svc, watcher, &shutdown)
                        .await
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
                            // Read once here, not per request.
                            .map(|certs| PeerCertificates::new(certs.to_vec()));
                        let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                            if let Some(peer) = &peer {
                                req.extensions_mut().insert(peer.clone());
                            }
                            service(req)
                        });
                        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                        let io =
                            TokioIo::new(FirstByteWithin::new(tls, limits.header_read_timeout));
                        builders.serve(h2, io, svc, watcher, &shutdown).await
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
        // One connection accepted, then the tasks already waiting run first:
        // thousands of connections arriving at once would otherwise be taken
        // in one go, each a task queued ahead of the open connections'
        // requests. Those waiting meanwhile stay in the accept queue.
        tokio::task::yield_now().await;
    }
    info!(address = ?listener.local_addr().ok(), "no new connections");
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("grace period over; closing remaining connections");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A connected pair on loopback: (client, server side).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    /// The client writes `parts` with a pause between them; what the server
    /// side decides.
    async fn decided(parts: Vec<&'static [u8]>) -> Option<bool> {
        let (mut client, server) = pair().await;
        let writer = tokio::spawn(async move {
            for part in parts {
                client.write_all(part).await.unwrap();
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            client
        });
        let h2 = speaks_h2(&server).await.unwrap();
        drop(writer.await.unwrap());
        h2
    }

    #[tokio::test]
    async fn the_protocol_is_told_from_the_first_bytes_left_for_hyper_to_read() {
        // A request line: HTTP/1.1 from its second byte.
        assert_eq!(
            decided(vec![b"GET /api/v1/services HTTP/1.1\r\n"]).await,
            Some(false)
        );
        // "P" could begin the preface, "PUT" cannot.
        assert_eq!(
            decided(vec![b"P", b"UT /x HTTP/1.1\r\n"]).await,
            Some(false)
        );
        // The preface whole, or in two segments: HTTP/2.
        assert_eq!(decided(vec![H2_PREFACE]).await, Some(true));
        let (start, rest) = H2_PREFACE.split_at(10);
        assert_eq!(decided(vec![start, rest]).await, Some(true));

        // Nothing was consumed: hyper reads the request from its first byte.
        let (mut client, server) = pair().await;
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        assert_eq!(speaks_h2(&server).await.unwrap(), Some(false));
        let mut first = [0; 16];
        let n = server.try_read(&mut first).unwrap();
        assert_eq!(&first[..n], b"GET / HTTP/1.1\r\n");
    }

    /// An HTTP/2 connection to `serve` with `limits`; the server's service
    /// answers `/short` at once and `/long` with a body that never ends.
    /// Returns the connection's sender and a task that ends with it.
    async fn h2_client(
        addr: SocketAddr,
    ) -> (
        hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
        tokio::task::JoinHandle<()>,
    ) {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        (
            send,
            tokio::spawn(async move {
                let _ = conn.await;
            }),
        )
    }

    fn get(path: &str) -> Request<http_body_util::Empty<bytes::Bytes>> {
        Request::get(format!("http://localhost{path}"))
            .body(http_body_util::Empty::new())
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_http2_connection_without_a_stream_is_closed_after_the_idle_time() {
        use http_body_util::BodyExt;
        type Body = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ConnLimits {
            header_read_timeout: Duration::from_millis(300),
            ..ConnLimits::default()
        };
        let shutdown = CancellationToken::new();
        let service = |req: Request<Incoming>| async move {
            let body: Body = if req.uri().path() == "/long" {
                // A watch: the body stays open as long as the stream.
                let endless = futures_endless();
                http_body_util::StreamBody::new(endless).boxed()
            } else {
                http_body_util::Full::new(bytes::Bytes::from_static(b"ok")).boxed()
            };
            Ok::<_, std::convert::Infallible>(Response::new(body))
        };
        let server = tokio::spawn(serve(
            listener,
            service,
            Transport::Plain,
            limits,
            shutdown.clone(),
            Duration::from_secs(1),
        ));

        // A request answered, then nothing: the server ends the connection.
        let (mut send, conn) = h2_client(addr).await;
        let resp = send.send_request(get("/short")).await.unwrap();
        assert_eq!(
            &resp.into_body().collect().await.unwrap().to_bytes()[..],
            b"ok"
        );
        tokio::time::timeout(Duration::from_secs(20), conn)
            .await
            .expect("an HTTP/2 connection without streams is closed")
            .unwrap();

        // An open stream (a watch) keeps its connection through many idle times.
        let (mut send, mut conn) = h2_client(addr).await;
        let watch = send.send_request(get("/long")).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(2), &mut conn)
                .await
                .is_err(),
            "a connection with an open stream stays"
        );
        // The watch ends: the connection is closed after the idle time.
        drop(watch);
        tokio::time::timeout(Duration::from_secs(20), conn)
            .await
            .expect("closed once its last stream ended")
            .unwrap();

        shutdown.cancel();
        server.await.unwrap();
    }

    /// A body stream that never yields.
    fn futures_endless(
    ) -> futures::stream::Pending<Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>>
    {
        futures::stream::pending()
    }

    /// A client certificate is read once per connection: every request of
    /// a connection carries the same parsed subject, and another connection
    /// its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_certificate_is_parsed_once_per_connection() {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose, SanType,
        };
        use tokio_rustls::rustls::{
            self,
            pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName},
        };
        let mut ca = CertificateParams::default();
        ca.distinguished_name.push(DnType::CommonName, "test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf = |cn: &str, server: bool| {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.distinguished_name
                .push(DnType::OrganizationName, "system:nodes");
            if server {
                p.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            } else {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, &ca).unwrap();
            (
                vec![cert.der().clone()],
                PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(ca.der().to_vec())).unwrap();
        let roots = Arc::new(roots);
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            provider.clone(),
        )
        .build()
        .unwrap();
        let (chain, key) = leaf("127.0.0.1", true);
        let server = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain, key)
                .unwrap(),
        );
        let (chain, key) = leaf("system:node:bj-1", false);
        let client = Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .unwrap(),
        );

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        // Each request answers which parsed certificate it carried, and whose.
        let service = |req: Request<Incoming>| async move {
            let peer = req.extensions().get::<PeerCertificates>().cloned();
            let body = match peer {
                Some(p) => format!(
                    "{:p} {}",
                    Arc::as_ptr(&p.0),
                    p.subject().map_or("", |s| s.user.as_str())
                ),
                None => "none".into(),
            };
            Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Full::new(
                bytes::Bytes::from(body),
            )))
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        let server = tokio::spawn(serve(
            listener,
            service,
            Transport::Tls(Arc::new(move || acceptor.clone())),
            ConnLimits::default(),
            shutdown.clone(),
            Duration::from_secs(1),
        ));
        let connection = || async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let tls = tokio_rustls::TlsConnector::from(client.clone())
                .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
                .await
                .unwrap();
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .unwrap();
            tokio::spawn(conn);
            send
        };
        let ask = |send: &mut hyper::client::conn::http1::SendRequest<
            http_body_util::Empty<bytes::Bytes>,
        >| {
            let req = get("/");
            let fut = send.send_request(req);
            async move {
                use http_body_util::BodyExt;
                let body = fut.await.unwrap().into_body().collect().await.unwrap();
                String::from_utf8(body.to_bytes().to_vec()).unwrap()
            }
        };
        let mut one = connection().await;
        let mut seen = Vec::new();
        for _ in 0..3 {
            // The connection takes the next request once the last answer is
            // wholly read on its side too (on a busy machine, not at once).
            one.ready().await.unwrap();
            seen.push(ask(&mut one).await);
        }
        assert!(seen[0].ends_with(" system:node:bj-1"), "{seen:?}");
        assert!(
            seen.iter().all(|s| *s == seen[0]),
            "one parse per connection: {seen:?}"
        );
        let mut two = connection().await;
        let other = ask(&mut two).await;
        assert!(other.ends_with(" system:node:bj-1"));
        assert_ne!(other, seen[0], "another connection, another parse");
        shutdown.cancel();
        drop((one, two));
        server.await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_closes_before_a_byte_is_no_protocol() {
        let (client, server) = pair().await;
        drop(client);
        assert_eq!(speaks_h2(&server).await.unwrap(), None);
    }
}
