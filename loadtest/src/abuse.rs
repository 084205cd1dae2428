//! Abusive clients, written down once for the tests that assert what the
//! proxy answers them (`tests/abuse.rs`) and for `sitegrid-abuse`, which runs
//! them at scale and measures the proxy's memory and a good client's latency.
//!
//! They speak raw bytes on purpose: a well-behaved HTTP library cannot send
//! a request head one byte at a time, two conflicting lengths, or a HEADERS
//! frame followed at once by its RST_STREAM.

use std::{io, net::SocketAddr, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    time::{timeout, Instant},
};

/// How a connection the proxy should close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The proxy closed it (EOF or reset) after this long.
    Closed(Duration),
    /// Still open when the attacker gave up.
    StillOpen,
}

/// Slowloris: a request head sent one byte every `interval`, never finished.
/// Returns when the proxy closes the connection or after `give_up`.
pub async fn slow_headers(
    addr: SocketAddr,
    interval: Duration,
    give_up: Duration,
) -> io::Result<Ended> {
    let mut conn = TcpStream::connect(addr).await?;
    let started = Instant::now();
    conn.write_all(b"GET /api/v1/services HTTP/1.1\r\nHost: sitegrid\r\n")
        .await?;
    let drip = b"X-Slow: ".iter().chain(std::iter::repeat(&b'a'));
    let mut buf = [0u8; 512];
    for byte in drip {
        if started.elapsed() > give_up {
            return Ok(Ended::StillOpen);
        }
        if conn.write_all(&[*byte]).await.is_err() {
            return Ok(Ended::Closed(started.elapsed()));
        }
        // A closed connection reads EOF (or a reset) at once.
        match timeout(interval, conn.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Ok(Ended::Closed(started.elapsed())),
            Ok(Ok(_)) => {} // an answer (408?) — keep reading until it closes
            Err(_) => {}
        }
    }
    unreachable!("the drip never ends")
}

/// Waits until the peer closes `conn` (EOF or reset), reading and dropping
/// whatever it sends, for at most `give_up`.
pub async fn until_closed<R: AsyncRead + Unpin>(conn: &mut R, give_up: Duration) -> Ended {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        let left = give_up.saturating_sub(started.elapsed());
        match timeout(left, conn.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Ended::Closed(started.elapsed()),
            Ok(Ok(_)) => {}
            Err(_) => return Ended::StillOpen,
        }
    }
}

/// A TLS client that connects and then never finishes the handshake: with
/// `partial`, it sends the start of a ClientHello record (claiming 512
/// bytes, sending 5); otherwise nothing at all.
pub async fn stalled_tls(addr: SocketAddr, partial: bool, give_up: Duration) -> io::Result<Ended> {
    let mut conn = TcpStream::connect(addr).await?;
    if partial {
        // Handshake record, TLS 1.0 record version, length 512, handshake type ClientHello.
        conn.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .await?;
    }
    Ok(until_closed(&mut conn, give_up).await)
}

