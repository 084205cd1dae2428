//! Egress accounting: what this server sends, so a simulation can measure
//! API-server egress per topology.
//!
//! The handler tags each response to a read of a resource with a [`Tag`]
//! (resource, form, verb); the outermost layer ([`layer`]) wraps the body
//! so that every data frame is counted as it is handed to the connection —
//! after the faults layer rewrote it, so the bytes are those written. Counts
//! are cumulative and lock-free (one set of atomics per resource and form);
//! [`Egress`] is a snapshot of them, read through `ApiServer::egress` or
//! `GET /debug/egress`.
//!
//! Watch bodies are counted per frame: every chunk a watch writes ends a
//! line (`super::watch` writes whole frames), so a chunk's lines are its
//! events, BOOKMARKs counted apart. Responses nobody tagged (discovery,
//! writes, errors before a resource was known) add to `other_bytes`; the
//! debug endpoint's own responses are not counted at all.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};

use super::negotiate::Form;
use super::resource::Resources;
use super::Body;

/// Which kind of read a tagged response answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// A LIST (a collection GET without `watch`).
    List,
    /// A GET of one object.
    Get,
    /// A WATCH stream.
    Watch,
}

/// How a response is counted; the handler puts it in the response's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    /// A read of resource `resource` (its index) in `form`.
    Read {
        /// Index of the resource type.
        resource: usize,
        /// The form of the objects sent.
        form: Form,
        /// List, get or watch.
        verb: Verb,
    },
    /// The egress endpoint itself: not counted, so reading it changes nothing.
    Uncounted,
}

impl Tag {
    /// Put this tag on `resp`.
    pub fn attach(self, mut resp: Response<Body>) -> Response<Body> {
        resp.extensions_mut().insert(self);
        resp
    }
}

/// The live counters of one resource in one form.
#[derive(Debug, Default)]
struct Counters {
    list_bytes: AtomicU64,
    lists: AtomicU64,
    get_bytes: AtomicU64,
    gets: AtomicU64,
    watch_bytes: AtomicU64,
    watch_events: AtomicU64,
    watch_bookmarks: AtomicU64,
    watches_opened: AtomicU64,
    open_watches: AtomicU64,
}

/// Every counter of a server: the one source of truth for egress and open watches.
#[derive(Debug)]
pub(crate) struct Meter {
    /// `Form::ALL.len()` entries per resource, in resource order.
    counters: Vec<Counters>,
    other_bytes: AtomicU64,
}

impl Meter {
    /// Zeroed counters for `resources` resource types.
    pub fn new(resources: usize) -> Self {
        Meter {
            counters: (0..resources * Form::ALL.len())
                .map(|_| Counters::default())
                .collect(),
            other_bytes: AtomicU64::new(0),
        }
    }

    fn at(&self, resource: usize, form: Form) -> Option<&Counters> {
        self.counters.get(resource * Form::ALL.len() + form.index())
    }

    /// Count one more open watch of `resource` in `form` until the guard drops.
    pub fn open_watch(self: &Arc<Self>, resource: usize, form: Form) -> WatchGuard {
        if let Some(c) = self.at(resource, form) {
            c.watches_opened.fetch_add(1, Ordering::Relaxed);
            c.open_watches.fetch_add(1, Ordering::Relaxed);
        }
        WatchGuard {
            meter: Arc::clone(self),
            resource,
            form,
        }
    }

    /// Count one response of `tag` (its body is counted as it is written).
    fn response(&self, tag: Tag) {
        if let Tag::Read {
            resource,
            form,
            verb,
        } = tag
        {
            if let Some(c) = self.at(resource, form) {
                match verb {
                    Verb::List => c.lists.fetch_add(1, Ordering::Relaxed),
                    Verb::Get => c.gets.fetch_add(1, Ordering::Relaxed),
                    // Opened watches are counted by their guard.
                    Verb::Watch => 0,
                };
            }
        }
    }

    /// Count `data`, a chunk of a body of `tag` (`None`: untagged).
    fn data(&self, tag: Option<Tag>, data: &[u8]) {
        let len = data.len() as u64;
        let Some(Tag::Read {
            resource,
            form,
            verb,
        }) = tag
        else {
            if tag.is_none() {
                self.other_bytes.fetch_add(len, Ordering::Relaxed);
            }
            return;
        };
        let Some(c) = self.at(resource, form) else {
            return;
        };
        match verb {
            Verb::List => c.list_bytes.fetch_add(len, Ordering::Relaxed),
            Verb::Get => c.get_bytes.fetch_add(len, Ordering::Relaxed),
            Verb::Watch => {
                let (events, bookmarks) = frames(data);
                c.watch_events.fetch_add(events, Ordering::Relaxed);
                c.watch_bookmarks.fetch_add(bookmarks, Ordering::Relaxed);
                c.watch_bytes.fetch_add(len, Ordering::Relaxed)
            }
        };
    }

