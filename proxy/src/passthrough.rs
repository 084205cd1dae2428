//! Passthrough: every request the cache does not serve goes to the API server
//! through the pooled upstream client, with the proxy's own credentials, and
//! the answer streams back unchanged (status, headers, body; watches of other
//! kinds included).

use bytes::Bytes;
use http::{header, HeaderName, Request, Response};
use http_body_util::{LengthLimitError, Limited};
use sitegrid_apimachinery::Status;
use tower::ServiceExt;
use tracing::warn;

use crate::{
    http::{response, Body, BoxError},
    upstream::Upstream,
};

/// Hop-by-hop headers (RFC 9110 §7.6.1) and the client's own credentials,
/// which must not travel upstream: the proxy authenticates as itself.
const DROPPED: [HeaderName; 8] = [
    header::CONNECTION,
    header::HOST,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    header::AUTHORIZATION,
];

/// Forwards `req` upstream, streaming the body (at most `max_body` bytes: 413 beyond).
pub async fn forward<B>(upstream: &Upstream, req: Request<B>, max_body: usize) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        return too_large(max_body);
    }
    let (mut parts, body) = req.into_parts();
    // The downstream protocol (HTTP/2 from kube-proxy over TLS, say) says
    // nothing about the upstream connection's: the pooled client picks its own.
    parts.version = http::Version::default();
    for h in DROPPED {
        parts.headers.remove(h);
    }
    parts.uri = match parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .parse()
    {
        Ok(uri) => uri,
        Err(_) => return response::status(&Status::bad_request("invalid request path")),
    };
    // Undeclared (chunked) bodies are cut off at the limit while streaming.
    let body = Body::new(Limited::new(body, max_body));
    match upstream
        .clone()
        .oneshot(Request::from_parts(parts, body))
        .await
    {
        Ok(resp) => resp.map(Body::new),
        Err(err) if is_length_limit(&*err) => too_large(max_body),
        Err(err) => {
            warn!(error = %err, "upstream unreachable for passthrough");
            response::status(&Status::service_unavailable(
                format!("sitegrid-proxy cannot reach the API server: {err}"),
                1,
            ))
        }
    }
}

fn too_large(max_body: usize) -> Response<Body> {
    response::status(&Status::request_entity_too_large(format!(
        "the request body is larger than the limit of {max_body} bytes"
    )))
}

/// Whether the length limit caused `err` (hyper wraps the body's error).
fn is_length_limit(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<LengthLimitError>() {
            return true;
        }
        cur = e.source();
    }
    false
}
