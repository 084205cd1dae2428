//! A list response made of items the cache already holds, sent without first
//! copying them into one buffer.
//!
//! A list of 1,000 EndpointSlices is about 1 MB: built whole, every LIST in
//! flight held its own copy, so 1,000 clients starting at once cost 1 GB, and
//! glibc kept much of it after they were answered. [`Framed`] keeps the
//! shared item bytes (reference-counted) and writes them in chunks of
//! [`CHUNK`] bytes as the connection takes them, so a LIST in flight costs
//! one chunk and a pointer per item.

use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use sitegrid_apimachinery::protobuf;

use super::Body;

/// The size of the chunks a [`Framed`] body is written in (a single larger
/// item makes its chunk larger).
pub const CHUNK: usize = 64 * 1024;

/// How the items of a list are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// A JSON array: a comma between items.
    Comma,
    /// A protobuf list: each item as its length-delimited `items` field.
    Protobuf,
}

impl Join {
    /// Appends item number `index`.
    fn put(self, index: usize, item: &[u8], out: &mut BytesMut) {
        match self {
            Join::Comma => {
                if index > 0 {
                    out.put_u8(b',');
                }
                out.put_slice(item);
            }
            Join::Protobuf => protobuf::put_list_item(out, item),
        }
    }

    /// What [`Join::put`] appends for item number `index` of `len` bytes.
    fn len(self, index: usize, len: usize) -> usize {
        match self {
            Join::Comma => len + usize::from(index > 0),
            Join::Protobuf => protobuf::list_item_len(len),
        }
    }
}

/// A whole response body: `head`, the items joined by `join`, `tail`.
#[derive(Debug, Clone)]
pub struct Framed {
    head: Bytes,
    items: Vec<Bytes>,
    tail: Bytes,
    join: Join,
}

impl Framed {
    /// A list body.
    pub fn new(head: Bytes, items: Vec<Bytes>, tail: Bytes, join: Join) -> Framed {
        Framed {
            head,
            items,
            tail,
            join,
        }
    }

    /// A body that is one buffer already.
    pub fn whole(bytes: Bytes) -> Framed {
        Framed::new(bytes, Vec::new(), Bytes::new(), Join::Comma)
    }

    /// The body's length in bytes.
    pub fn len(&self) -> usize {
        let items: usize = self
            .items
            .iter()
            .enumerate()
            .map(|(i, item)| self.join.len(i, item.len()))
            .sum();
        self.head.len() + items + self.tail.len()
    }

    /// Whether the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body in one buffer (to re-indent it, or to test it).
    pub fn into_bytes(self) -> Bytes {
        if self.items.is_empty() && self.tail.is_empty() {
            return self.head;
        }
        let mut out = BytesMut::with_capacity(self.len());
        out.put_slice(&self.head);
        for (i, item) in self.items.iter().enumerate() {
            self.join.put(i, item, &mut out);
        }
        out.put_slice(&self.tail);
        out.freeze()
    }

    /// The body to send: chunks made as the connection asks for them, with
    /// its exact length announced (a `Content-Length` on HTTP/1.1).
    pub fn into_body(self) -> Body {
        let remaining = self.len() as u64;
        Body::new(Chunks {
            framed: self,
            next: 0,
            head_sent: false,
            remaining,
        })
    }
}

/// [`Framed`] being written.
struct Chunks {
    framed: Framed,
    /// The next item to write.
    next: usize,
    head_sent: bool,
    /// Bytes not yet written.
    remaining: u64,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let f = &this.framed;
        // The head alone when nothing follows it (a body that was one
        // buffer), so it is sent without a copy.
        if !this.head_sent && f.items.is_empty() && f.tail.is_empty() {
            this.head_sent = true;
            this.remaining = 0;
            return Poll::Ready(Some(Ok(Frame::data(f.head.clone()))));
        }
        let mut out = BytesMut::with_capacity(CHUNK.min(this.remaining as usize));
        if !this.head_sent {
            out.put_slice(&f.head);
            this.head_sent = true;
        }
        while this.next < f.items.len() && out.len() < CHUNK {
            f.join.put(this.next, &f.items[this.next], &mut out);
            this.next += 1;
        }
        if this.next == f.items.len() {
            out.put_slice(&f.tail);
        }
        this.remaining = this.remaining.saturating_sub(out.len() as u64);
        Poll::Ready(Some(Ok(Frame::data(out.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn items(n: usize, size: usize) -> Vec<Bytes> {
        (0..n)
            .map(|i| Bytes::from(vec![b'a' + (i % 26) as u8; size]))
            .collect()
    }

    async fn sent(framed: Framed) -> (Vec<usize>, Bytes, Option<u64>) {
        let mut body = framed.into_body();
        let announced = http_body::Body::size_hint(&body).exact();
        let mut chunks = Vec::new();
        let mut all = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            chunks.push(data.len());
            all.put_slice(&data);
        }
        (chunks, all.freeze(), announced)
    }

    #[tokio::test]
    async fn a_large_list_goes_in_bounded_chunks_and_equals_the_whole_body() {
        for join in [Join::Comma, Join::Protobuf] {
            let framed = Framed::new(
                Bytes::from_static(b"{\"items\":["),
                items(3000, 700),
                Bytes::from_static(b"]}\n"),
                join,
            );
            let whole = framed.clone().into_bytes();
            assert_eq!(whole.len(), framed.len());
            let (chunks, body, announced) = sent(framed).await;
            assert_eq!(body, whole, "{join:?}: the chunks are the body");
            assert_eq!(announced, Some(whole.len() as u64));
            assert!(chunks.len() > 10, "{join:?}: {} chunks", chunks.len());
            assert!(
                chunks.iter().all(|&c| c <= CHUNK + 700 + 8),
                "{join:?}: no chunk much beyond {CHUNK}: {chunks:?}"
            );
        }
    }

    #[tokio::test]
    async fn json_items_are_joined_by_commas() {
        let framed = Framed::new(
            Bytes::from_static(b"["),
            vec![Bytes::from_static(b"1"), Bytes::from_static(b"{}")],
            Bytes::from_static(b"]"),
            Join::Comma,
        );
        assert_eq!(&framed.clone().into_bytes()[..], b"[1,{}]");
        assert_eq!(&sent(framed).await.1[..], b"[1,{}]");
    }

    #[tokio::test]
    async fn empty_lists_and_single_buffers_are_sent_as_they_are() {
        let empty = Framed::new(
            Bytes::from_static(b"{\"items\":["),
            Vec::new(),
            Bytes::from_static(b"]}\n"),
            Join::Comma,
        );
        assert_eq!(&sent(empty).await.1[..], b"{\"items\":[]}\n");
        let (chunks, body, announced) = sent(Framed::whole(Bytes::from_static(b"{}"))).await;
        assert_eq!(
            (chunks, &body[..], announced),
            (vec![2], &b"{}"[..], Some(2))
        );
        let (chunks, _, announced) = sent(Framed::whole(Bytes::new())).await;
        assert_eq!((chunks.len(), announced), (0, Some(0)));
    }
}