    /// The counters now, every served resource present.
    pub fn snapshot(&self, resources: &Resources) -> Egress {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let form = |rt: usize, f: Form| {
            self.at(rt, f)
                .map_or_else(FormEgress::default, |c| FormEgress {
                    list_bytes: load(&c.list_bytes),
                    lists: load(&c.lists),
                    get_bytes: load(&c.get_bytes),
                    gets: load(&c.gets),
                    watch_bytes: load(&c.watch_bytes),
                    watch_events: load(&c.watch_events),
                    watch_bookmarks: load(&c.watch_bookmarks),
                    watches_opened: load(&c.watches_opened),
                    open_watches: load(&c.open_watches),
                })
        };
        let per_resource: BTreeMap<String, ResourceEgress> = resources
            .iter()
            .map(|rt| {
                let e = ResourceEgress {
                    full: form(rt.idx, Form::Full),
                    metadata: form(rt.idx, Form::Metadata),
                    table: form(rt.idx, Form::Table),
                };
                (rt.id.clone(), e)
            })
            .collect();
        let other_bytes = load(&self.other_bytes);
        let total_bytes = other_bytes
            + per_resource
                .values()
                .map(ResourceEgress::bytes)
                .sum::<u64>();
        Egress {
            resources: per_resource,
            other_bytes,
            total_bytes,
        }
    }
}

/// `(events, bookmarks)` among the newline-terminated frames of `data`.
fn frames(data: &[u8]) -> (u64, u64) {
    const BOOKMARK: &[u8] = b"{\"type\":\"BOOKMARK\"";
    let (mut events, mut bookmarks) = (0, 0);
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if line.starts_with(BOOKMARK) {
            bookmarks += 1;
        } else {
            events += 1;
        }
    }
    (events, bookmarks)
}

/// Decrements the open-watch count when the watch stream ends or is dropped.
#[derive(Debug)]
pub(crate) struct WatchGuard {
    meter: Arc<Meter>,
    resource: usize,
    form: Form,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        if let Some(c) = self.meter.at(self.resource, self.form) {
            c.open_watches.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The egress layer: count `resp` by its tag as its body is written.
pub(crate) fn layer(meter: &Arc<Meter>, resp: Response<Body>) -> Response<Body> {
    let tag = resp.extensions().get::<Tag>().copied();
    if tag == Some(Tag::Uncounted) {
        return resp;
    }
    if let Some(tag) = tag {
        meter.response(tag);
    }
    resp.map(|inner| {
        Counted {
            inner,
            meter: Arc::clone(meter),
            tag,
        }
        .boxed_unsync()
    })
}

/// A body whose data frames are counted as they are polled.
struct Counted {
    inner: Body,
    meter: Arc<Meter>,
    tag: Option<Tag>,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.meter.data(self.tag, data);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // Kept, so that hyper still sends Content-Length where it did.
        self.inner.size_hint()
    }
}

/// What the server has sent since it started: a snapshot of its counters.
///
/// As JSON (`GET /debug/egress`), keys in camelCase:
/// `{"resources":{"nodes":{"full":{"listBytes":…,"lists":…,"getBytes":…,
/// "gets":…,"watchBytes":…,"watchEvents":…,"watchBookmarks":…,
/// "watchesOpened":…,"openWatches":…},"metadata":{…},"table":{…}},…},
/// "otherBytes":…,"totalBytes":…}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Egress {
    /// Per resource id (`nodes`, `endpointslices`, `events.events.k8s.io`),
    /// every served resource present.
    pub resources: BTreeMap<String, ResourceEgress>,
    /// Body bytes of every other response: discovery, writes, `/version`,
    /// errors for paths that name no resource.
    pub other_bytes: u64,
    /// Every body byte sent: `other_bytes` plus every resource's bytes.
    pub total_bytes: u64,
}

/// One resource's egress, per form of its objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEgress {
    /// Whole objects (plain JSON).
    pub full: FormEgress,
    /// `PartialObjectMetadata` (`as=PartialObjectMetadata[List]`).
    pub metadata: FormEgress,
    /// Server-side Tables (kubectl).
    pub table: FormEgress,
}

impl ResourceEgress {
    /// Body bytes sent in every form.
    pub fn bytes(&self) -> u64 {
        self.full.bytes() + self.metadata.bytes() + self.table.bytes()
    }

    /// Watches open now, in every form.
    pub fn open_watches(&self) -> u64 {
        self.full.open_watches + self.metadata.open_watches + self.table.open_watches
    }
}

/// Cumulative counts of one resource in one form (bytes are response body
/// bytes as written, errors included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FormEgress {
    /// Body bytes of LIST responses.
    pub list_bytes: u64,
    /// LIST responses.
    pub lists: u64,
    /// Body bytes of GET responses (one object).
    pub get_bytes: u64,
    /// GET responses.
    pub gets: u64,
    /// Bytes written on watch streams.
    pub watch_bytes: u64,
    /// Watch events written (ADDED, MODIFIED, DELETED, ERROR).
    pub watch_events: u64,
    /// BOOKMARK events written.
    pub watch_bookmarks: u64,
    /// Watch streams started.
    pub watches_opened: u64,
    /// Watch streams open now.
    pub open_watches: u64,
}

impl FormEgress {
    /// Body bytes of lists, gets and watches.
    pub fn bytes(&self) -> u64 {
        self.list_bytes + self.get_bytes + self.watch_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_counted_by_type() {
        let chunk = b"{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"BOOKMARK\",\"object\":{}}\n{\"type\":\"DELETED\",\"object\":{}}\n";
        assert_eq!(frames(chunk), (2, 1));
        assert_eq!(frames(b""), (0, 0));
    }
}
