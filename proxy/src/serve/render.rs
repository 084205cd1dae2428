//! Server-side Tables for `kubectl get`, built from cached views.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use sitegrid_apimachinery::table::{self, IncludeObject};

use super::route::CachedRequest;
use crate::cache::View;

/// Now, in unix seconds (for the Age column).
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The full object (with kind/apiVersion) as JSON, for table rows.
pub fn full_value(req: &CachedRequest, view: &View) -> Value {
    let body = view
        .body(req.served.kind, req.served.version)
        .full(req.served);
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

/// One Table row for a view.
pub fn row(req: &CachedRequest, view: &View, include: IncludeObject, api_version: &str) -> Value {
    table::row(
        req.served.kind.plural(),
        &full_value(req, view),
        include,
        api_version,
        now_unix(),
    )
}

/// Which object each row embeds; an invalid `includeObject` is a 400 message.
pub fn include(req: &CachedRequest) -> Result<IncludeObject, String> {
    IncludeObject::parse(req.query.include_object.as_deref())
}

/// A whole Table response body.
pub fn table_body(
    req: &CachedRequest,
    items: &[Arc<View>],
    meta: Value,
    api_version: &str,
) -> Bytes {
    let include = include(req).unwrap_or(IncludeObject::Metadata);
    let rows = items
        .iter()
        .map(|v| row(req, v, include, api_version))
        .collect();
    let t = table::table(req.served.kind.plural(), api_version, meta, rows, true);
    let mut out = serde_json::to_vec(&t).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}
