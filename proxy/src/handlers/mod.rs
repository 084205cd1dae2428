//! Serving the cached kinds: LIST, GET and WATCH with kube-apiserver's
//! semantics, from one generic handler over [`ResourceKind`](crate::cache::ResourceKind).
//! The request arrives parsed ([`request::CachedRequest`]); nothing here
//! reads the URL or the headers again.

mod get;
mod list;
pub mod request;
mod table;
mod watch;

use std::time::Duration;

use http::{Response, StatusCode};
use sitegrid_apimachinery::Status;
use tokio_util::sync::CancellationToken;

pub use list::RV_WAIT;
use request::{CachedRequest, Verb};
pub use watch::WatchSettings;

use crate::{
    cache::Cache,
    http::{response, Body},
};

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
    if !cache
        .readiness()
        .wait_served(kind, settings.sync_wait)
        .await
    {
        return response::status(&Status::service_unavailable(
            format!("sitegrid-proxy has not synced {kind} from the API server yet"),
            1,
        ));
    }
    let pretty = req.pretty;
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
        Verb::List(list) => list::list(cache, &req, list)
            .await
            .map(|page| body_response(list::render(cache, &req, &page), pretty)),
        Verb::Get { name } => get::get(cache, &req, name).map(|b| body_response(b, pretty)),
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
