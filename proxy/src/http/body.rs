//! The body type of every request and response inside the proxy.

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt};

/// Any error a body may fail with (passthrough bodies can).
pub type BoxError = sitegrid_runtime::serve::BoxError;

/// A boxed body with `Bytes` data: a full buffer, a watch stream, or a
/// passthrough body streamed as it arrives.
///
/// A named type rather than an alias of `UnsyncBoxBody<Bytes, BoxError>`: with
/// the alias, the `dyn Error` lifetime inside it trips rustc's higher-ranked
/// `Send` checks in async code (rust-lang/rust#64552).
pub struct Body(UnsyncBoxBody<Bytes, BoxError>);

impl Body {
    /// Boxes any body with `Bytes` data.
    pub fn new<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Body(body.map_err(Into::into).boxed_unsync())
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Body")
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        std::pin::Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}
