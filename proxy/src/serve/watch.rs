//! WATCH from the cache: replay from a resourceVersion, initial state,
//! selector transitions, bookmarks, timeouts, and the lag policy.
//!
//! Each watch is a task feeding a small channel that hyper drains into the
//! response. Frames of shared events are the events' own encoded `Bytes`.
//! Live events come from a bounded broadcast: a watcher that falls more than
//! `watcher_buffer` events behind (a slow client) is ended with a 410 Expired
//! ERROR event so it lists again; it never silently misses an event and never
//! holds up the others.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::StreamBody;
use serde_json::{json, Value};
use sitegrid_apimachinery::{status::StatusCause, table, Status};
use tokio::{
    sync::{broadcast::error::RecvError, mpsc},
    time::{sleep_until, Instant},
};

use super::{
    options::{Filter, Versioning},
    render,
    response::{Body, BoxError},
    route::CachedRequest,
};
use crate::{
    cache::{Cache, Event, EventType, View},
    encode::{watch_frame, watch_frame_value},
    ops::{Metrics, WatchGuard, WatcherHandle, WatcherInfo, WatcherRegistry},
};
use sitegrid_apimachinery::negotiate::Format;

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

/// What a watch listens for and reports to.
#[derive(Clone)]
pub struct WatchContext {
    /// Turns true when the proxy shuts down.
    pub closing: tokio::sync::watch::Receiver<bool>,
    /// Watch counters.
    pub metrics: Arc<Metrics>,
    /// Open watches, for `/debug/cache`.
    pub watchers: Arc<WatcherRegistry>,
}

/// Where a watch starts.
enum Start {
    /// ADDED for every current object first.
    Initial { end_bookmark: bool },
    /// Every event after this version.
    After(u64),
}

/// Validates the request and starts the stream.
pub fn watch(
    cache: Arc<Cache>,
    req: CachedRequest,
    format: Format,
    settings: WatchSettings,
    ctx: WatchContext,
) -> Result<Response<Body>, Status> {
    let filter = Filter::parse(&req)?;
    let start = start_of(&req)?;
    if let Format::Table { .. } = format {
        render::include(&req).map_err(Status::bad_request)?;
    }
    let timeout = req
        .query
        .timeout_seconds
        .map(Duration::from_secs)
        // Without timeoutSeconds kube-apiserver picks 30 to 60 minutes.
        .unwrap_or_else(|| Duration::from_secs(1800 + fastrand::u64(0..1800)));
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let req_plural = req.served.kind.plural();
    let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let (w_namespace, w_labels, w_fields) = (
        req.namespace.clone(),
        nonempty(&req.query.label_selector),
        nonempty(&req.query.field_selector),
    );
    let w = Watcher {
        cache,
        req,
        filter,
        format,
        tx,
        sent_columns: false,
        last_rv: 0,
        deadline: Instant::now() + timeout,
        _open: ctx.metrics.watch_opened(req_plural),
        registered: ctx.watchers.register(WatcherInfo {
            resource: req_plural.to_owned(),
            namespace: w_namespace,
            label_selector: w_labels,
            field_selector: w_fields,
        }),
        metrics: ctx.metrics,
        closing: ctx.closing,
    };
    tokio::spawn(w.run(start, settings));

    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, BoxError>(Frame::data(b)), rx))
    });
    Ok(super::response::json_body(
        StatusCode::OK,
        Body::new(StreamBody::new(stream)),
    ))
}

