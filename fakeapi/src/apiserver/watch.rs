//! WATCH: newline-delimited JSON events, as kube-apiserver 1.20 streams them,
//! of whole objects, of their metadata only or as Tables, or length-prefixed
//! protobuf events of whole objects ([`Objects`]); on releases with
//! the WatchList gate, also watch-list requests (`sendInitialEvents=true`):
//! the current objects as ADDED, then a BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"` at the state's resourceVersion, then
//! the changes ([`Start`]).
//!
//! Lag policy: live events arrive through a bounded broadcast channel per
//! resource type; writers never wait. A watcher that falls more than the
//! channel's capacity behind has its stream ended (as kube-apiserver closes
//! unresponsive watchers); the client re-watches from the last resourceVersion
//! it saw, which the history replays, or gets `410` and relists.

use std::convert::Infallible;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;
use sitegrid_apimachinery::protobuf::{self, Kind};
use sitegrid_apimachinery::Status;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::egress::WatchGuard;
use super::filter::Filter;
use super::metadata;
use super::negotiate::Form;
use super::object::{bookmark_metadata, encode_typed, random_u64, Obj, INITIAL_EVENTS_END};
use super::query::{ListOptions, ReadAt};
use super::resource::ResourceType;
use super::store::{encode_frame, Event, EventType};
use super::table::TableRequest;
use super::version::Profile;
use super::{Body, Shared};

/// How a watch sends its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Objects {
    /// Whole objects with kind and apiVersion.
    Full,
    /// Whole objects in protobuf (`;stream=watch`), as this message.
    Protobuf(Kind),
    /// `PartialObjectMetadata`.
    Metadata,
    /// One Table per event (`kubectl get --watch`); only the first carries
    /// the column definitions, as kube-apiserver's watch encoder sends them.
    Table {
        request: TableRequest,
        columns_sent: bool,
    },
}

impl Objects {
    /// A Table watch answering `request`.
    pub(crate) fn table(request: TableRequest) -> Objects {
        Objects::Table {
            request,
            columns_sent: false,
        }
    }

    /// The form egress is counted in.
    pub(crate) fn form(self) -> Form {
        match self {
            Objects::Full | Objects::Protobuf(_) => Form::Full,
            Objects::Metadata => Form::Metadata,
            Objects::Table { .. } => Form::Table,
        }
    }

    /// The frame of event type `ty` carrying `obj`.
    fn frame(&mut self, ty: &str, rt: &ResourceType, obj: &Obj) -> Bytes {
        match self {
            Objects::Full => encode_frame(ty, rt, obj),
            Objects::Protobuf(kind) => protobuf_frame(ty, rt, *kind, obj),
            Objects::Metadata => metadata::frame(ty, obj),
            Objects::Table { .. } => {
                let mut out = Vec::new();
                self.push_frame(ty, rt, obj, &mut out);
                Bytes::from(out)
            }
        }
    }

    /// Append the frame of event type `ty` carrying `obj`.
    fn push_frame(&mut self, ty: &str, rt: &ResourceType, obj: &Obj, out: &mut Vec<u8>) {
        match self {
            Objects::Full => push_json_event(ty, out, |out| obj.encode_typed(rt, out)),
            Objects::Protobuf(kind) => out.extend_from_slice(&protobuf_frame(ty, rt, *kind, obj)),
            Objects::Metadata => push_json_event(ty, out, |out| metadata::push_object(obj, out)),
            Objects::Table {
                request,
                columns_sent,
            } => {
                push_json_event(ty, out, |out| {
                    request.push_event_table(rt, obj, !*columns_sent, out)
                });
                *columns_sent = true;
            }
        }
    }

    /// The frame of `ev` as it happened, shared by every watcher of this form
    /// (Tables are per watcher: their rows carry the age at sending).
    fn shared_frame(&mut self, rt: &ResourceType, ev: &Event) -> Bytes {
        match self {
            Objects::Full => ev.frame.clone(),
            Objects::Protobuf(kind) => {
                let kind = *kind;
                ev.protobuf_frame(|ev| protobuf_frame(ev.ty.as_str(), rt, kind, &ev.object))
            }
            Objects::Metadata => ev.meta_frame(|ev| metadata::frame(ev.ty.as_str(), &ev.object)),
            Objects::Table { .. } => self.frame(ev.ty.as_str(), rt, &ev.object),
        }
    }

