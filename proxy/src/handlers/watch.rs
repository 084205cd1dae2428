//! WATCH from the cache: replay from a resourceVersion, initial state,
//! selector transitions, bookmarks, timeouts, and the lag policy.
//!
//! Each watch is an async function that the connection polls in place
//! ([`Produced`]): no task or channel of its own. Frames of shared events
//! are the events' own encoded `Bytes`;
//! the events that are already waiting when a watch wakes go out together,
//! as one write (under churn a watch wakes, and hyper writes, once per batch
//! rather than once per event).
//! Live events come from a bounded broadcast: a watcher that falls more than
//! `watcher_buffer` events behind (a slow client) is ended with a 410 Expired
//! ERROR event so it lists again; it never silently misses an event and never
//! holds up the others.

use std::{collections::BTreeMap, time::Duration};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::StreamBody;
use serde_json::{json, Value};
use sitegrid_apimachinery::{table, Status};
use tokio::{
    sync::broadcast::error::{RecvError, TryRecvError},
    time::{sleep_until, Instant},
};
use tokio_util::sync::CancellationToken;

use super::{
    list::RV_WAIT,
    metadata,
    request::{CachedRequest, Format, Start, WatchRequest},
    table::row,
};
use crate::http::{
    produced::{Produced, Sink},
    response, Body, BoxError,
};
use sitegrid_cache::{
    json::{watch_frame, watch_frame_value},
    proto, Cache, Event, EventType, View, WatcherHandle, WatcherInfo, Wire,
};

/// The longest a watch runs: `timeoutSeconds` may be as large as an int64
/// (kube-apiserver accepts it), past what an `Instant` can hold.
const LONGEST_WATCH: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Frames queued for one write are sent once they reach this many bytes (an
/// initial list of thousands of objects goes out in pieces of about this size).
const WRITE_BYTES: usize = 64 * 1024;

/// How many watches send their initial events at once, across the proxy:
/// one core fewer than the machine has (at least one), so a core is left for
/// everything else. Sending them is a watch's one burst of work (every object
/// of the kind, encoded, framed and copied into the socket), and ten thousand
/// watches opened at once would otherwise queue ten thousand bursts ahead of
/// every other request (a good client's LIST waited 189 ms behind them). In
/// turns, the others wait without running.
static BUILDING: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::sync::Semaphore::new(cores.saturating_sub(1).max(1))
});

/// How long a watch keeps its turn while the client has not taken a write.
const TURN_WAIT: Duration = Duration::from_millis(50);

/// The most views a turn goes through (matched or not) before it is given up.
const TURN_VIEWS: usize = 256;

/// A turn to send initial events.
async fn building_turn() -> tokio::sync::SemaphorePermit<'static> {
    // Nothing closes it, so acquiring cannot fail.
    BUILDING
        .acquire()
        .await
        .expect("the building semaphore is never closed")
}

/// Watch timing.
#[derive(Debug, Clone, Copy)]
pub struct WatchSettings {
    /// How often a BOOKMARK goes to watchers that asked for them.
    pub bookmark_interval: Duration,
}

impl Default for WatchSettings {
    fn default() -> Self {
        WatchSettings {
            bookmark_interval: Duration::from_secs(60),
        }
    }
}

/// Starts the stream of `req`, a watch with `options`.
pub fn watch(
    cache: Cache,
    req: CachedRequest,
    mut options: WatchRequest,
    settings: WatchSettings,
    closing: CancellationToken,
) -> Response<Body> {
    if options.start == Start::Now {
        // "From now" is from before the answer starts: nothing committed after it is missed.
        options.start = Start::After(cache.store(req.served.kind).last_rv());
    }
    let timeout = options
        .timeout
        // Without timeoutSeconds kube-apiserver picks 30 to 60 minutes.
        .unwrap_or_else(|| Duration::from_secs(1800 + fastrand::u64(0..1800)))
        .min(LONGEST_WATCH);
    let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let (labels, fields) = options.filter.raw_selectors();
    let registered = cache.watchers().register(WatcherInfo {
        resource: req.served.kind,
        namespace: options.filter.namespace().map(str::to_owned),
        label_selector: nonempty(labels),
        field_selector: nonempty(fields),
    });
    let content_type = req.format.content_type(true);
    let deadline = Instant::now() + timeout;
    let frames = Produced::new(|out| {
        Watcher {
            cache,
            req,
            options,
            out,
            queued: Vec::new(),
            queued_bytes: 0,
            sent_columns: false,
            last_rv: 0,
            seen_rv: 0,
            deadline,
            registered,
            closing,
            turn: None,
        }
        .run(settings)
    })
    .map(|b| Ok::<_, BoxError>(Frame::data(b)));
    response::typed(
        StatusCode::OK,
        content_type,
        Body::new(StreamBody::new(frames)),
    )
}

