//! Serving the cached kinds: LIST, GET and WATCH with kube-apiserver's
//! semantics, from one generic handler over [`ResourceKind`](sitegrid_cache::ResourceKind).
//! The request arrives parsed ([`request::CachedRequest`]); nothing here
//! reads the URL or the headers again.

mod get;
mod list;
mod metadata;
pub mod request;
mod table;
mod watch;

use std::time::Duration;

use http::{Response, StatusCode};
use sitegrid_apimachinery::Status;
use tokio_util::sync::CancellationToken;

pub use list::RV_WAIT;
use request::{CachedRequest, Format, Verb};
pub use watch::WatchSettings;

use crate::http::{response, Body, Framed};
use sitegrid_cache::Cache;

/// Settings of the cache handlers.
#[derive(Debug, Clone, Copy)]
pub struct HandlerSettings {
    /// Watch timing.
    pub watch: WatchSettings,
    /// How long a request waits for its resource's first sync before 503.
    pub sync_wait: Duration,
}

impl Default for HandlerSettings {
    fn default() -> Self {
        HandlerSettings {
            watch: WatchSettings::default(),
            sync_wait: Duration::from_secs(30),
        }
    }
}

/// Answers a request for a cached kind. Open watches end when `closing` is cancelled.
pub async fn handle(
    cache: &Cache,
    settings: &HandlerSettings,
    req: CachedRequest,
    closing: &CancellationToken,
) -> Response<Body> {
    let kind = req.served.kind;
    cache.readiness().want(kind);
    if !cache
        .readiness()
        .wait_served(kind, settings.sync_wait)
        .await
    {
        let status = Status::service_unavailable(
            format!("sitegrid-proxy has not synced {kind} from the API server yet"),
            1,
        );
        return response::status_as(&status, req.errors);
    }
    let (format, errors, pretty) = (req.format, req.errors, req.pretty);
    let result = match &req.verb {
        Verb::Watch(options) => {
            let options = options.clone();
            Ok(watch::watch(
                cache.clone(),
                req,
                options,
                settings.watch,
                closing.clone(),
            ))
        }
        Verb::List(list) => match list::list(cache, &req, list).await {
            Ok(page) => list::render(cache, &req, &page),
            Err(s) => Err(s),
        }
        .map(|body| body_response(body, format, pretty)),
        Verb::Get { name } => get::get(cache, &req, name)
            .map(|body| body_response(Framed::whole(body), format, pretty)),
    };
    result.unwrap_or_else(|s| response::status_as(&s, errors))
}

/// A whole answer in `format` (JSON indented when asked to).
fn body_response(body: Framed, format: Format, pretty: bool) -> Response<Body> {
    let body = match format {
        Format::Protobuf => body,
        _ if pretty => Framed::whole(response::prettify(&body.into_bytes())),
        _ => body,
    };
    response::typed(StatusCode::OK, format.content_type(false), body.into_body())
}
