//! Passthrough: every request the cache does not serve goes to the API server
//! with the proxy's own credentials, and the answer comes back unchanged.

use apimachinery::Status;
use bytes::Bytes;
use http::{header, HeaderName, Request, Response};
use http_body_util::{BodyExt, Limited};
use tracing::warn;

use crate::serve::response::{self, Body, BoxError};

/// Hop-by-hop headers (RFC 9110 §7.6.1) and the client's own credentials,
/// which must not travel upstream: the proxy authenticates as itself.
const DROPPED: [HeaderName; 7] = [
    header::CONNECTION,
    header::HOST,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::AUTHORIZATION,
];

/// Forwards `req` through the pooled upstream client.
pub async fn forward<B>(client: &kube::Client, req: Request<B>, max_body: usize) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = req.into_parts();
    let bytes: Bytes = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            return if err
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                response::status(&Status::request_entity_too_large(format!(
                    "the request body is larger than the limit of {max_body} bytes"
                )))
            } else {
                response::status(&Status::bad_request(format!(
                    "reading the request body: {err}"
                )))
            };
        }
    };
    for h in DROPPED {
        parts.headers.remove(h);
    }
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    parts.uri = match path.parse() {
        Ok(uri) => uri,
        Err(_) => return response::status(&Status::bad_request("invalid request path")),
    };
    let upstream_req = Request::from_parts(parts, kube::client::Body::from(bytes));
    match client.send(upstream_req).await {
        Ok(resp) => resp.map(|b| b.map_err(|e| Box::new(e) as BoxError).boxed_unsync()),
        Err(err) => {
            warn!(error = %err, "upstream unreachable for passthrough");
            response::status(&Status::service_unavailable(
                format!("sitegrid-proxy cannot reach the API server: {err}"),
                1,
            ))
        }
    }
}
