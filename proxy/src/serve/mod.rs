//! Serving the cached kinds: LIST, WATCH and GET with kube-apiserver's
//! semantics, from one generic handler over [`ResourceKind`](crate::resource::ResourceKind).

mod get;
mod list;

mod options;
pub mod query;
mod render;
pub mod response;
pub mod route;
mod watch;

use std::{sync::Arc, time::Duration};

use http::{header, HeaderMap, Response, StatusCode};
use sitegrid_apimachinery::Status;

pub use list::RV_WAIT;
use response::Body;
use route::{CachedRequest, Verb};
use sitegrid_apimachinery::negotiate::{negotiate, Format};
pub use watch::{WatchContext, WatchSettings};

use crate::cache::Cache;

/// Settings of the cache handlers.
#[derive(Debug, Clone, Copy)]
pub struct ServeSettings {
    /// Watch timing.
    pub watch: WatchSettings,
    /// How long a request waits for its resource's first sync before 503.
    pub sync_wait: Duration,
}

impl Default for ServeSettings {
    fn default() -> Self {
        ServeSettings {
            watch: WatchSettings::default(),
            sync_wait: Duration::from_secs(30),
        }
    }
}

/// Answers a request for a cached kind.
pub async fn handle(
    cache: &Arc<Cache>,
    settings: &ServeSettings,
    req: CachedRequest,
    headers: &HeaderMap,
    ctx: WatchContext,
) -> Response<Body> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let Some(format) = negotiate(accept) else {
        return fallback_status(&Status::not_acceptable(
            "the server was unable to respond with a content type that the client supports",
        ));
    };
    let store = cache.store(req.served.kind);
    if !store.is_synced()
        && tokio::time::timeout(settings.sync_wait, store.wait_synced())
            .await
            .is_err()
    {
        return response::status(&Status::service_unavailable(
            format!(
                "sitegrid-proxy has not synced {} from the API server yet",
                req.served.kind
            ),
            1,
        ));
    }
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let pretty = req.query.pretty || response::pretty_user_agent(ua);
    let result = match req.verb {
        Verb::Watch => watch::watch(cache.clone(), req, format, settings.watch, ctx),
        Verb::List => match list::list(cache, &req).await {
            Ok(result) => {
                if let (Format::Table { .. }, Err(msg)) = (format, render::include(&req)) {
                    return response::status(&Status::bad_request(msg));
                }
                Ok(body_response(
                    list::render_list(&req, &result, format),
                    pretty,
                ))
            }
            Err(s) => Err(s),
        },
        Verb::Get => get::get(cache, &req, format).map(|b| body_response(b, pretty)),
    };
    result.unwrap_or_else(|s| response::status(&s))
}

fn body_response(body: bytes::Bytes, pretty: bool) -> Response<Body> {
    let body = if pretty {
        response::prettify(&body)
    } else {
        body
    };
    response::json(StatusCode::OK, body)
}

/// kube-apiserver writes Statuses it could not negotiate as indented JSON.
fn fallback_status(s: &Status) -> Response<Body> {
    let mut resp = response::status(s);
    *resp.body_mut() = response::full(s.to_json_fallback());
    resp
}

/// Re-exported for the format check in tests.
pub fn is_table(format: Format) -> bool {
    matches!(format, Format::Table { .. })
}
