//! The watch probe: N watchers that list then watch, as client-go's
//! reflector does, record each event's latency from the send time stamped
//! in the object, and count what they missed or got twice against the
//! churn's [`Ledger`].
//!
//! A watcher is judged per object by sequence number: an event whose number
//! is not above the last one it knows is a duplicate; numbers the ledger
//! wrote between the last known and the received one are missed events; at
//! the end, numbers written after the last one it knows are missed too. A
//! watch ended by a 410 ERROR relists (what it skipped meanwhile is not
//! missed: the relist brings it), and a relist older than what the watcher
//! already saw counts as stale.
//!
//! A watcher counts as its events only changes written after the probe
//! started. A server answers a LIST without resourceVersion from where it
//! is (a proxy from its cache, which may be a moment behind the API
//! server): changes written before the probe started that its list did not
//! show yet arrive as watch events, in order, and are counted apart
//! (`caught_up`), with no latency: they belong to whatever wrote them.
//!
//! A change that every full-speed watcher of a probe skipped alike was never
//! sent by the server: it is *coalesced*, not missed (see [`Lost::of`]).
//! That is what a proxy whose own upstream watch was down does when it
//! relists: it sends each object's latest state once, as a relist would
//! give a client of the API server; the intermediate states it never saw.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::{sync::watch, task::JoinHandle, time::Instant};

use super::{
    frame::{ListBody, WatchFrame},
    ledger::Ledger,
    stamp::unix_ns,
};
use crate::{client, HttpClient};
use sitegrid_apimachinery::protobuf;

