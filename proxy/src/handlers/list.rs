//! LIST from the cache: selectors, resourceVersion semantics, consistent pages.

use std::{sync::Arc, time::Duration};

use bytes::BytesMut;
use serde_json::{json, Map, Value};
use sitegrid_apimachinery::{
    continue_token::{next_start, ContinueToken},
    protobuf, Status,
};

use super::{
    metadata,
    request::{CachedRequest, Format, ListFrom, ListRequest},
    table,
};
use crate::http::{
    framed::{Items, Join},
    Framed,
};
use sitegrid_cache::{json as json_wire, lists::ListKey, Cache, Packed, Served, View, Wire};

/// How long a list for a not-yet-reached resourceVersion waits (as kube-apiserver's cache does).
pub const RV_WAIT: Duration = Duration::from_secs(3);

/// A list page before rendering.
pub struct Page {
    /// The matching objects of this page, in key order.
    pub items: Vec<Arc<View>>,
    /// The list's `metadata`.
    pub meta: PageMeta,
}

/// A list's `metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageMeta {
    /// The version the list was read at.
    pub rv: u64,
    /// The token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// How many items the following pages hold (unfiltered lists only).
    pub remaining: Option<u64>,
}

impl PageMeta {
    /// As JSON, in kube-apiserver's field order.
    pub fn to_json(&self) -> Value {
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), json!(self.rv.to_string()));
        if let Some(token) = &self.continue_token {
            meta.insert("continue".into(), json!(token));
        }
        if let Some(n) = self.remaining {
            meta.insert("remainingItemCount".into(), json!(n));
        }
        Value::Object(meta)
    }

    /// As protobuf (`selfLink` and `continue` written even when empty, as Go does).
    fn to_protobuf(&self) -> protobuf::ListMeta {
        protobuf::list_meta(
            &self.rv.to_string(),
            self.continue_token.as_deref().unwrap_or(""),
            self.remaining.map(|n| n as i64),
        )
    }
}

/// Answers a LIST. A whole list (no page limit, from the newest state) in
/// JSON or protobuf asked more than once at a version of its kind is made
/// once and its chunks shared by every LIST asking the same at that version
/// ([`sitegrid_cache::lists`]); any other, and the first, is computed and
/// sent as it is made.
pub async fn respond(
    cache: &Cache,
    req: &CachedRequest,
    list: &ListRequest,
) -> Result<Framed, Status> {
    // This request's page, sent as it is made.
    let own = || async { render(cache, req, self::list(cache, req, list).await?) };
    let Some(key) = shared_key(req, list) else {
        return own().await;
    };
    // Waited for before the list is looked up, so that the one found is
    // of a version at least as new.
    if let ListFrom::NotOlderThan(rv) = list.from {
        reach(cache, req, rv).await?;
    }
    let Some(shared) = cache.store(req.served.kind).shared_list(key) else {
        cache.metrics().list_answered(req.served.kind, false);
        return own().await;
    };
    let mut made_here = false;
    let chunks = shared
        .get_or_try_init(|| async {
            made_here = true;
            own()
                .await?
                .make()
                .await
                .ok_or_else(|| Status::internal_error("a list item could not be written"))
        })
        .await?;
    cache.metrics().list_answered(req.served.kind, !made_here);
    Ok(Framed::made(chunks.clone()))
}

/// What identifies `list`'s bytes when they can be shared: a whole list of
/// the newest state in a wire format the cache encodes (a Table or
/// metadata-only list is made for its request).
fn shared_key(req: &CachedRequest, list: &ListRequest) -> Option<ListKey> {
    let wire = match req.format {
        Format::Json => Wire::Json,
        Format::Protobuf => Wire::Protobuf,
        _ => return None,
    };
    if list.limit != 0 || !matches!(list.from, ListFrom::Latest | ListFrom::NotOlderThan(_)) {
        return None;
    }
    let (label, field) = list.filter.raw_selectors();
    Some(ListKey {
        served: req.served,
        wire,
        prefix: req.key_prefix(),
        label_selector: label.to_owned(),
        field_selector: field.to_owned(),
    })
}