/// One open watch.
struct Watcher {
    cache: Cache,
    req: CachedRequest,
    options: WatchRequest,
    /// Where frames go: the response body, polled by the connection.
    out: Sink,
    /// Frames waiting to go out in one write ([`Watcher::flush`]).
    queued: Vec<Bytes>,
    queued_bytes: usize,
    sent_columns: bool,
    /// The newest version this client has been told about.
    last_rv: u64,
    /// The newest version this watch has taken from the store: every event
    /// up to it has been sent or filtered out. A bookmark may claim no more:
    /// the store's newest version can be ahead while events wait in the
    /// broadcast for this watcher, and a bookmark past them would make the
    /// watch skip them (and the client believe it had them).
    seen_rv: u64,
    /// When the stream ends (`timeoutSeconds`).
    deadline: Instant,
    /// Cancelled when the proxy shuts down.
    closing: CancellationToken,
    /// This watch among the open ones (`watchers_open`, `/debug/cache`), with its progress.
    registered: WatcherHandle,
    /// Its turn to send initial events, while it has one (see `BUILDING`).
    turn: Option<tokio::sync::SemaphorePermit<'static>>,
}

/// The stream is over: the client went away, or an ERROR event ended it.
struct Gone;

/// The live events of a resource, after a watch caught up.
type Live = tokio::sync::broadcast::Receiver<std::sync::Arc<Event>>;

impl Watcher {
    async fn run(mut self, settings: WatchSettings) {
        // Either way the stream is over; returning ends the response body.
        let _ = self.stream(settings).await;
    }

    async fn stream(&mut self, settings: WatchSettings) -> Result<(), Gone> {
        match self.catch_up().await? {
            Some(live) => self.follow(live, settings).await,
            None => Ok(()),
        }
    }

    /// Sends where the watch starts: the current objects (and the end of the
    /// initial events), or the logged events after the requested version;
    /// returns the live stream that continues without gap or overlap. `None`
    /// when the version is older than the log (the 410 ERROR was sent).
    async fn catch_up(&mut self) -> Result<Option<Live>, Gone> {
        let start = self.options.start;
        let cache = self.cache.clone();
        let store = cache.store(self.req.served.kind);
        let from = match start {
            Start::After(rv) => Some(rv),
            Start::Now => Some(store.last_rv()), // resolved in `watch` already
            Start::Initial { not_older_than, .. } => {
                // As the watch cache does for sendInitialEvents: wait a little
                // for a newer state, then end the stream with an ERROR.
                if let Some(rv) = not_older_than {
                    if rv > self.cache.current_rv() && !self.cache.wait_for_rv(rv, RV_WAIT).await {
                        let status = Status::too_large_resource_version(rv, store.last_rv());
                        self.fail(&status).await?;
                    }
                }
                None
            }
        };
        let mut sub = match store.subscribe(from) {
            Ok(sub) => sub,
            Err(too_old) => {
                self.cache.metrics().watch_too_old(self.req.served.kind);
                let status =
                    Status::too_old_resource_version(from.unwrap_or(0), too_old.compacted_rv);
                self.fail(&status).await?;
                return Ok(None);
            }
        };
        self.last_rv = from.unwrap_or(sub.rv);
        // The live stream continues after `sub.rv`; a watch from a version
        // ahead of it has nothing to hear before its own start.
        self.seen_rv = self.last_rv.max(sub.rv);
        self.registered.set_sent(self.last_rv);
        // The initial events are sent in turns (see `BUILDING`).
        for (i, view) in std::mem::take(&mut sub.initial).into_iter().enumerate() {
            if self.turn.is_none() {
                self.turn = Some(building_turn().await);
            }
            if self.options.filter.matches(self.cache.codec(), &view) {
                let frame = self.frame_for(EventType::Added, &view).await?;
                self.queue(frame).await?;
            }
            if i % TURN_VIEWS == TURN_VIEWS - 1 {
                // A selector that matches little: the turn is not held across the whole store.
                self.turn = None;
            }
        }
        if let Start::Initial {
            end_bookmark: true, ..
        } = start
        {
            self.bookmark(sub.rv, true).await?;
        }
        for event in std::mem::take(&mut sub.replay) {
            self.deliver(&event).await?;
        }
        self.flush().await?;
        self.turn = None;
        Ok(Some(sub.live))
    }

