//! LIST from the cache: selectors, resourceVersion semantics, consistent pages.

use std::{sync::Arc, time::Duration};

use serde_json::{json, Map, Value};
use sitegrid_apimachinery::{
    continue_token::{next_start, ContinueToken},
    Status,
};

use super::{
    options::{Filter, RvMatch, Versioning},
    render,
    route::CachedRequest,
};
use crate::cache::{Cache, View};
use sitegrid_apimachinery::negotiate::Format;

/// How long a list for a not-yet-reached resourceVersion waits (as kube-apiserver's cache does).
pub const RV_WAIT: Duration = Duration::from_secs(3);

/// A list result before rendering.
pub struct ListResult {
    /// The matching objects of this page, in key order.
    pub items: Vec<Arc<View>>,
    /// `metadata` of the list (resourceVersion, continue, remainingItemCount).
    pub meta: Value,
}

/// Computes a list page.
pub async fn list(cache: &Cache, req: &CachedRequest) -> Result<ListResult, Status> {
    let filter = Filter::parse(req)?;
    let q = &req.query;
    let versioning = Versioning::parse(
        &q.resource_version,
        &q.resource_version_match,
        q.continue_token.is_some(),
    )?;
    let store = cache.store(req.served.kind);
    let prefix = req.key_prefix();

    // Which snapshot, at which version, starting after which key.
    let (objects, list_rv, start) = if let Some(token) = &q.continue_token {
        if versioning.rv.is_some() {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let token = ContinueToken::decode(token).map_err(|e| Status::bad_request(e.to_string()))?;
        let start = format!("{prefix}{}", token.start);
        if token.rv < 0 {
            // A token from a 410: continue on the current state (inconsistent, as the apiserver warns).
            let (objects, rv) = store.snapshot(&prefix);
            (objects, rv, start)
        } else {
            let rv = token.rv as u64;
            match store.snapshot_at(rv, &prefix) {
                Ok(objects) => (objects, rv, start),
                Err(_) => return Err(expired_continue(&token.start)),
            }
        }
    } else {
        match (versioning.rv, versioning.rv_match) {
            (Some(rv), m) => {
                if rv > cache.current_rv() && !cache.wait_for_rv(rv, RV_WAIT).await {
                    return Err(Status::too_large_resource_version(rv, store.last_rv()));
                }
                if m == RvMatch::Exact {
                    match store.snapshot_at(rv, &prefix) {
                        Ok(objects) => (objects, rv, String::new()),
                        Err(_) => {
                            return Err(Status::expired(
                                "The resourceVersion for the provided list is too old.",
                            ))
                        }
                    }
                } else {
                    let (objects, rv) = store.snapshot(&prefix);
                    (objects, rv, String::new())
                }
            }
            (None, _) => {
                let (objects, rv) = store.snapshot(&prefix);
                (objects, rv, String::new())
            }
        }
    };

    // `limit` is ignored for resourceVersion=0, as the apiserver's watch cache does.
    let limit = if versioning.zero { 0 } else { q.limit as usize };
    let mut matching = objects
        .into_iter()
        .filter(|v| start.is_empty() || v.key.as_str() >= start.as_str())
        .filter(|v| filter.matches(v));
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(list_rv.to_string()));
    let items: Vec<Arc<View>> = if limit == 0 {
        matching.collect()
    } else {
        let page: Vec<Arc<View>> = matching.by_ref().take(limit).collect();
        let remaining = matching.count();
        if remaining > 0 {
            if let Some(last) = page.last() {
                let relative = &last.key[prefix.len()..];
                let token = ContinueToken {
                    rv: list_rv as i64,
                    start: next_start(relative),
                };
                meta.insert("continue".into(), json!(token.encode()));
                if filter.selects_everything() {
                    meta.insert("remainingItemCount".into(), json!(remaining));
                }
            }
        }
        page
    };
    Ok(ListResult {
        items,
        meta: Value::Object(meta),
    })
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

/// Renders a list in the negotiated format.
pub fn render_list(req: &CachedRequest, result: &ListResult, format: Format) -> bytes::Bytes {
    match format {
        Format::Json => {
            let bodies: Vec<&bytes::Bytes> = result
                .items
                .iter()
                .map(|v| v.body(req.served.kind, req.served.version).bytes())
                .collect();
            let size = bodies.iter().map(|b| b.len()).sum();
            crate::encode::list_body(req.served, &result.meta, bodies.into_iter(), size)
        }
        Format::Table { api_version } => {
            render::table_body(req, &result.items, result.meta.clone(), api_version)
        }
    }
}
