//! Responses shaped the way kube-apiserver shapes what it serves: a content
//! type, `Cache-Control: no-cache, private` on everything, and errors as a
//! Kubernetes `Status` with its HTTP code (and `Retry-After` when it asks the
//! client to come back). Generic over the body, so a binary's own body type
//! (a stream, say) gets the same headers.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use sitegrid_apimachinery::Status;

/// A response with `Content-Type: content_type` and, as the apiserver sends
/// on everything it serves, `Cache-Control: no-cache, private`.
pub fn typed<B>(code: StatusCode, content_type: &'static str, body: B) -> Response<B> {
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

/// A plain-text response nobody in between caches or sniffs.
pub fn text(code: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = typed(code, "text/plain; charset=utf-8", Full::new(body.into()));
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// A `Status` as JSON with its HTTP code, and `Retry-After` when it carries one.
pub fn status(s: &Status) -> Response<Full<Bytes>> {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = typed(
        code,
        "application/json",
        Full::new(Bytes::from(s.to_json())),
    );
    if let Some(secs) = s.details.as_ref().and_then(|d| d.retry_after_seconds) {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_carry_their_code_and_retry_after() {
        let resp = status(&Status::too_many_requests("slow down", 3));
        assert_eq!(resp.status(), 429);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "3");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(resp.headers()[header::CACHE_CONTROL], "no-cache, private");
        let resp = text(StatusCode::OK, "ok");
        assert_eq!(resp.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
}