fn start_of(req: &CachedRequest) -> Result<Start, Status> {
    let q = &req.query;
    let versioning = Versioning::parse(&q.resource_version, "", false)?;
    let mut causes = Vec::new();
    let forbidden = |field: &str, msg: &str| StatusCause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {msg}"),
        field: field.into(),
    };
    match (q.send_initial_events, q.resource_version_match.as_str()) {
        (Some(true), "NotOlderThan") if q.allow_watch_bookmarks => {}
        (Some(true), "NotOlderThan") => causes.push(forbidden(
            "allowWatchBookmarks",
            "allowWatchBookmarks has to be enabled when sendInitialEvents is requested",
        )),
        (Some(_), _) => causes.push(forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
        )),
        (None, "") => {}
        (None, _) => causes.push(forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        )),
    }
    if !causes.is_empty() {
        return Err(Status::invalid("ListOptions", "meta.k8s.io", "", causes));
    }
    Ok(match (q.send_initial_events, versioning.rv) {
        (Some(true), _) => Start::Initial { end_bookmark: true },
        (_, Some(rv)) => Start::After(rv),
        (_, None) => Start::Initial {
            end_bookmark: false,
        },
    })
}

/// One open watch.
struct Watcher {
    cache: Arc<Cache>,
    req: CachedRequest,
    filter: Filter,
    format: Format,
    tx: mpsc::Sender<Bytes>,
    sent_columns: bool,
    /// The newest version this client has been told about.
    last_rv: u64,
    /// When the stream ends (`timeoutSeconds`).
    deadline: Instant,
    /// True once the proxy shuts down.
    closing: tokio::sync::watch::Receiver<bool>,
    /// Counts frames and lagging ends.
    metrics: Arc<Metrics>,
    /// Keeps `watchers_open` up while the watch lives.
    _open: WatchGuard,
    /// This watch in `/debug/cache`, with its progress.
    registered: WatcherHandle,
}

/// The client went away: stop.
struct Gone;

impl Watcher {
    async fn run(mut self, start: Start, settings: WatchSettings) {
        // Either way the stream is over; dropping `tx` ends the response body.
        let _ = self.stream(start, settings).await;
    }

    async fn stream(&mut self, start: Start, settings: WatchSettings) -> Result<(), Gone> {
        let deadline = self.deadline;
        let cache = self.cache.clone();
        let store = cache.store(self.req.served.kind);
        let from = match start {
            Start::After(rv) => Some(rv),
            Start::Initial { .. } => None,
        };
        let mut sub = match store.subscribe(from) {
            Ok(sub) => sub,
            Err(too_old) => {
                let requested = from.unwrap_or(0);
                let status = Status::too_old_resource_version(requested, too_old.compacted_rv);
                return self
                    .send(watch_frame_value("ERROR", &status.to_value()))
                    .await;
            }
        };
        self.last_rv = from.unwrap_or(sub.rv);
        self.registered.set_sent(self.last_rv);
        for view in std::mem::take(&mut sub.initial) {
            if self.filter.matches(&view) {
                let frame = self.frame_for(EventType::Added, &view);
                self.send(frame).await?;
            }
        }
        if let Start::Initial { end_bookmark: true } = start {
            self.bookmark(sub.rv, true).await?;
        }
        for event in std::mem::take(&mut sub.replay) {
            self.deliver(&event).await?;
        }
        let bookmarks = self.req.query.allow_watch_bookmarks;
        let mut next_bookmark = Instant::now() + settings.bookmark_interval;
        loop {
            tokio::select! {
                received = sub.live.recv() => match received {
                    Ok(event) => self.deliver(&event).await?,
                    Err(RecvError::Lagged(n)) => {
                        self.metrics.watcher_lagged(self.req.served.kind.plural());
                        let status = Status::expired(format!(
                            "watch of {} fell {n} events behind and was ended; list again",
                            self.req.served.kind
                        ));
                        return self.send(watch_frame_value("ERROR", &status.to_value())).await;
                    }
                    Err(RecvError::Closed) => return Ok(()),
                },
                _ = sleep_until(next_bookmark), if bookmarks => {
                    next_bookmark = Instant::now() + settings.bookmark_interval;
                    self.bookmark_if_progressed(store.last_rv()).await?;
                }
                _ = sleep_until(deadline) => {
                    if bookmarks {
                        self.bookmark_if_progressed(store.last_rv()).await?;
                    }
                    return Ok(());
                }
                _ = self.tx.closed() => return Err(Gone),
                // Shutting down: end the stream cleanly, as kube-apiserver does; clients re-watch.
                _ = closing(&mut self.closing) => return Ok(()),
            }
        }
    }

