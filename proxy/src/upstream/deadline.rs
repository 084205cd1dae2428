//! Deadlines on the reflectors' requests. One that should end (a list page,
//! discovery) must end, body included, within its deadline: a broken API
//! server can send headers and then trickle a body forever, which neither a
//! connect nor a read timeout catches. A watch may last, but it must not go
//! silent for longer than it asked the server to last (`timeoutSeconds`)
//! plus a margin: a stalled one fails with [`DeadlineElapsed`], which the
//! reflector counts before it re-watches from the last version it saw.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

use crate::http::BoxError;

/// The response, or its body, did not arrive within the deadline.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not finish its response within {0:?}")]
pub struct DeadlineElapsed(pub Duration);

/// Wraps a service in [`Deadline`].
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    limit: Duration,
    idle: Duration,
}

impl DeadlineLayer {
    /// Requests other than watches must complete, body included, within
    /// `limit`; a watch's body may not stay silent for `idle`.
    pub fn new(limit: Duration, idle: Duration) -> Self {
        DeadlineLayer { limit, idle }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            limit: self.limit,
            idle: self.idle,
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    limit: Duration,
    idle: Duration,
}

impl<S, ReqB, B> Service<Request<ReqB>> for Deadline<S>
where
    S: Service<Request<ReqB>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Response = Response<DeadlineBody<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let watch = is_watch(req.uri().query());
        // A watch's headers come at once; its body may last, but not go quiet.
        let (limit, idle) = if watch {
            (self.limit, Some(self.idle))
        } else {
            (self.limit, None)
        };
        let deadline = Instant::now() + limit;
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = tokio::time::timeout_at(deadline, response)
                .await
                .map_err(|_| DeadlineElapsed(limit))?
                .map_err(Into::into)?;
            let (limit, expiry) = match idle {
                Some(idle) => (idle, Instant::now() + idle),
                None => (limit, deadline),
            };
            Ok(response.map(|inner| DeadlineBody {
                inner,
                limit,
                idle: idle.is_some(),
                expiry: Box::pin(tokio::time::sleep_until(expiry)),
            }))
        })
    }
}

/// Whether a request's query asks for a watch.
fn is_watch(query: Option<&str>) -> bool {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
}

/// A body that fails with [`DeadlineElapsed`] once its deadline passes (for
/// a watch: once it has been silent for `limit`).
#[derive(Debug)]
pub struct DeadlineBody<B> {
    inner: B,
    limit: Duration,
    /// Whether each frame moves the deadline on (a watch).
    idle: bool,
    expiry: Pin<Box<Sleep>>,
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if this.idle {
                    let next = Instant::now() + this.limit;
                    this.expiry.as_mut().reset(next);
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.expiry.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(DeadlineElapsed(this.limit).into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watches_are_exempt() {
        assert!(is_watch(Some("watch=true&resourceVersion=5")));
        assert!(is_watch(Some("timeoutSeconds=290&watch=1")));
        assert!(!is_watch(Some("limit=100")));
        assert!(!is_watch(Some("watch=false")));
        assert!(!is_watch(None));
    }
}