    /// The ERROR frame carrying `status`, in this watch's encoding.
    fn error_frame(&self, status: &Status) -> Bytes {
        match self {
            Objects::Protobuf(_) => protobuf_error_frame(status),
            _ => error_frame(status),
        }
    }

    /// A BOOKMARK frame at `rv` (the end of the initial events: `end`); in
    /// a Table watch, a Table without rows at `rv`.
    fn bookmark(
        &self,
        rt: &ResourceType,
        rv: u64,
        null_creation_timestamp: bool,
        end: bool,
    ) -> Bytes {
        let metadata = || bookmark_metadata(rv, null_creation_timestamp, end);
        match self {
            Objects::Full => bookmark_frame(rt, &metadata()),
            Objects::Protobuf(kind) => {
                let annotations = end
                    .then(|| (INITIAL_EVENTS_END.to_owned(), "true".to_owned()))
                    .into_iter()
                    .collect();
                let object = protobuf::bookmark(
                    *kind,
                    &rt.api_version,
                    rt.kind,
                    &rv.to_string(),
                    &annotations,
                );
                protobuf::watch_event("BOOKMARK", &object)
            }
            Objects::Metadata => metadata::bookmark_frame(&metadata()),
            Objects::Table { request, .. } => {
                let mut out = b"{\"type\":\"BOOKMARK\",\"object\":".to_vec();
                request.push_bookmark_table(rv, &mut out);
                out.extend_from_slice(b"}\n");
                Bytes::from(out)
            }
        }
    }
}

