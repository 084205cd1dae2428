//! The API server's answers to the kubelet, copied into the node cache on
//! their way: a whole answer (a list, an object, a token) is read to its end
//! and kept before any of it is passed on, so the kubelet's next request
//! (the watch that follows a list) always finds it kept; a watch is passed
//! on as it arrives and followed frame by frame.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body::Frame;
use hyper::body::Incoming;
use sitegrid_nodecache::WatchTee;

use crate::http::{Body, BoxError};

/// The largest whole answer copied (a node's pod list is far below it); a
/// larger one passes through uncopied.
pub const MAX_KEPT: usize = 64 << 20;

/// `body` read whole and handed to `keep`, then passed on. An answer larger
/// than [`MAX_KEPT`] is passed on as it comes, not kept; one that breaks
/// off is passed on broken, not kept.
pub async fn whole(mut body: Incoming, keep: impl FnOnce(&[u8])) -> Body {
    use http_body_util::BodyExt;
    let mut copy = bytes::BytesMut::new();
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    copy.extend_from_slice(data);
                    if copy.len() > MAX_KEPT {
                        let head = http_body_util::Full::new(copy.freeze());
                        return Body::new(Chain {
                            head: Some(head),
                            rest: body,
                        });
                    }
                }
            }
            Some(Err(e)) => {
                let head = http_body_util::Full::new(copy.freeze());
                return Body::new(Chain {
                    head: Some(head),
                    rest: Broken(Some(e.into())),
                });
            }
            None => break,
        }
    }
    keep(&copy);
    Body::new(http_body_util::Full::new(copy.freeze()))
}

/// `head`, then `rest`.
struct Chain<B> {
    head: Option<http_body_util::Full<Bytes>>,
    rest: B,
}

impl<B> http_body::Body for Chain<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(head) = self.head.as_mut() {
            match Pin::new(head).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) => return Poll::Ready(Some(Ok(f))),
                _ => self.head = None,
            }
        }
        Pin::new(&mut self.rest)
            .poll_frame(cx)
            .map(|f| f.map(|r| r.map_err(Into::into)))
    }
}

/// A body that fails once with the error it holds.
struct Broken(Option<BoxError>);

impl http_body::Body for Broken {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.take().map(Err))
    }
}

/// A watch passed on unchanged while the node cache follows each chunk.
pub fn watch(inner: Incoming, tee: WatchTee) -> Body {
    Body::new(Followed { inner, tee })
}

struct Followed {
    inner: Incoming,
    tee: WatchTee,
}

impl http_body::Body for Followed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.tee.feed(data);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