    /// Sends one event if the watch's scope and selectors see it, turning a
    /// MODIFIED that crosses the selector boundary into ADDED or DELETED.
    async fn deliver(&mut self, event: &Event) -> Result<(), Gone> {
        if event.rv <= self.last_rv {
            return Ok(());
        }
        // Dealt with, even if the selectors skip it: a quiet filtered watch is not behind.
        self.registered.set_sent(event.rv);
        let now = self.filter.matches(&event.object);
        let before = event.prev.as_ref().is_some_and(|p| self.filter.matches(p));
        let frame = match (event.event_type, before, now) {
            (EventType::Modified, true, false) => {
                // Stopped matching: DELETED with the old content at the new version.
                let gone = event.prev.as_ref().map(|p| p.with_rv(event.rv));
                match gone {
                    Some(g) => self.frame_for(EventType::Deleted, &g),
                    None => return Ok(()),
                }
            }
            (EventType::Modified, false, true) => self.frame_for(EventType::Added, &event.object),
            (_, _, true) => match self.format {
                Format::Json => event.frame(self.req.served),
                Format::Table { .. } => self.frame_for(event.event_type, &event.object),
            },
            _ => return Ok(()),
        };
        self.last_rv = event.rv;
        self.send(frame).await
    }

    fn frame_for(&mut self, event_type: EventType, view: &View) -> Bytes {
        let served = self.req.served;
        match self.format {
            Format::Json => watch_frame(
                event_type.as_str(),
                served,
                view.body(served.kind, served.version),
            ),
            Format::Table { api_version } => {
                let include = render::include(&self.req).unwrap_or(table::IncludeObject::Metadata);
                let row = render::row(&self.req, view, include, api_version);
                // Only the first event of a Table watch carries the columns.
                let t = table::table(
                    served.kind.plural(),
                    api_version,
                    json!({"resourceVersion": view.rv.to_string()}),
                    vec![row],
                    !self.sent_columns,
                );
                self.sent_columns = true;
                watch_frame_value(event_type.as_str(), &t)
            }
        }
    }

    async fn bookmark_if_progressed(&mut self, rv: u64) -> Result<(), Gone> {
        if rv > self.last_rv {
            self.bookmark(rv, false).await?;
        }
        Ok(())
    }

    /// `{"type":"BOOKMARK","object":{"kind":K,"apiVersion":V,"metadata":{"resourceVersion":"N","creationTimestamp":null}}}`.
    async fn bookmark(&mut self, rv: u64, initial_events_end: bool) -> Result<(), Gone> {
        let served = self.req.served;
        let mut metadata =
            json!({"resourceVersion": rv.to_string(), "creationTimestamp": Value::Null});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({"kind": served.kind.kind(), "apiVersion": served.api_version(), "metadata": metadata});
        self.last_rv = self.last_rv.max(rv);
        self.registered.set_sent(self.last_rv);
        self.send(watch_frame_value("BOOKMARK", &object)).await
    }

    /// Queues a frame; a client that stops reading holds the task at most until the deadline.
    async fn send(&self, frame: Bytes) -> Result<(), Gone> {
        match tokio::time::timeout_at(self.deadline, self.tx.send(frame)).await {
            Ok(Ok(())) => {
                self.metrics.events_out(self.req.served.kind.plural(), 1);
                Ok(())
            }
            _ => Err(Gone),
        }
    }
}

/// Resolves when the proxy starts shutting down (never, if nobody can tell it to).
async fn closing(rx: &mut tokio::sync::watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}