/// Encode a BOOKMARK frame whose object has `metadata`.
fn bookmark_frame(rt: &ResourceType, metadata: &str) -> Bytes {
    let mut out = Vec::with_capacity(160);
    out.extend_from_slice(b"{\"type\":\"BOOKMARK\",\"object\":");
    let body = format!("{{\"metadata\":{metadata}}}");
    encode_typed(rt.kind, &rt.api_version, body.as_bytes(), &mut out);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// A protobuf frame of event type `ty` carrying `obj` as `kind`'s message;
/// an ERROR frame if the object does not encode.
fn protobuf_frame(ty: &str, rt: &ResourceType, kind: Kind, obj: &Obj) -> Bytes {
    match obj.envelope(rt, kind) {
        Ok(envelope) => protobuf::watch_event(ty, &envelope),
        Err(status) => protobuf_error_frame(&status),
    }
}

/// A protobuf ERROR frame carrying `status`.
fn protobuf_error_frame(status: &Status) -> Bytes {
    protobuf::watch_event("ERROR", &protobuf::status(status))
}

/// Append `{"type":T,"object":<what push_object writes>}\n`.
fn push_json_event(ty: &str, out: &mut Vec<u8>, push_object: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    push_object(out);
    out.extend_from_slice(b"}\n");
}

/// Encode an ERROR frame carrying `status`.
fn error_frame(status: &Status) -> Bytes {
    let mut out = b"{\"type\":\"ERROR\",\"object\":".to_vec();
    let mut json = status.to_json();
    json.pop(); // the trailing newline
    out.extend_from_slice(&json);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// The frame `filter`'s view of `ev` produces, if any, its objects as
/// `objects` says. With selectors, an object that stops matching is DELETED
/// (old content, new resourceVersion) and one that starts matching is ADDED
/// (reference §5).
fn frame_for(
    rt: &ResourceType,
    filter: &Filter,
    objects: &mut Objects,
    ev: &Event,
) -> Option<Bytes> {
    if let Some(ns) = &filter.namespace {
        if &ev.object.namespace != ns {
            return None;
        }
    }
    if !filter.has_selectors() {
        return Some(objects.shared_frame(rt, ev));
    }
    let now = filter.matches(&ev.object);
    let before = ev.prev.as_deref().is_some_and(|p| filter.matches(p));
    match (ev.ty, before, now) {
        (EventType::Added, _, true)
        | (EventType::Deleted, _, true)
        | (EventType::Modified, true, true) => Some(objects.shared_frame(rt, ev)),
        (EventType::Modified, false, true) => Some(objects.frame("ADDED", rt, &ev.object)),
        (EventType::Modified, true, false) => ev
            .prev
            .as_deref()
            .map(|p| objects.frame("DELETED", rt, &p.at_rv(ev.rv))),
        _ => None,
    }
}

/// One open watch stream.
struct Watcher {
    shared: Arc<Shared>,
    rt: ResourceType,
    filter: Filter,
    objects: Objects,
    phase: Phase,
    rx: broadcast::Receiver<Arc<Event>>,
    deadline: Instant,
    bookmarks: Option<Interval>,
    /// Live events at or below this resourceVersion are not sent (already
    /// replayed, or older than a future start version the client asked for).
    after: u64,
    /// The resourceVersion the client has been told about last.
    last_sent: u64,
    /// Whether bookmark objects carry `creationTimestamp: null`.
    null_creation_timestamp: bool,
    disconnect: tokio::sync::watch::Receiver<u64>,
    _open: WatchGuard,
}

/// Where a watch stream is.
enum Phase {
    /// The initial frames (synthetic ADDED, replayed history) are still to be
    /// sent; then `Live`.
    Initial(Bytes),
    /// A single ERROR frame is still to be sent; then `Done`.
    Error(Bytes),
    /// Forward live events and bookmarks until the deadline, a disconnect,
    /// lag, or the client going away.
    Live,
    /// The stream has ended.
    Done,
}

impl Watcher {
    /// The next chunk of the body, or `None` at the end of the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            match std::mem::replace(&mut self.phase, Phase::Live) {
                Phase::Initial(b) if b.is_empty() => continue,
                Phase::Initial(b) => return Some(b),
                Phase::Error(b) => {
                    self.phase = Phase::Done;
                    return Some(b);
                }
                Phase::Done => {
                    self.phase = Phase::Done;
                    return None;
                }
                Phase::Live => {}
            }
            let bookmarks = &mut self.bookmarks;
            let tick = async move {
                match bookmarks {
                    Some(i) => {
                        i.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let step = tokio::select! {
                biased;
                _ = self.disconnect.changed() => Step::End,
                _ = tokio::time::sleep_until(self.deadline) => Step::End,
                r = self.rx.recv() => match r {
                    Ok(ev) => Step::Event(ev),
                    // Lagged: end the stream (see the module doc); Closed: server gone.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => Step::End,
                },
                _ = tick => Step::Bookmark,
            };
            match step {
                Step::End => {
                    self.phase = Phase::Done;
                    return None;
                }
                Step::Event(ev) if ev.rv <= self.after => {}
                Step::Event(ev) => {
                    if let Some(frame) = frame_for(&self.rt, &self.filter, &mut self.objects, &ev) {
                        self.last_sent = self.last_sent.max(ev.rv);
                        return Some(frame);
                    }
                }
                Step::Bookmark => {
                    // Only when every event up to the global rv has reached this
                    // watcher (events are published under the store lock).
                    let rx = &self.rx;
                    let rv = self.shared.store.read(|s| rx.is_empty().then_some(s.rv));
                    if let Some(rv) = rv.filter(|rv| *rv > self.last_sent) {
                        self.last_sent = rv;
                        let null_ts = self.null_creation_timestamp;
                        return Some(self.objects.bookmark(&self.rt, rv, null_ts, false));
                    }
                }
            }
        }
    }
}

/// Where a watch begins, decided from its options before the store is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Synthetic ADDED for every current object, then the changes (a watch
    /// from "" or "0" without watch-list semantics; nothing marks the end).
    Current,
    /// Watch-list: the current objects (at least at `at_least`, else the
    /// 504 ERROR frame) as ADDED, then, if `end_bookmark`, the BOOKMARK that
    /// marks the end of the initial events, then the changes.
    InitialEvents { at_least: u64, end_bookmark: bool },
    /// The events after this resourceVersion (410 ERROR frame if older than
    /// the history), then the changes.
    After(u64),
    /// Only the changes from now on (`sendInitialEvents=false` from "" or "0").
    Now,
}

impl Start {
    /// The start `opts` ask for on `profile`. 1.20 refuses watch-list
    /// requests with this server's long-standing 400; later releases have
    /// validated the options already (`super::query::ListOptions::validate`).
    fn of(profile: Profile, opts: &ListOptions) -> Result<Start, Status> {
        if !profile.validates_watch_list_options() {
            if opts.legacy_send_initial_events() {
                return Err(Status::bad_request(
                    "sendInitialEvents is not supported by this server",
                ));
            }
            return Ok(match opts.read_at()? {
                ReadAt::Latest | ReadAt::Any => Start::Current,
                ReadAt::NotOlderThan(n) | ReadAt::Exact(n) => Start::After(n),
            });
        }
        let rv = opts.resource_version_number()?;
        Ok(match (opts.send_initial_events(), rv) {
            // The cacher's isListWatchRequest: the end bookmark needs
            // allowWatchBookmarks as well.
            (Some(true), rv) => Start::InitialEvents {
                at_least: rv.unwrap_or(0),
                end_bookmark: opts.allow_bookmarks,
            },
            (Some(false), None | Some(0)) => Start::Now,
            (None, None | Some(0)) => Start::Current,
            (_, Some(n)) => Start::After(n),
        })
    }
}

/// How a watch starts, decided under the store lock.
enum Begin {
    /// Synthetic ADDED for these objects at this version, then events after
    /// it; the initial-events-end bookmark after them if asked.
    Current(Vec<Arc<Obj>>, u64, bool),
    /// Replay these events (all after the version asked for).
    Replay(Vec<Arc<Event>>, u64),
    /// The version asked for (first) is older than the history floor (second).
    TooOld(u64, u64),
    /// The state asked for (first) is newer than the current one (second).
    TooLarge(u64, u64),
}

/// What woke a live watcher.
enum Step {
    End,
    Event(Arc<Event>),
    Bookmark,
}

/// Start a watch of `rt` through `filter`, sending `objects`; the body
/// streams until it ends.
pub(crate) fn watch(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    filter: Filter,
    mut objects: Objects,
    opts: &ListOptions,
) -> Result<Body, Status> {
    let profile = shared.profile;
    let start = Start::of(profile, opts)?;
    // Under the lock only take references and subscribe (so no event falls in
    // between); encode after releasing it.
    let store = &shared.store;
    let (begin, rx) = store.read(|s| {
        let rx = store.subscribe(rt);
        let current = |end: bool| {
            let prefix = filter.key_prefix();
            let objs: Vec<Arc<Obj>> = s.objects[rt.idx]
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(&prefix))
                .map(|(_, o)| Arc::clone(o))
                .collect();
            Begin::Current(objs, s.rv, end)
        };
        let begin = match start {
            Start::Current => current(false),
            Start::InitialEvents { at_least, .. } if at_least > s.rv => {
                Begin::TooLarge(at_least, s.rv)
            }
            Start::InitialEvents { end_bookmark, .. } => current(end_bookmark),
            Start::Now => Begin::Replay(Vec::new(), s.rv),
            Start::After(n) if n < s.floor => Begin::TooOld(n, s.floor),
            Start::After(n) => Begin::Replay(s.events_after(rt.idx, n).cloned().collect(), n),
        };
        (begin, rx)
    });
    let null_creation_timestamp = profile.null_creation_timestamp();
    let (phase, after) = match begin {
        Begin::Current(objs, rv, end) => {
            let mut out = Vec::new();
            for obj in objs.iter().filter(|o| filter.matches(o)) {
                objects.push_frame("ADDED", rt, obj, &mut out);
            }
            if end {
                out.extend_from_slice(&objects.bookmark(rt, rv, null_creation_timestamp, true));
            }
            (Phase::Initial(Bytes::from(out)), rv)
        }
        Begin::TooOld(n, floor) => {
            let status = Status::too_old_resource_version(n, floor);
            (Phase::Error(objects.error_frame(&status)), n)
        }
        Begin::TooLarge(n, current) => {
            let status = Status::too_large_resource_version(n, current);
            (Phase::Error(objects.error_frame(&status)), n)
        }
        Begin::Replay(events, n) => {
            let mut out = Vec::new();
            for frame in events
                .iter()
                .filter_map(|ev| frame_for(rt, &filter, &mut objects, ev))
            {
                out.extend_from_slice(&frame);
            }
            // Events up to the newest replayed one have been delivered.
            let seen = events.last().map_or(n, |ev| ev.rv.max(n));
            (Phase::Initial(Bytes::from(out)), seen)
        }
    };
    let timeout = match opts.timeout_seconds {
        Some(secs) if secs > 0 => Duration::from_secs(secs),
        // kube-apiserver picks a random timeout between 30 and 60 minutes.
        _ => Duration::from_secs(1800 + random_u64() % 1800),
    };
    let interval = shared
        .config
        .bookmark_interval
        .max(Duration::from_millis(1));
    let bookmarks = opts.allow_bookmarks.then(|| {
        let mut i = tokio::time::interval_at(Instant::now() + interval, interval);
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        i
    });
    let watcher = Watcher {
        shared: Arc::clone(shared),
        rt: rt.clone(),
        filter,
        objects,
        phase,
        rx,
        deadline: Instant::now() + timeout,
        bookmarks,
        after,
        last_sent: after,
        null_creation_timestamp,
        disconnect: shared.disconnect.subscribe(),
        _open: shared.egress.open_watch(rt.idx, objects.form()),
    };
    let stream = futures::stream::unfold(watcher, |mut w| async move {
        let chunk = w.next_chunk().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), w))
    });
    Ok(StreamBody::new(stream.boxed()).boxed_unsync())
}

