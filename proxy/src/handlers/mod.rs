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
use sitegrid_cache::{Availability, Cache};

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
    mut req: CachedRequest,
    closing: &CancellationToken,
) -> Response<Body> {
    if let Err(status) = available(cache, settings, &req).await {
        return response::status_as(&status, req.errors);
    }
    if req.format == Format::Protobuf && !cache.protobuf_complete(req.served.kind) {
        match req.instead_of_protobuf {
            Some(format) => req.format = format,
            None => return response::status_as(&incomplete_in_protobuf(&req), req.errors),
        }
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
        Verb::List(list) => list::respond(cache, &req, list)
            .await
            .and_then(|body| body_response(body, format, pretty)),
        Verb::Get { name } => get::get(cache, &req, name)
            .and_then(|body| body_response(Framed::whole(body), format, pretty)),
    };
    result.unwrap_or_else(|s| response::status_as(&s, errors))
}

/// Waits (up to `sync_wait`) until `req`'s kind can be answered from the
/// cache; otherwise what kube-apiserver would answer in its place: `404` for
/// a resource or version the API server does not serve, `503` when it has
/// not been synced — at once while the API server is known to be failing,
/// since no sync can come meanwhile.
async fn available(
    cache: &Cache,
    settings: &HandlerSettings,
    req: &CachedRequest,
) -> Result<(), Status> {
    let (kind, readiness) = (req.served.kind, cache.readiness());
    let not_served =
        |versions: Vec<_>| !versions.contains(&req.served.version) && !readiness.is_served(kind);
    // A kind discovered on demand, in a version the API server does not
    // serve: want it anyway, so that discovery is read again (bounded by
    // the sync), and answer as the API server would now.
    let absent_version = readiness.upstream_versions(kind).is_some_and(not_served);
    readiness.want(kind);
    if absent_version {
        return Err(Status::not_found_resource());
    }
    match readiness.wait_available(kind, settings.sync_wait).await {
        Availability::Served => Ok(()),
        Availability::Absent => Err(Status::not_found_resource()),
        Availability::UpstreamFailing(why) => Err(Status::service_unavailable(
            format!(
                "sitegrid-proxy cannot serve {kind}: it has not synced them from the API server, \
                 which is failing ({why}); retry later"
            ),
            RETRY_WHILE_FAILING,
        )),
        Availability::TimedOut => Err(Status::service_unavailable(
            format!("sitegrid-proxy has not synced {kind} from the API server yet"),
            1,
        )),
    }
}

/// The 406 of a client that takes protobuf only, for a kind the cache
/// cannot write completely in protobuf.
fn incomplete_in_protobuf(req: &CachedRequest) -> Status {
    Status::not_acceptable(format!(
        "sitegrid-proxy holds {} with fields it cannot write in protobuf (newer than its \
         Kubernetes types); it serves them in JSON only: accept application/json",
        req.served.kind
    ))
}

/// `Retry-After` of a request answered at once because the upstream is
/// failing (seconds): a client retrying sooner would only get the same.
const RETRY_WHILE_FAILING: u32 = 5;

/// A whole answer in `format` (JSON indented when asked to).
fn body_response(body: Framed, format: Format, pretty: bool) -> Result<Response<Body>, Status> {
    let body = match format {
        Format::Protobuf => body,
        _ if pretty => match body.into_bytes() {
            Some(bytes) => Framed::whole(response::prettify(&bytes)),
            None => return Err(Status::internal_error("a list item could not be written")),
        },
        _ => body,
    };
    Ok(response::typed(
        StatusCode::OK,
        format.content_type(false),
        body.into_body(),
    ))
}
