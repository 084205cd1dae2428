//! LIST from the cache: selectors, resourceVersion semantics, consistent pages.

use std::{sync::Arc, time::Duration};

use serde_json::{json, Map, Value};
use sitegrid_apimachinery::{
    continue_token::{next_start, ContinueToken},
    Status,
};

use super::{
    request::{CachedRequest, Format, ListFrom, ListRequest},
    table,
};
use crate::cache::{list_body, Cache, View};

/// How long a list for a not-yet-reached resourceVersion waits (as kube-apiserver's cache does).
pub const RV_WAIT: Duration = Duration::from_secs(3);

/// A list page before rendering.
pub struct Page {
    /// The matching objects of this page, in key order.
    pub items: Vec<Arc<View>>,
    /// `metadata` of the list (resourceVersion, continue, remainingItemCount).
    pub meta: Value,
}

/// Computes a list page.
pub async fn list(cache: &Cache, req: &CachedRequest, list: &ListRequest) -> Result<Page, Status> {
    let prefix = req.key_prefix();
    let (objects, list_rv, start) = snapshot(cache, req, &list.from, &prefix).await?;
    let filter = &list.filter;
    let mut matching = objects
        .into_iter()
        .filter(|v| start.is_empty() || v.key.as_str() >= start.as_str())
        .filter(|v| filter.matches(v));
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(list_rv.to_string()));
    if list.limit == 0 {
        return Ok(Page {
            items: matching.collect(),
            meta: Value::Object(meta),
        });
    }
    let items: Vec<Arc<View>> = matching.by_ref().take(list.limit).collect();
    let remaining = matching.count();
    if let (true, Some(last)) = (remaining > 0, items.last()) {
        let token = ContinueToken {
            rv: list_rv as i64,
            start: next_start(&last.key[prefix.len()..]),
        };
        meta.insert("continue".into(), json!(token.encode()));
        if filter.selects_everything() {
            meta.insert("remainingItemCount".into(), json!(remaining));
        }
    }
    Ok(Page {
        items,
        meta: Value::Object(meta),
    })
}

/// Which objects a list reads, at which version, starting at which key
/// (`""`: from the first): the newest state, the state at a version, or the
/// snapshot an earlier page was read at.
async fn snapshot(
    cache: &Cache,
    req: &CachedRequest,
    from: &ListFrom,
    prefix: &str,
) -> Result<(Vec<Arc<View>>, u64, String), Status> {
    let store = cache.store(req.served.kind);
    match from {
        ListFrom::Continue(token) if token.rv < 0 => {
            // A token from a 410: continue on the current state (inconsistent, as the apiserver warns).
            let (objects, rv) = store.snapshot(prefix);
            Ok((objects, rv, format!("{prefix}{}", token.start)))
        }
        ListFrom::Continue(token) => {
            let rv = token.rv as u64;
            match store.snapshot_at(rv, prefix) {
                Ok(objects) => Ok((objects, rv, format!("{prefix}{}", token.start))),
                Err(_) => Err(expired_continue(&token.start)),
            }
        }
        ListFrom::NotOlderThan(rv) | ListFrom::Exact(rv) => {
            let rv = *rv;
            if rv > cache.current_rv() && !cache.wait_for_rv(rv, RV_WAIT).await {
                return Err(Status::too_large_resource_version(rv, store.last_rv()));
            }
            if !matches!(from, ListFrom::Exact(_)) {
                let (objects, rv) = store.snapshot(prefix);
                return Ok((objects, rv, String::new()));
            }
            match store.snapshot_at(rv, prefix) {
                Ok(objects) => Ok((objects, rv, String::new())),
                Err(_) => Err(Status::expired(
                    "The resourceVersion for the provided list is too old.",
                )),
            }
        }
        ListFrom::Latest => {
            let (objects, rv) = store.snapshot(prefix);
            Ok((objects, rv, String::new()))
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

/// Renders a page in the negotiated format.
pub fn render(cache: &Cache, req: &CachedRequest, page: &Page) -> bytes::Bytes {
    match req.format {
        Format::Json => {
            let bodies: Vec<&bytes::Bytes> = page
                .items
                .iter()
                .map(|v| cache.body(v, req.served).bytes())
                .collect();
            let size = bodies.iter().map(|b| b.len()).sum();
            list_body(req.served, &page.meta, bodies.into_iter(), size)
        }
        Format::Table {
            api_version,
            include,
        } => table::body(
            cache,
            req,
            &page.items,
            page.meta.clone(),
            api_version,
            include,
        ),
    }
}