#[cfg(test)]
mod tests {
    use super::super::resource::Resources;
    use super::super::version::Profile;
    use super::*;

    #[test]
    fn frames() {
        let r = Resources::new(&Profile::v1_20("v1beta1"));
        let es = r.by_id("endpointslices").unwrap();
        assert_eq!(
            bookmark_frame(es, &bookmark_metadata(434, true, false)),
            Bytes::from_static(
                b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1beta1\",\"metadata\":{\"resourceVersion\":\"434\",\"creationTimestamp\":null}}}\n"
            )
        );
        let e = error_frame(&Status::too_old_resource_version(1, 446));
        assert_eq!(
            std::str::from_utf8(&e).unwrap(),
            "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1 (446)\",\"reason\":\"Expired\",\"code\":410}}\n"
        );
        // 1.35 writes no null creationTimestamp; the watch-list's end is annotated.
        assert_eq!(
            std::str::from_utf8(&bookmark_frame(es, &bookmark_metadata(7, false, true))).unwrap(),
            "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"EndpointSlice\",\"apiVersion\":\"discovery.k8s.io/v1beta1\",\"metadata\":{\"resourceVersion\":\"7\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
        );
    }

    #[test]
    fn starts() {
        let start = |p: Profile, q: &str| Start::of(p, &ListOptions::parse(q).unwrap());
        let old = Profile::v1_20("v1");
        assert_eq!(start(old, "watch=1&resourceVersion=0"), Ok(Start::Current));
        assert_eq!(start(old, "watch=1&resourceVersion=5"), Ok(Start::After(5)));
        assert_eq!(
            start(old, "watch=1&sendInitialEvents=true")
                .unwrap_err()
                .code,
            400
        );
        let new = Profile {
            version: super::super::version::KubernetesVersion::V1_35,
            ..old
        };
        let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        assert_eq!(
            start(
                new,
                &format!("{wl}&allowWatchBookmarks=true&resourceVersion=4")
            ),
            Ok(Start::InitialEvents {
                at_least: 4,
                end_bookmark: true
            })
        );
        assert_eq!(
            start(new, wl),
            Ok(Start::InitialEvents {
                at_least: 0,
                end_bookmark: false
            })
        );
        assert_eq!(
            start(
                new,
                "watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
            ),
            Ok(Start::Now)
        );
        assert_eq!(start(new, "watch=1&resourceVersion=9"), Ok(Start::After(9)));
    }
}
