//! Server-side Tables for `kubectl get`, built from cached views.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use sitegrid_apimachinery::table::{self, IncludeObject};

use super::request::CachedRequest;
use sitegrid_cache::{Cache, View};

/// Now, in unix seconds (for the Age column).
fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// One Table row for a view.
pub fn row(
    cache: &Cache,
    req: &CachedRequest,
    view: &View,
    include: IncludeObject,
    api_version: &str,
) -> Value {
    // The full object (with kind/apiVersion), which the printers read.
    let body = cache.body(view, req.served).full(req.served);
    let object = serde_json::from_slice(&body).unwrap_or(Value::Null);
    table::row(
        req.served.kind.plural(),
        &object,
        include,
        api_version,
        now_unix(),
    )
}

/// A whole Table response body: `meta` as its metadata, a row per item.
pub fn body(
    cache: &Cache,
    req: &CachedRequest,
    items: &[Arc<View>],
    meta: Value,
    api_version: &str,
    include: IncludeObject,
) -> Bytes {
    let rows = items
        .iter()
        .map(|v| row(cache, req, v, include, api_version))
        .collect();
    let t = table::table(req.served.kind.plural(), api_version, meta, rows, true);
    let mut out = serde_json::to_vec(&t).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}