/// What a watcher asks for with `--watch-format=protobuf`: kube-proxy's
/// `Accept` (its default `--kube-api-content-type`; ../shared/reference).
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf, */*";

/// What the watchers watch: kube-proxy's EndpointSlices.
pub const SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices";

/// What the probe watches and how.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The server (the proxy, or the upstream for "direct").
    pub addr: SocketAddr,
    /// The collection, e.g. `/apis/discovery.k8s.io/v1/endpointslices`.
    pub path: String,
    /// Watchers reading at full speed.
    pub watchers: usize,
    /// Watchers reading at this many bytes a second (the slow-reader fault).
    pub slow: Option<(usize, u64)>,
    /// The watches ask for protobuf, as kube-proxy does (else JSON); lists are JSON.
    pub protobuf: bool,
}

/// A latency histogram in nanoseconds (1 ns to 10 min, 3 significant digits).
pub fn histogram() -> Histogram<u64> {
    // Bounds are constants the crate accepts (low ≥ 1, high ≥ 2·low, sigfig ≤ 5).
    Histogram::new_with_bounds(1, 600_000_000_000, 3).unwrap_or_else(|_| unreachable!())
}

/// What one watcher saw.
#[derive(Debug, Clone)]
pub struct WatcherResult {
    /// Read at a limited rate (the slow-reader fault).
    pub slow: bool,
    /// From the probe's start to the first watch being open (list done).
    pub synced_after: Option<Duration>,
    /// The first list's duration.
    pub list_time: Option<Duration>,
    /// Per-event latency, send → arrival, ns.
    pub latency: Histogram<u64>,
    /// Events carrying a new sequence number written after the probe started.
    pub events: u64,
    /// Events carrying a change written before the probe started that the
    /// first list did not show yet (the server was behind the churn).
    pub caught_up: u64,
    /// Sequence numbers skipped or never received.
    pub missed: u64,
    /// Each skip in the stream: (object, last known, received, changes
    /// skipped), to tell skips every watcher made (coalesced) from misses.
    pub skips: Vec<(usize, u64, u64, u64)>,
    /// Events whose sequence number the watcher already had.
    pub duplicated: u64,
    /// Relists that returned an object older than the watcher had seen.
    pub stale_relists: u64,
    /// Objects whose last known change is not the last one written, at the end.
    pub behind_at_end: u64,
    /// Relists after a 410.
    pub relists: u32,
    /// Watches re-opened after the stream ended without an error.
    pub rewatches: u32,
    /// The server ended one of its watches with 410 Expired.
    pub got_410: bool,
    /// Requests that failed (connection refused, non-200), retried.
    pub errors: u32,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// Its last watch was answered in protobuf.
    pub protobuf: bool,
}

impl WatcherResult {
    pub(crate) fn new(slow: bool) -> Self {
        WatcherResult {
            slow,
            synced_after: None,
            list_time: None,
            latency: histogram(),
            events: 0,
            caught_up: 0,
            missed: 0,
            skips: Vec::new(),
            duplicated: 0,
            stale_relists: 0,
            behind_at_end: 0,
            relists: 0,
            rewatches: 0,
            got_410: false,
            errors: 0,
            last_error: None,
            protobuf: false,
        }
    }

    /// Events lost or wrong: missed, duplicated, stale relists.
    pub fn lost(&self) -> u64 {
        self.missed + self.duplicated + self.stale_relists
    }
}

/// Running watchers.
#[derive(Debug)]
pub struct Probe {
    tasks: Vec<JoinHandle<WatcherResult>>,
    /// Each watcher's last known sequence number per ledger object.
    known: Vec<Known>,
    ledger: Arc<Ledger>,
    stop: watch::Sender<bool>,
    synced: Arc<AtomicUsize>,
    received: Arc<AtomicU64>,
    /// Full-speed watchers (the first ones of `tasks`).
    fast: usize,
}

/// A watcher's last known sequence number per ledger object, readable by
/// the probe while the watcher runs.
type Known = Arc<Vec<AtomicU64>>;

/// Shared by a probe's watchers.
struct Shared {
    config: ProbeConfig,
    ledger: Arc<Ledger>,
    http: HttpClient,
    /// The slow watchers' client: a 4 KiB socket receive buffer, as a
    /// client on a slow link, so the proxy's own lag policy (not the
    /// kernel's megabytes of loopback buffers) meets the slowness.
    slow_http: HttpClient,
    started: Instant,
    /// The ledger's last sequence number per object when the probe started.
    before: Vec<u64>,
    synced: Arc<AtomicUsize>,
    received: Arc<AtomicU64>,
}

impl Probe {
    /// Starts the watchers at once; each lists (retrying until the server
    /// answers), then watches until [`Probe::stop`].
    pub fn start(config: ProbeConfig, ledger: Arc<Ledger>) -> Probe {
        let (stop, stop_rx) = watch::channel(false);
        let synced = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(Shared {
            http: client(),
            slow_http: slow_client(),
            started: Instant::now(),
            before: (0..ledger.len()).map(|id| ledger.last(id)).collect(),
            synced: Arc::clone(&synced),
            received: Arc::clone(&received),
            ledger: Arc::clone(&ledger),
            config,
        });
        let slow = shared.config.slow.map_or(0, |(n, _)| n);
        let mut known = Vec::new();
        let tasks = (0..shared.config.watchers + slow)
            .map(|i| {
                let rate = (i >= shared.config.watchers)
                    .then(|| shared.config.slow.map(|(_, r)| r))
                    .flatten();
                let k: Known = Arc::new((0..ledger.len()).map(|_| AtomicU64::new(0)).collect());
                known.push(Arc::clone(&k));
                tokio::spawn(run_watcher(Arc::clone(&shared), stop_rx.clone(), rate, k))
            })
            .collect();
        Probe {
            tasks,
            known,
            ledger,
            stop,
            synced,
            received,
            fast: shared.config.watchers,
        }
    }

    /// `watchers` full-speed watchers of the EndpointSlices on `addr`, once
    /// every one has its watch open (an error after `limit`).
    pub async fn start_synced(
        addr: SocketAddr,
        watchers: usize,
        protobuf: bool,
        ledger: Arc<Ledger>,
        limit: Duration,
    ) -> Result<Probe> {
        let probe = Probe::start(
            ProbeConfig {
                addr,
                path: SLICES.into(),
                watchers,
                slow: None,
                protobuf,
            },
            ledger,
        );
        probe.wait_synced(limit).await?;
        Ok(probe)
    }

    /// Watchers whose first watch is open.
    pub fn synced(&self) -> usize {
        self.synced.load(Ordering::Relaxed)
    }

    /// Watchers in all.
    pub fn watchers(&self) -> usize {
        self.tasks.len()
    }

    /// Events received so far by all watchers.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Waits until every watcher has its watch open, or `limit` passes.
    pub async fn wait_synced(&self, limit: Duration) -> Result<()> {
        let until = Instant::now() + limit;
        while self.synced() < self.watchers() {
            if Instant::now() > until {
                return Err(anyhow!(
                    "{} of {} watchers synced within {limit:?}",
                    self.synced(),
                    self.watchers()
                ));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// True when every full-speed watcher knows the last change written to
    /// every object.
    pub fn caught_up(&self) -> bool {
        self.known.iter().take(self.fast).all(|k| {
            k.iter()
                .enumerate()
                .all(|(id, seq)| seq.load(Ordering::Relaxed) >= self.ledger.last(id))
        })
    }

    /// Waits until every full-speed watcher has caught up with the changes
    /// written (see [`Probe::caught_up`]), at most `limit`; what has not
    /// arrived by then counts as missed.
    pub async fn drain(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.caught_up() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the watchers and returns what each saw.
    pub async fn stop(self) -> Result<Vec<WatcherResult>> {
        // Receivers may all be gone already (every watcher failed); nothing to tell then.
        self.stop.send_replace(true);
        let mut out = Vec::with_capacity(self.tasks.len());
        for t in self.tasks {
            out.push(t.await.context("a watcher task panicked")?);
        }
        Ok(out)
    }
}

/// Where a watcher is.
enum State {
    /// Listing the collection; then [`State::Watch`] from the list's version.
    List,
    /// Watching from a resourceVersion; a 410 goes back to [`State::List`],
    /// a stream that ends re-watches from the last version seen.
    Watch(String),
}

/// One watcher, until `stop`.
async fn run_watcher(
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    rate: Option<u64>,
    known: Known,
) -> WatcherResult {
    let mut r = WatcherResult::new(rate.is_some());
    let mut state = State::List;
    let mut listed_once = false;
    while !*stop.borrow() {
        state = match state {
            State::List => {
                let t = Instant::now();
                match list(&shared, &known, listed_once).await {
                    Ok((rv, stale)) => {
                        r.stale_relists += stale;
                        if !listed_once {
                            r.list_time = Some(t.elapsed());
                            listed_once = true;
                        }
                        State::Watch(rv)
                    }
                    Err(e) => {
                        r.errors += 1;
                        r.last_error = Some(format!("{e:#}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        State::List
                    }
                }
            }
            State::Watch(rv) => watch(&shared, &mut r, &known, &mut stop, rate, rv).await,
        };
    }
    for (id, k) in known.iter().enumerate() {
        let after = shared.ledger.after(id, k.load(Ordering::Relaxed));
        r.missed += after;
        r.behind_at_end += u64::from(after > 0);
    }
    r
}

/// Lists the collection into `known`; returns its resourceVersion and how
/// many objects were older than already known (for a relist).
async fn list(shared: &Shared, known: &[AtomicU64], relist: bool) -> Result<(String, u64)> {
    let url = format!("http://{}{}", shared.config.addr, shared.config.path);
    let resp = shared.http.request(get(&url)?).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    if status != 200 {
        return Err(anyhow!("LIST {url}: {status}"));
    }
    let list: ListBody = serde_json::from_slice(&body).with_context(|| format!("LIST {url}"))?;
    let mut stale = 0;
    for item in &list.items {
        let m = &item.metadata;
        if let Some(id) = shared.ledger.id(&m.namespace, &m.name) {
            let (seq, _) = m.stamp();
            stale += u64::from(relist && seq < known[id].load(Ordering::Relaxed));
            known[id].store(seq, Ordering::Relaxed);
        }
    }
    Ok((list.metadata.resource_version, stale))
}

/// One watch from `rv` until it ends; returns the next state.
async fn watch(
    shared: &Shared,
    r: &mut WatcherResult,
    known: &[AtomicU64],
    stop: &mut watch::Receiver<bool>,
    rate: Option<u64>,
    rv: String,
) -> State {
    let url = format!(
        "http://{}{}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3600",
        shared.config.addr, shared.config.path
    );
    let req = get(&url).map(|mut req| {
        if shared.config.protobuf {
            req.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static(PROTOBUF),
            );
        }
        req
    });
    let resp = match req {
        Ok(req) if rate.is_some() => shared.slow_http.request(req).await,
        Ok(req) => shared.http.request(req).await,
        Err(e) => {
            r.last_error = Some(format!("{e:#}"));
            return State::List;
        }
    };
    let resp = match resp {
        Ok(resp) if resp.status() == 200 => resp,
        Ok(resp) => {
            r.errors += 1;
            r.last_error = Some(format!("WATCH: {}", resp.status()));
            if resp.status() == 410 {
                r.relists += 1;
                r.got_410 = true;
            }
            return State::List;
        }
        Err(e) => {
            r.errors += 1;
            r.last_error = Some(format!("WATCH: {e}"));
            tokio::time::sleep(Duration::from_millis(50)).await;
            return State::Watch(rv);
        }
    };
    // Read as the server answered, as client-go does (a server may answer
    // JSON to a client that also accepts it).
    let protobuf = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(protobuf::MEDIA_TYPE.as_bytes()));
    r.protobuf = protobuf;
    if r.synced_after.is_none() {
        r.synced_after = Some(shared.started.elapsed());
        shared.synced.fetch_add(1, Ordering::Relaxed);
    }
    let mut body = resp.into_body();
    let mut reader = Frames::default();
    let mut rv = rv;
    loop {
        let chunk = tokio::select! {
            _ = stop.changed() => {
                if rate.is_some() {
                    // The slow reader: was it ended? Read what is left fast.
                    drain_for_410(&mut body, &mut reader, protobuf, r).await;
                }
                return State::Watch(rv);
            }
            chunk = next_data(&mut body) => chunk,
        };
        let Some(chunk) = chunk else {
            r.rewatches += 1;
            return State::Watch(rv);
        };
        let arrived = unix_ns();
        if let Some(rate) = rate {
            let pause = Duration::from_secs_f64(chunk.len() as f64 / rate.max(1) as f64);
            tokio::time::sleep(pause).await;
        }
        reader.push(&chunk);
        while let Some(line) = reader.next_frame(protobuf) {
            if !protobuf && line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Some(frame) = WatchFrame::read(&line, protobuf) else {
                r.errors += 1;
                r.last_error = Some("an undecodable watch frame".into());
                continue;
            };
            match frame.kind.as_str() {
                "ERROR" => {
                    if frame.object.code == Some(410) {
                        r.relists += 1;
                        r.got_410 = true;
                        return State::List;
                    }
                    r.errors += 1;
                    r.last_error = Some(format!("ERROR event, code {:?}", frame.object.code));
                    return State::Watch(rv);
                }
                "BOOKMARK" => rv = frame.object.metadata.resource_version,
                _ => {
                    let m = &frame.object.metadata;
                    rv.clone_from(&m.resource_version);
                    shared.received.fetch_add(1, Ordering::Relaxed);
                    let Some(id) = shared.ledger.id(&m.namespace, &m.name) else {
                        continue;
                    };
                    let (seq, sent) = m.stamp();
                    let last = known[id].load(Ordering::Relaxed);
                    if seq <= last {
                        r.duplicated += 1;
                        continue;
                    }
                    let skipped = shared.ledger.between(id, last, seq);
                    if skipped > 0 {
                        r.missed += skipped;
                        r.skips.push((id, last, seq, skipped));
                    }
                    known[id].store(seq, Ordering::Relaxed);
                    if seq <= shared.before[id] {
                        r.caught_up += 1;
                        continue;
                    }
                    r.events += 1;
                    r.latency
                        .saturating_record(arrived.saturating_sub(sent).max(1));
                }
            }
        }
    }
}

/// Reads the rest of a slow watcher's stream at full speed (at most 10 s)
/// and notes whether the server had ended it with a 410.
async fn drain_for_410(
    body: &mut Incoming,
    reader: &mut Frames,
    protobuf: bool,
    r: &mut WatcherResult,
) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let Ok(Some(chunk)) = tokio::time::timeout_at(until, next_data(body)).await else {
            return;
        };
        reader.push(&chunk);
        while let Some(line) = reader.next_frame(protobuf) {
            if let Some(f) = WatchFrame::read(&line, protobuf) {
                if f.kind == "ERROR" && f.object.code == Some(410) {
                    r.got_410 = true;
                    return;
                }
            }
        }
    }
}

/// The next data chunk of a body; None at its end or on an error.
pub(crate) async fn next_data(body: &mut Incoming) -> Option<Bytes> {
    loop {
        match body.frame().await? {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    return Some(data);
                }
            }
            Err(_) => return None,
        }
    }
}

/// Splits a byte stream into newline-terminated lines (JSON watch events)
/// or length-prefixed frames (protobuf watch events).
#[derive(Default)]
pub(crate) struct Frames {
    buf: Vec<u8>,
    at: usize,
}

impl Frames {
    pub(crate) fn push(&mut self, data: &[u8]) {
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        self.buf.extend_from_slice(data);
    }

    pub(crate) fn next_line(&mut self) -> Option<Vec<u8>> {
        let end = self.buf[self.at..].iter().position(|b| *b == b'\n')? + self.at;
        let line = self.buf[self.at..end].to_vec();
        self.taken(end + 1);
        Some(line)
    }

    /// The next frame of a protobuf watch stream: a 4-byte big-endian
    /// length, then that many bytes (returned without the length).
    pub(crate) fn next_length_prefixed(&mut self) -> Option<Vec<u8>> {
        let rest = &self.buf[self.at..];
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let frame = rest.get(4..4 + len)?.to_vec();
        self.taken(self.at + 4 + len);
        Some(frame)
    }

    /// The next watch frame: a line, or with `protobuf` a length-prefixed frame.
    pub(crate) fn next_frame(&mut self, protobuf: bool) -> Option<Vec<u8>> {
        if protobuf {
            self.next_length_prefixed()
        } else {
            self.next_line()
        }
    }

    /// Everything before `at` has been read.
    fn taken(&mut self, at: usize) {
        self.at = at;
        if self.at > 1 << 20 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
    }
}

/// A client whose connections have a 4 KiB receive buffer.
fn slow_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_recv_buffer_size(Some(4096));
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}

/// A GET of `url`.
fn get(url: &str) -> Result<hyper::Request<Empty<Bytes>>> {
    Ok(hyper::Request::get(url).body(Empty::new())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks() {
        let mut l = Frames::default();
        l.push(b"{\"a\":1}\n{\"b\"");
        assert_eq!(l.next_line().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(l.next_line(), None);
        l.push(b":2}\n");
        assert_eq!(l.next_line().as_deref(), Some(&b"{\"b\":2}"[..]));
        assert_eq!(l.next_line(), None);
    }

    #[test]
    fn length_prefixed_frames_split_across_chunks() {
        let mut l = Frames::default();
        l.push(&[0, 0, 0, 2, b'a', b'b', 0, 0]);
        assert_eq!(l.next_frame(true).as_deref(), Some(&b"ab"[..]));
        assert_eq!(l.next_frame(true), None, "half a length");
        l.push(&[0, 3, b'c', b'd']);
        assert_eq!(l.next_frame(true), None, "a frame not all there");
        l.push(b"e");
        assert_eq!(l.next_frame(true).as_deref(), Some(&b"cde"[..]));
        assert_eq!(l.next_frame(true), None);
    }
}