/// Waits (up to [`RV_WAIT`]) until the cache has reached `rv`; 504 with
/// kube-apiserver's "Too large resource version" otherwise.
async fn reach(cache: &Cache, req: &CachedRequest, rv: u64) -> Result<(), Status> {
    if rv > cache.current_rv() && !cache.wait_for_rv(rv, RV_WAIT).await {
        let last = cache.store(req.served.kind).last_rv();
        return Err(Status::too_large_resource_version(rv, last));
    }
    Ok(())
}

/// Computes a list page.
pub async fn list(cache: &Cache, req: &CachedRequest, list: &ListRequest) -> Result<Page, Status> {
    let prefix = req.key_prefix();
    let (objects, list_rv, start) = snapshot(cache, req, &list.from, &prefix).await?;
    let filter = &list.filter;
    let keep = |v: &Arc<View>| {
        (start.is_empty() || v.key() >= start.as_str()) && filter.matches(cache.codec(), v)
    };
    let mut meta = PageMeta {
        rv: list_rv,
        ..PageMeta::default()
    };
    // A whole list read for this request alone is filtered where it is, not
    // into a second vector of reference counts; when nothing narrows it (the
    // snapshot holds exactly the namespace's scope), not even read: a
    // cluster-wide list without selectors, as kube-proxy's, then touches no
    // object before its first byte is sent.
    let objects = match objects {
        Objects::Read(mut all) if list.limit == 0 => {
            if !(start.is_empty() && filter.selects_everything()) {
                all.retain(keep);
            }
            return Ok(Page { items: all, meta });
        }
        other => other,
    };
    let limit = if list.limit == 0 {
        usize::MAX
    } else {
        list.limit
    };
    let mut matching = objects.as_slice().iter().filter(|v| keep(v)).cloned();
    let items: Vec<Arc<View>> = matching.by_ref().take(limit).collect();
    let remaining = matching.count();
    if let (true, Some(last)) = (remaining > 0, items.last()) {
        // Its later pages read these objects, whatever the log still reaches.
        cache
            .store(req.served.kind)
            .pin(list_rv, &prefix, objects.into_pin());
        let token = ContinueToken {
            rv: list_rv as i64,
            start: next_start(&last.key()[prefix.len()..]),
        };
        meta.continue_token = Some(token.encode());
        if filter.selects_everything() {
            meta.remaining = Some(remaining as u64);
        }
    }
    Ok(Page { items, meta })
}

/// The objects a list page is read from: read for it, or kept since an
/// earlier page of the same list (see `Store::pin`).
enum Objects {
    Read(Vec<Arc<View>>),
    Pinned(Arc<[Arc<View>]>),
}

impl Objects {
    fn as_slice(&self) -> &[Arc<View>] {
        match self {
            Self::Read(v) => v,
            Self::Pinned(p) => p,
        }
    }

    /// To keep for the list's next pages (copied once, when a list first
    /// hands out a continue token).
    fn into_pin(self) -> Arc<[Arc<View>]> {
        match self {
            Self::Read(v) => v.into(),
            Self::Pinned(p) => p,
        }
    }
}

/// Which objects a list reads, at which version, starting at which key
/// (`""`: from the first): the newest state, the state at a version, or the
/// snapshot an earlier page was read at.
async fn snapshot(
    cache: &Cache,
    req: &CachedRequest,
    from: &ListFrom,
    prefix: &str,
) -> Result<(Objects, u64, String), Status> {
    let store = cache.store(req.served.kind);
    match from {
        ListFrom::Continue(token) if token.rv < 0 => {
            // A token from a 410: continue on the current state (inconsistent, as the apiserver warns).
            let (objects, rv) = store.snapshot(prefix);
            Ok((
                Objects::Read(objects),
                rv,
                format!("{prefix}{}", token.start),
            ))
        }
        ListFrom::Continue(token) => {
            let rv = token.rv as u64;
            if let Some(objects) = store.pinned(rv, prefix) {
                return Ok((
                    Objects::Pinned(objects),
                    rv,
                    format!("{prefix}{}", token.start),
                ));
            }
            match store.snapshot_at(rv, prefix) {
                Ok(objects) => Ok((
                    Objects::Read(objects),
                    rv,
                    format!("{prefix}{}", token.start),
                )),
                Err(_) => Err(expired_continue(&token.start)),
            }
        }
        ListFrom::NotOlderThan(rv) | ListFrom::Exact(rv) => {
            let rv = *rv;
            reach(cache, req, rv).await?;
            if !matches!(from, ListFrom::Exact(_)) {
                let (objects, rv) = store.snapshot(prefix);
                return Ok((Objects::Read(objects), rv, String::new()));
            }
            match store.snapshot_at(rv, prefix) {
                Ok(objects) => Ok((Objects::Read(objects), rv, String::new())),
                Err(_) => Err(Status::expired(
                    "The resourceVersion for the provided list is too old.",
                )),
            }
        }
        ListFrom::Latest => {
            let (objects, rv) = store.snapshot(prefix);
            Ok((Objects::Read(objects), rv, String::new()))
        }
    }
}

