//! Building HTTP responses the way kube-apiserver does.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::{Body, BoxError};
use sitegrid_apimachinery::{protobuf, Status};

/// A whole body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Body::new(Full::new(bytes.into()).map_err(|never: Infallible| -> BoxError { match never {} }))
}

/// A JSON response with the apiserver's headers (`Cache-Control: no-cache, private`).
pub fn json(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    json_body(code, full(body))
}

/// A JSON response around any body (a watch stream, say) with the apiserver's headers.
pub fn json_body(code: StatusCode, body: Body) -> Response<Body> {
    typed(code, "application/json", body)
}

/// A response with `Content-Type: content_type` and the apiserver's
/// `Cache-Control` (the runtime's, over the proxy's body type).
pub fn typed(code: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    sitegrid_runtime::response::typed(code, content_type, body)
}

/// The runtime's operator responses (`Full` bodies) in the proxy's body type.
pub fn boxed(resp: Response<Full<Bytes>>) -> Response<Body> {
    resp.map(|b| Body::new(b.map_err(|never: Infallible| -> BoxError { match never {} })))
}

/// A `Status` error response with its HTTP code (and `Retry-After` when it carries one).
pub fn status(s: &Status) -> Response<Body> {
    boxed(sitegrid_runtime::response::status(s))
}

/// How an error `Status` is written, as negotiated from the request's `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusEncoding {
    /// Compact JSON.
    #[default]
    Json,
    /// Kubernetes protobuf (a protobuf client's errors are protobuf too).
    Protobuf,
    /// Indented JSON: nothing in `Accept` could carry a Status (a
    /// Table-only client, or a 406), as kube-apiserver's fallback writes it.
    Fallback,
}

/// A `Status` error response in `encoding`, with its HTTP code (and `Retry-After`).
pub fn status_as(s: &Status, encoding: StatusEncoding) -> Response<Body> {
    let mut resp = status(s);
    match encoding {
        StatusEncoding::Json => {}
        StatusEncoding::Fallback => *resp.body_mut() = full(s.to_json_fallback()),
        StatusEncoding::Protobuf => {
            *resp.body_mut() = full(protobuf::status(s));
            resp.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(protobuf::MEDIA_TYPE),
            );
        }
    }
    resp
}

/// Re-indents a JSON body with 2 spaces (`?pretty=true`, or a curl/Wget/browser
/// User-Agent, as kube-apiserver does).
pub fn prettify(body: &[u8]) -> Bytes {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => {
            let mut out = serde_json::to_vec_pretty(&v).unwrap_or_else(|_| body.to_vec());
            out.push(b'\n');
            Bytes::from(out)
        }
        Err(_) => Bytes::copy_from_slice(body),
    }
}

/// Whether kube-apiserver would pretty-print for this User-Agent.
pub fn pretty_user_agent(ua: Option<&str>) -> bool {
    ua.is_some_and(|ua| {
        ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
    })
}
