//! A response body written by an async function, polled in place by the
//! connection that sends it: no task of its own, no channel in between.
//!
//! A watch writes its frames from deep inside async code (catching up,
//! delivering, bookmarks). Spawning it as a task feeding a channel costs a
//! second wake-up per event and per watcher, which under churn with many
//! watchers was a large part of the proxy's CPU. Here the producer future is
//! polled from the body's `poll_frame`: [`Sink::send`] parks one chunk and
//! suspends the producer until the connection has taken it. It is the
//! mechanism of `async-stream` (tokio-rs), whose `yield` only works in the
//! macro's own block and so cannot be called from the producer's methods.
//!
//! Backpressure is the connection's: a client that stops reading stops the
//! polling, so the producer stops where it is (a watch then falls behind its
//! broadcast, and is ended with 410 when it resumes). Dropping the body (the
//! client went away) drops the producer.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use futures::Stream;
use parking_lot::Mutex;

/// Where a producer hands its chunks to the body. The producer awaits each
/// `send` itself, one at a time (not in a task of its own, nor two at once):
/// the body takes a chunk in the poll that parked it.
pub struct Sink {
    slot: Arc<Mutex<Option<Bytes>>>,
}

impl Sink {
    /// Hands `chunk` to the body; returns once the connection has taken it.
    pub async fn send(&self, chunk: Bytes) {
        *self.slot.lock() = Some(chunk);
        Handed { polled: false }.await;
    }
}

/// Pending once: the body, finding the chunk, returns it and polls the
/// producer again on its next `poll_frame`.
struct Handed {
    polled: bool,
}

impl Future for Handed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.polled {
            Poll::Ready(())
        } else {
            self.polled = true;
            Poll::Pending
        }
    }
}

/// The chunks a producer sends, in order, until it returns.
pub struct Produced {
    producer: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    slot: Arc<Mutex<Option<Bytes>>>,
}

impl Produced {
    /// The body of what `produce` sends to its [`Sink`].
    pub fn new<F, Fut>(produce: F) -> Produced
    where
        F: FnOnce(Sink) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let slot = Arc::new(Mutex::new(None));
        let sink = Sink { slot: slot.clone() };
        Produced {
            producer: Some(Box::pin(produce(sink))),
            slot,
        }
    }
}

impl Stream for Produced {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        // The slot is empty here: a chunk parked by the producer is taken
        // below, in the poll that parked it (its `send` stays pending until
        // the next poll), so the slot is looked at once a poll.
        let Some(producer) = self.producer.as_mut() else {
            return Poll::Ready(None);
        };
        let finished = producer.as_mut().poll(cx).is_ready();
        if finished {
            self.producer = None;
        }
        match self.slot.lock().take() {
            Some(chunk) => Poll::Ready(Some(chunk)),
            None if finished => Poll::Ready(None),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    #[tokio::test]
    async fn chunks_come_out_in_order_then_the_end() {
        let body = Produced::new(|sink| async move {
            for i in 0..3u8 {
                sink.send(Bytes::from(vec![i])).await;
                // Waiting in between, as a watch waits for events.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let got: Vec<Bytes> = body.collect().await;
        assert_eq!(got, [vec![0u8], vec![1], vec![2]]);
    }

    #[tokio::test]
    async fn the_producer_runs_only_as_far_as_the_reader_reads() {
        let progress = Arc::new(Mutex::new(0));
        let seen = progress.clone();
        let mut body = Produced::new(|sink| async move {
            for i in 0..100u8 {
                sink.send(Bytes::from(vec![i])).await;
                *seen.lock() += 1;
            }
        });
        assert_eq!(body.next().await.as_deref(), Some(&[0u8][..]));
        assert_eq!(body.next().await.as_deref(), Some(&[1u8][..]));
        // Two chunks taken: the producer is parked in its second send, and
        // goes on only when the reader asks for more.
        assert_eq!(*progress.lock(), 1);
        drop(body);
        assert_eq!(
            Arc::strong_count(&progress),
            1,
            "dropping the body drops the producer"
        );
    }
}
