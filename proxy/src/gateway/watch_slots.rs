//! The bound on open watches (`--max-watches`): a watch takes a slot when it
//! starts and gives it back when its response body ends or is dropped (the
//! client went away). Without a free slot the answer is 429 with
//! `Retry-After: 1`, as for any shed request; lists, gets and other
//! passthrough requests are bounded by their own in-flight limit.

use std::sync::Arc;

use http::Response;
use sitegrid_apimachinery::Status;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{util::BoxCloneSyncService, ServiceExt};

use crate::http::{response, Body, BoxError};

/// Slots for open watches, shared by the cached and the passthrough branch.
#[derive(Clone)]
pub struct WatchSlots {
    free: Arc<Semaphore>,
    max: usize,
}

impl WatchSlots {
    /// `max` slots (at least one).
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        WatchSlots {
            free: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// `inner` where each request holds a slot for as long as its response
    /// body lives, and is refused when none is free.
    pub fn guard<R: Send + 'static>(
        &self,
        inner: BoxCloneSyncService<R, Response<Body>, BoxError>,
    ) -> BoxCloneSyncService<R, Response<Body>, BoxError> {
        let slots = self.clone();
        BoxCloneSyncService::new(tower::service_fn(move |req: R| {
            let (slots, inner) = (slots.clone(), inner.clone());
            async move {
                let Ok(slot) = slots.free.clone().try_acquire_owned() else {
                    return Ok(response::status(&Status::too_many_requests(
                        format!(
                            "too many watches open on this sitegrid-proxy ({}), please try again later",
                            slots.max
                        ),
                        1,
                    )));
                };
                let resp = inner.oneshot(req).await?;
                Ok(resp.map(|body| Body::new(Holding { body, _slot: slot })))
            }
        }))
    }
}

/// A response body that keeps its watch slot until it is dropped.
struct Holding {
    body: Body,
    _slot: OwnedSemaphorePermit,
}

impl http_body::Body for Holding {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, BoxError>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