    /// Live events, bookmarks, the timeout and shutdown, until one ends the stream.
    async fn follow(&mut self, mut live: Live, settings: WatchSettings) -> Result<(), Gone> {
        let bookmarks = self.options.bookmarks;
        let cache = self.cache.clone();
        let kind = self.req.served.kind;
        // Made once: a timer registered anew for every event would cost more
        // than the event.
        let ended = sleep_until(self.deadline);
        let bookmark_due = sleep_until(Instant::now() + settings.bookmark_interval);
        let closing = self.closing.clone();
        let shutdown = closing.cancelled();
        tokio::pin!(ended, bookmark_due, shutdown);
        loop {
            tokio::select! {
                received = live.recv() => {
                    let mut received = received.map_err(|e| match e {
                        RecvError::Lagged(n) => TryRecvError::Lagged(n),
                        RecvError::Closed => TryRecvError::Closed,
                    });
                    // This event and those already behind it: one write.
                    loop {
                        match received {
                            Ok(event) => {
                                self.seen_rv = self.seen_rv.max(event.rv);
                                self.deliver(&event).await?;
                            }
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Lagged(n)) => {
                                cache.metrics().watcher_lagged(kind);
                                let status = Status::expired(format!(
                                    "watch of {kind} fell {n} events behind and was ended; list again"
                                ));
                                return self.fail(&status).await;
                            }
                            Err(TryRecvError::Closed) => return self.flush().await,
                        }
                        received = live.try_recv();
                    }
                    self.flush().await?;
                }
                _ = &mut bookmark_due, if bookmarks => {
                    bookmark_due.as_mut().reset(Instant::now() + settings.bookmark_interval);
                    self.bookmark_if_progressed(self.seen_rv).await?;
                }
                _ = &mut ended => {
                    if bookmarks {
                        self.bookmark_if_progressed(self.seen_rv).await?;
                    }
                    return Ok(());
                }
                // Shutting down: end the stream cleanly, as kube-apiserver does; clients re-watch.
                () = &mut shutdown => return Ok(()),
            }
        }
    }

    /// Sends one event if the watch's scope and selectors see it, turning a
    /// MODIFIED that crosses the selector boundary into ADDED or DELETED.
    async fn deliver(&mut self, event: &Event) -> Result<(), Gone> {
        if event.rv <= self.last_rv {
            return Ok(());
        }
        self.still_complete()?;
        // Dealt with, even if the selectors skip it: a quiet filtered watch is not behind.
        self.registered.set_sent(event.rv);
        let (filter, codec) = (&self.options.filter, self.cache.codec());
        let now = filter.matches(codec, &event.object);
        let before = event
            .prev
            .as_ref()
            .is_some_and(|p| filter.matches(codec, p));
        let frame = match (event.event_type, before, now) {
            (EventType::Modified, true, false) => {
                // Stopped matching: DELETED with the old content at the new version.
                let gone = event.prev.as_ref().map(|p| p.with_rv(event.rv));
                match gone {
                    Some(g) => self.frame_for(EventType::Deleted, &g).await?,
                    None => return Ok(()),
                }
            }
            (EventType::Modified, false, true) => {
                self.frame_for(EventType::Added, &event.object).await?
            }
            (_, _, true) => match self.req.format {
                Format::Table { .. } | Format::Metadata { .. } => {
                    self.frame_for(event.event_type, &event.object).await?
                }
                format => match self.cache.frame(event, self.req.served, format.wire()) {
                    Ok(frame) => frame,
                    Err(e) => return self.fail(&Status::internal_error(e.to_string())).await,
                },
            },
            _ => return Ok(()),
        };
        self.last_rv = event.rv;
        self.queue(frame).await
    }

    /// A protobuf watch ends, cleanly and before the event that would be
    /// written incompletely, once its kind holds objects with fields the
    /// protobuf encoder does not know: the client resumes from the last
    /// version it got, and the new watch is answered in JSON (see
    /// `Cache::protobuf_complete`).
    fn still_complete(&self) -> Result<(), Gone> {
        match self.req.format {
            Format::Protobuf if !self.cache.protobuf_complete(self.req.served.kind) => Err(Gone),
            _ => Ok(()),
        }
    }

    /// The frame of `view` as an `event_type` event in the watch's format; an
    /// object that cannot be encoded ends the stream with an ERROR.
    async fn frame_for(&mut self, event_type: EventType, view: &View) -> Result<Bytes, Gone> {
        let served = self.req.served;
        match self.req.format {
            Format::Json => Ok(watch_frame(
                event_type.as_str(),
                served,
                self.cache.body(view, served),
            )),
            Format::Protobuf if self.still_complete().is_err() => Err(Gone),
            Format::Protobuf => match self.cache.message(view, served) {
                Ok(message) => Ok(proto::watch_frame(event_type.as_str(), served, &message)),
                Err(e) => {
                    self.fail(&Status::internal_error(e.to_string())).await?;
                    Err(Gone)
                }
            },
            Format::Metadata { .. } => Ok(watch_frame_value(
                event_type.as_str(),
                &metadata::partial(&self.cache, view, served),
            )),
            Format::Table {
                api_version,
                include,
            } => {
                let row = row(&self.cache, &self.req, view, include, api_version);
                // Only the first event of a Table watch carries the columns.
                let t = table::table(
                    served.kind.plural(),
                    api_version,
                    json!({"resourceVersion": view.rv.to_string()}),
                    vec![row],
                    !self.sent_columns,
                );
                self.sent_columns = true;
                Ok(watch_frame_value(event_type.as_str(), &t))
            }
        }
    }

    /// Sends an ERROR event with `status` in the watch's format (after what
    /// was queued); the stream ends after it.
    async fn fail(&mut self, status: &Status) -> Result<(), Gone> {
        let frame = match self.req.format.wire() {
            Wire::Json => watch_frame_value("ERROR", &status.to_value()),
            Wire::Protobuf => proto::error_frame(status),
        };
        self.queue(frame).await?;
        self.flush().await?;
        Err(Gone)
    }

    async fn bookmark_if_progressed(&mut self, rv: u64) -> Result<(), Gone> {
        if rv > self.last_rv {
            self.bookmark(rv, false).await?;
        }
        Ok(())
    }

    /// A BOOKMARK at `rv`: `{"type":"BOOKMARK","object":{"kind":K,"apiVersion":V,
    /// "metadata":{"resourceVersion":"N","creationTimestamp":null}}}` in JSON.
    async fn bookmark(&mut self, rv: u64, initial_events_end: bool) -> Result<(), Gone> {
        let served = self.req.served;
        let mut annotations = BTreeMap::new();
        if initial_events_end {
            annotations.insert("k8s.io/initial-events-end".to_owned(), "true".to_owned());
        }
        let frame = match self.req.format.wire() {
            Wire::Protobuf => proto::bookmark_frame(served, rv, &annotations),
            Wire::Json => {
                let mut metadata =
                    json!({"resourceVersion": rv.to_string(), "creationTimestamp": Value::Null});
                if initial_events_end {
                    metadata["annotations"] = json!(annotations);
                }
                let (kind, api_version) = match self.req.format {
                    Format::Metadata { .. } => ("PartialObjectMetadata", metadata::API_VERSION),
                    _ => (served.kind.kind(), served.api_version()),
                };
                let object = json!({"kind": kind, "apiVersion": api_version, "metadata": metadata});
                watch_frame_value("BOOKMARK", &object)
            }
        };
        self.last_rv = self.last_rv.max(rv);
        self.registered.set_sent(self.last_rv);
        self.queue(frame).await?;
        self.flush().await
    }

    /// Queues a frame for the next write; a full write's worth goes out now.
    async fn queue(&mut self, frame: Bytes) -> Result<(), Gone> {
        self.queued_bytes += frame.len();
        self.queued.push(frame);
        if self.queued_bytes >= WRITE_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends the queued frames as one write. The watch waits here until the
    /// connection has taken it: a client that stops reading stops its watch
    /// where it is (it falls behind the broadcast, see [`Watcher::follow`]).
    async fn flush(&mut self) -> Result<(), Gone> {
        let events = self.queued.len();
        let write = match events {
            0 => return Ok(()),
            1 => self.queued.pop().unwrap_or_default(),
            _ => {
                let mut joined = BytesMut::with_capacity(self.queued_bytes);
                for frame in self.queued.drain(..) {
                    joined.extend_from_slice(&frame);
                }
                joined.freeze()
            }
        };
        self.queued_bytes = 0;
        let sent = self.out.send(write);
        match self.turn.take() {
            None => sent.await,
            // The turn covers the connection's write too (the kernel's copy
            // of the events is most of the work), but is given up when the
            // client does not take them within TURN_WAIT: one that stops
            // reading would otherwise keep it.
            Some(turn) => {
                tokio::pin!(sent);
                match tokio::time::timeout(TURN_WAIT, &mut sent).await {
                    Ok(()) => {
                        self.turn = Some(turn);
                        // The connection's task would otherwise go on to the
                        // next piece in the same poll, and a whole store sent
                        // in one poll keeps the runtime from its I/O events
                        // (a good client's request among them) for as long.
                        tokio::task::yield_now().await;
                    }
                    Err(_) => {
                        drop(turn);
                        sent.await;
                    }
                }
            }
        }
        self.cache
            .metrics()
            .events_out(self.req.served.kind, events as u64);
        Ok(())
    }
}