/// One HTTP/1.1 response as read off the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    /// Status code.
    pub code: u16,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` (raw bytes: one or several pipelined requests) and reads
/// the responses until the connection closes or none arrives for `quiet`.
pub async fn raw_http1(
    addr: SocketAddr,
    request: &[u8],
    quiet: Duration,
) -> io::Result<(Vec<RawResponse>, Ended)> {
    let mut conn = TcpStream::connect(addr).await?;
    conn.write_all(request).await?;
    let mut reader = Reader {
        buf: Vec::new(),
        quiet,
    };
    let mut out = Vec::new();
    loop {
        match reader.response(&mut conn).await? {
            Some(resp) => out.push(resp),
            None => return Ok((out, reader.ended(&mut conn).await)),
        }
    }
}

/// Buffers bytes off a connection and cuts HTTP/1.1 responses out of them.
struct Reader {
    buf: Vec<u8>,
    quiet: Duration,
}

impl Reader {
    /// Reads more; `false` at EOF, reset or silence.
    async fn fill(&mut self, conn: &mut TcpStream) -> bool {
        let mut chunk = [0u8; 8192];
        match timeout(self.quiet, conn.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            _ => false,
        }
    }

    /// How the connection ended after the last response.
    async fn ended(&mut self, conn: &mut TcpStream) -> Ended {
        let mut probe = [0u8; 1];
        match timeout(Duration::from_millis(200), conn.read(&mut probe)).await {
            Ok(Ok(0) | Err(_)) => Ended::Closed(Duration::ZERO),
            _ => Ended::StillOpen,
        }
    }

    /// Bytes up to and without `\r\n`, consumed with it.
    async fn line(&mut self, conn: &mut TcpStream) -> io::Result<Option<String>> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..at]).into_owned();
                self.buf.drain(..at + 2);
                return Ok(Some(line));
            }
            if !self.fill(conn).await {
                return Ok(None);
            }
        }
    }

    async fn exactly(&mut self, conn: &mut TcpStream, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill(conn).await {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "body cut short",
                ));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    async fn response(&mut self, conn: &mut TcpStream) -> io::Result<Option<RawResponse>> {
        let Some(status) = self.line(conn).await? else {
            return Ok(None);
        };
        let code = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("not a status line: {status:?}"),
                )
            })?;
        let mut headers = Vec::new();
        while let Some(line) = self.line(conn).await? {
            if line.is_empty() {
                break;
            }
            if let Some((n, v)) = line.split_once(':') {
                headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let mut resp = RawResponse {
            code,
            headers,
            body: Vec::new(),
        };
        if resp.header("transfer-encoding") == Some("chunked") {
            loop {
                let size = self.line(conn).await?.unwrap_or_default();
                let size = usize::from_str_radix(size.trim(), 16)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
                let data = self.exactly(conn, size + 2).await?;
                if size == 0 {
                    break;
                }
                resp.body.extend_from_slice(&data[..size]);
            }
        } else if let Some(len) = resp.header("content-length").and_then(|l| l.parse().ok()) {
            resp.body = self.exactly(conn, len).await?;
        }
        Ok(Some(resp))
    }
}

/// Raw HTTP/2 frames (RFC 9113) over cleartext with prior knowledge, as
/// kube-proxy speaks it over TLS.
pub mod h2 {
    use super::*;

    /// The client connection preface.
    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    /// Frame types.
    pub const HEADERS: u8 = 0x1;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    /// The GOAWAY code of a peer that misbehaves (too many resets).
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
    /// The RST_STREAM code of a client that changed its mind.
    pub const CANCEL: u32 = 0x8;

    /// One frame.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Frame {
        /// Type.
        pub kind: u8,
        /// Flags.
        pub flags: u8,
        /// Stream.
        pub stream: u32,
        /// Payload.
        pub payload: Vec<u8>,
    }

    impl Frame {
        /// The error code of an RST_STREAM (its payload) or a GOAWAY (after
        /// the last stream id); `None` for other frames or a short payload.
        pub fn error_code(&self) -> Option<u32> {
            let at = match self.kind {
                RST_STREAM => 0,
                GOAWAY => 4,
                _ => return None,
            };
            let b = self.payload.get(at..at + 4)?;
            Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        }
    }

    /// A frame's bytes.
    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = Vec::with_capacity(9 + payload.len());
        out.extend_from_slice(&len.to_be_bytes()[1..]);
        out.push(kind);
        out.push(flags);
        out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// An HPACK string literal (no Huffman coding).
    fn literal(out: &mut Vec<u8>, s: &[u8]) {
        integer(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }

    /// An HPACK integer with an `n`-bit prefix after `first`'s high bits.
    fn integer(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
        let max = (1usize << n) - 1;
        if v < max {
            out.push(first | v as u8);
            return;
        }
        out.push(first | max as u8);
        v -= max;
        while v >= 128 {
            out.push((v % 128) as u8 | 0x80);
            v /= 128;
        }
        out.push(v as u8);
    }

    /// A HEADERS frame for `GET path` ending the stream, plus `extra`
    /// header fields (literal, not indexed).
    pub fn get(stream: u32, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        // Static table: 2 = :method GET, 6 = :scheme http; 4 = :path and
        // 1 = :authority as names of literals without indexing.
        let mut block = vec![0x82, 0x86];
        integer(&mut block, 0x00, 4, 4);
        literal(&mut block, path.as_bytes());
        integer(&mut block, 0x00, 4, 1);
        literal(&mut block, b"sitegrid");
        for (name, value) in extra {
            block.push(0x00);
            literal(&mut block, name.as_bytes());
            literal(&mut block, value.as_bytes());
        }
        // END_STREAM | END_HEADERS
        frame(HEADERS, 0x1 | 0x4, stream, &block)
    }

    /// RST_STREAM with CANCEL.
    pub fn cancel(stream: u32) -> Vec<u8> {
        frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes())
    }

    /// Reads one frame.
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Frame> {
        let mut head = [0u8; 9];
        r.read_exact(&mut head).await?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload).await?;
        Ok(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        })
    }

    /// The (identifier, value) pairs of a SETTINGS payload.
    pub fn settings(payload: &[u8]) -> Vec<(u16, u32)> {
        payload
            .chunks_exact(6)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                )
            })
            .collect()
    }

    /// The RST_STREAM code of a stream refused over the concurrency limit.
    pub const REFUSED_STREAM: u32 = 0x7;

    /// What a stream-flood client saw: per stream, HEADERS answered or the
    /// RST_STREAM code it was reset with; and a GOAWAY code if one came.
    #[derive(Debug, Clone, Default)]
    pub struct Flood {
        /// Streams that got response HEADERS.
        pub answered: usize,
        /// RST_STREAM codes received, by stream.
        pub reset: Vec<(u32, u32)>,
        /// The GOAWAY error code, if any.
        pub goaway: Option<u32>,
    }

    /// A stream flood: `streams` long-lived requests (watches) for `path`
    /// opened at once on one connection, beyond what the server's
    /// MAX_CONCURRENT_STREAMS allows; reads frames for `listen`.
    pub async fn flood(
        addr: SocketAddr,
        path: &str,
        streams: u32,
        listen: Duration,
    ) -> io::Result<Flood> {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(PREFACE).await?;
        conn.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
        conn.write_all(&frame(SETTINGS, 0x1, 0, &[])).await?;
        let mut batch = Vec::new();
        for i in 0..streams {
            batch.extend(get(1 + 2 * i, path, &[]));
        }
        conn.write_all(&batch).await?;
        let mut seen = Flood::default();
        let _ = timeout(listen, async {
            while let Ok(f) = read(&mut conn).await {
                match f.kind {
                    HEADERS => seen.answered += 1,
                    RST_STREAM => seen.reset.extend(f.error_code().map(|c| (f.stream, c))),
                    GOAWAY => {
                        seen.goaway = f.error_code();
                        break;
                    }
                    _ => {}
                }
            }
        })
        .await;
        Ok(seen)
    }

    /// What a rapid-reset client saw.
    #[derive(Debug, Clone, Default)]
    pub struct RapidReset {
        /// The server's first SETTINGS.
        pub settings: Vec<(u16, u32)>,
        /// The GOAWAY error code, if the server sent one.
        pub goaway: Option<u32>,
        /// Streams sent (each HEADERS followed at once by RST_STREAM) before
        /// the connection ended or all were sent.
        pub sent: u32,
    }

    /// HTTP/2 rapid reset (CVE-2023-44487): up to `streams` requests for
    /// `path`, each cancelled right after it is sent, in batches of 100 per
    /// write; then reads until GOAWAY, close or `give_up`.
    pub async fn rapid_reset(
        addr: SocketAddr,
        path: &str,
        streams: u32,
        give_up: Duration,
    ) -> io::Result<RapidReset> {
        let conn = TcpStream::connect(addr).await?;
        let (mut rd, mut wr) = conn.into_split();
        wr.write_all(PREFACE).await?;
        wr.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
        let mut seen = RapidReset::default();
        let reader = tokio::spawn(async move {
            let mut settings = None;
            let mut goaway = None;
            let _ = timeout(give_up, async {
                while let Ok(f) = read(&mut rd).await {
                    match f.kind {
                        SETTINGS if f.flags & 0x1 == 0 && settings.is_none() => {
                            settings = Some(self::settings(&f.payload));
                        }
                        GOAWAY => {
                            goaway = f.error_code();
                            break;
                        }
                        _ => {}
                    }
                }
            })
            .await;
            (settings.unwrap_or_default(), goaway)
        });
        // SETTINGS ack for the server's, whenever it came (an ack needs no order).
        wr.write_all(&frame(SETTINGS, 0x1, 0, &[])).await?;
        let mut stream = 1u32;
        'send: while seen.sent < streams {
            let mut batch = Vec::new();
            for _ in 0..100.min(streams - seen.sent) {
                batch.extend(get(stream, path, &[]));
                batch.extend(cancel(stream));
                stream += 2;
                seen.sent += 1;
            }
            if wr.write_all(&batch).await.is_err() {
                break 'send;
            }
            if reader.is_finished() {
                break 'send;
            }
        }
        let (settings, goaway) = reader.await.unwrap_or_default();
        seen.settings = settings;
        seen.goaway = goaway;
        Ok(seen)
    }
}