/// 410 for a continue token whose snapshot is gone, with a fresh token that
/// continues on the current state (as kube-apiserver does).
fn expired_continue(start: &str) -> Status {
    let mut s = Status::expired(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    );
    s.metadata.continue_ = Some(
        ContinueToken {
            rv: -1,
            start: start.to_owned(),
        }
        .encode(),
    );
    s
}

/// Renders a page in the negotiated format: the items' shared encodings
/// inside the list's frame, each unpacked as the connection takes its chunk
/// (see [`Framed`]), or a Table.
pub fn render(cache: &Cache, req: &CachedRequest, page: Page) -> Result<Framed, Status> {
    let served = req.served;
    Ok(match req.format {
        Format::Json => {
            let (head, tail) = json_wire::list_frame(served, &page.meta.to_json());
            let lens = page
                .items
                .iter()
                .map(|v| cache.body(v, served).len())
                .collect();
            let items = Bodies {
                cache: cache.clone(),
                served,
                views: page.items,
                lens,
                wire: Wire::Json,
            };
            Framed::new(head, items, tail, Join::Comma)
        }
        Format::Protobuf => {
            // Every message encoded (or found encoded) before anything is
            // sent: one that cannot be is a 500, not a response cut short.
            let lens = page
                .items
                .iter()
                .map(|v| cache.packed_message(v, served).map(Packed::len))
                .collect::<Result<Vec<usize>, _>>()
                .map_err(|e| Status::internal_error(e.to_string()))?;
            let frame = protobuf::ListFrame::new(
                served.api_version(),
                served.list_kind(),
                &page.meta.to_protobuf(),
                lens.iter().copied(),
            );
            let items = Bodies {
                cache: cache.clone(),
                served,
                views: page.items,
                lens,
                wire: Wire::Protobuf,
            };
            Framed::new(frame.head, items, frame.tail, Join::Protobuf)
        }
        Format::Metadata { list: false } => return Err(metadata::not_an_object(served.kind)),
        Format::Metadata { list: true } => Framed::whole(metadata::list(
            cache,
            &page.items,
            served,
            page.meta.to_json(),
        )),
        Format::Table {
            api_version,
            include,
        } => Framed::whole(table::body(
            cache,
            req,
            &page.items,
            page.meta.to_json(),
            api_version,
            include,
        )),
    })
}

/// A page's items as their JSON bodies or protobuf messages, kept packed in
/// the cache's views and unpacked straight into the chunk each is sent in.
struct Bodies {
    cache: Cache,
    served: Served,
    views: Vec<Arc<View>>,
    /// Each item's length, read once (the body's length is announced first,
    /// and each chunk is measured before it is made).
    lens: Vec<usize>,
    wire: Wire,
}

impl Bodies {
    /// Item `index` as the view keeps it (a protobuf message was encoded
    /// when the page was rendered, so this finds it).
    fn packed(&self, index: usize) -> Option<&Packed> {
        let view = &self.views[index];
        match self.wire {
            Wire::Json => Some(self.cache.body(view, self.served).packed()),
            Wire::Protobuf => self.cache.packed_message(view, self.served).ok(),
        }
    }
}

impl Items for Bodies {
    fn count(&self) -> usize {
        self.views.len()
    }

    fn len(&self, index: usize) -> usize {
        self.lens[index]
    }

    fn write(&self, index: usize, out: &mut BytesMut) -> bool {
        let Some(packed) = self.packed(index) else {
            return false;
        };
        packed.unpack_into(out);
        true
    }
}
