//! Building HTTP responses the way kube-apiserver does.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::{Body, BoxError};
use sitegrid_apimachinery::Status;

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

/// A response with `Content-Type: content_type` and, as the apiserver sends
/// on everything it serves, `Cache-Control: no-cache, private`.
pub fn typed(code: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = code;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}

/// The runtime's operator responses (`Full` bodies) in the proxy's body type.
pub fn boxed(resp: Response<Full<Bytes>>) -> Response<Body> {
    resp.map(|b| Body::new(b.map_err(|never: Infallible| -> BoxError { match never {} })))
}

/// A `Status` error response with its HTTP code (and `Retry-After` when it carries one).
pub fn status(s: &Status) -> Response<Body> {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json(code, s.to_json());
    if let Some(secs) = s.details.as_ref().and_then(|d| d.retry_after_seconds) {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// A `Status` for a request whose `Accept` could not be negotiated: kube-apiserver
/// writes those as indented JSON.
pub fn status_fallback(s: &Status) -> Response<Body> {
    let mut resp = status(s);
    *resp.body_mut() = full(s.to_json_fallback());
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
