//! A list response made of items the cache already holds, sent without first
//! copying them into one buffer.
//!
//! A list of 1,000 EndpointSlices is about 1 MB: built whole, every LIST in
//! flight held its own copy, so 1,000 clients starting at once cost 1 GB, and
//! glibc kept much of it after they were answered. [`Framed`] keeps the
//! items as they are held ([`Items`]: shared bytes, or the cache's packed
//! encodings) and writes them in chunks of [`CHUNK`] bytes as the connection
//! takes them, so a LIST in flight costs one chunk and a pointer per item,
//! and an item is unpacked once, straight into the chunk it is sent in.

use std::{
    fmt, io,
    pin::Pin,
    sync::{Arc, LazyLock},
    task::{Context, Poll},
};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use sitegrid_apimachinery::protobuf;
use sitegrid_cache::lists::ListChunks;

use super::Body;

/// The size of the chunks a [`Framed`] body is written in (a single larger
/// item makes its chunk larger).
pub const CHUNK: usize = 64 * 1024;

/// The items of a list body: counted and measured when the body is made (its
/// length is announced), each written only when the chunk it is sent in is.
pub trait Items: Send + Sync {
    /// How many there are.
    fn count(&self) -> usize;
    /// Item `index`'s length in bytes.
    fn len(&self, index: usize) -> usize;
    /// Appends item `index`, or returns `false` when it can no longer be
    /// made; either that or an item not of [`Items::len`] bytes fails the
    /// body there (see [`Framed::into_body`]).
    fn write(&self, index: usize, out: &mut BytesMut) -> bool;
}

/// Items already in buffers of their own.
impl Items for Vec<Bytes> {
    fn count(&self) -> usize {
        Vec::len(self)
    }

    fn len(&self, index: usize) -> usize {
        self[index].len()
    }

    fn write(&self, index: usize, out: &mut BytesMut) -> bool {
        out.put_slice(&self[index]);
        true
    }
}

/// How the items of a list are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// A JSON array: a comma between items.
    Comma,
    /// A protobuf list: each item as its length-delimited `items` field.
    Protobuf,
}

impl Join {
    /// Appends what goes before item number `index` of `len` bytes.
    fn put_before(self, index: usize, len: usize, out: &mut BytesMut) {
        match self {
            Join::Comma if index > 0 => out.put_u8(b','),
            Join::Comma => {}
            Join::Protobuf => protobuf::put_list_item_head(out, len),
        }
    }

    /// What [`Join::put_before`] and the item append for item number
    /// `index` of `len` bytes.
    fn len(self, index: usize, len: usize) -> usize {
        match self {
            Join::Comma => len + usize::from(index > 0),
            Join::Protobuf => protobuf::list_item_len(len),
        }
    }
}

/// A whole response body: `head`, the items joined by `join`, `tail`; or
/// a list already made into its chunks ([`Framed::made`]).
#[derive(Clone)]
pub struct Framed(Shape);

#[derive(Clone)]
enum Shape {
    List(List),
    Made(ListChunks),
}

/// `head`, the items joined by `join`, `tail`.
#[derive(Clone)]
struct List {
    head: Bytes,
    items: Arc<dyn Items>,
    tail: Bytes,
    join: Join,
}

impl List {
    fn len(&self) -> usize {
        let items: usize = (0..self.items.count())
            .map(|i| self.join.len(i, self.items.len(i)))
            .sum();
        self.head.len() + items + self.tail.len()
    }

    fn into_bytes(self) -> Option<Bytes> {
        if self.items.count() == 0 && self.tail.is_empty() {
            return Some(self.head);
        }
        let mut out = BytesMut::with_capacity(self.len());
        out.put_slice(&self.head);
        for i in 0..self.items.count() {
            if !self.put_item(i, &mut out) {
                return None;
            }
        }
        out.put_slice(&self.tail);
        Some(out.freeze())
    }

    /// Appends item `i` with what joins it; whether it was made whole.
    fn put_item(&self, i: usize, out: &mut BytesMut) -> bool {
        let len = self.items.len(i);
        self.join.put_before(i, len, out);
        let start = out.len();
        self.items.write(i, out) && out.len() - start == len
    }
}

impl fmt::Debug for Framed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Shape::List(list) => f
                .debug_struct("Framed")
                .field("head", &list.head.len())
                .field("items", &list.items.count())
                .field("tail", &list.tail.len())
                .field("join", &list.join)
                .finish(),
            Shape::Made(chunks) => f.debug_tuple("Framed").field(&chunks.len()).finish(),
        }
    }
}

impl Framed {
    /// A list body.
    pub fn new(head: Bytes, items: impl Items + 'static, tail: Bytes, join: Join) -> Framed {
        Framed(Shape::List(List {
            head,
            items: Arc::new(items),
            tail,
            join,
        }))
    }

    /// A body that is one buffer already (every GET's answer: its empty
    /// item list is one shared by all, not allocated per answer).
    pub fn whole(bytes: Bytes) -> Framed {
        static NO_ITEMS: LazyLock<Arc<dyn Items>> = LazyLock::new(|| Arc::new(Vec::<Bytes>::new()));
        Framed(Shape::List(List {
            head: bytes,
            items: NO_ITEMS.clone(),
            tail: Bytes::new(),
            join: Join::Comma,
        }))
    }

    /// A body made already, in the chunks [`Framed::make`] gave: sent as
    /// they are, shared with every other response sending them.
    pub fn made(chunks: ListChunks) -> Framed {
        Framed(Shape::Made(chunks))
    }

    /// The body's length in bytes.
    pub fn len(&self) -> usize {
        match &self.0 {
            Shape::List(list) => list.len(),
            Shape::Made(chunks) => chunks.iter().map(Bytes::len).sum(),
        }
    }

    /// Whether the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body in one buffer (to re-indent it, or to test it); `None` if
    /// an item can no longer be made.
    pub fn into_bytes(self) -> Option<Bytes> {
        match self.0 {
            Shape::List(list) => list.into_bytes(),
            Shape::Made(chunks) if chunks.len() == 1 => Some(chunks[0].clone()),
            Shape::Made(chunks) => Some(chunks.concat().into()),
        }
    }

    /// The body made into the chunks it is sent in, to be sent by many
    /// responses ([`Framed::made`]); `None` if an item can no longer be
    /// made. Other tasks run between chunks: a large list is made in
    /// pieces, as it is sent.
    pub async fn make(self) -> Option<ListChunks> {
        let mut chunks = Vec::new();
        let mut body = self.into_chunks();
        while let Some(frame) = http_body_util::BodyExt::frame(&mut body).await {
            chunks.push(frame.ok()?.into_data().ok()?);
            tokio::task::yield_now().await;
        }
        Some(chunks.into())
    }

    /// The body to send: chunks made as the connection asks for them, with
    /// its exact length announced (a `Content-Length` on HTTP/1.1). An item
    /// that can no longer be made fails the body there, so the client sees
    /// a response cut short rather than a well-formed one without it.
    pub fn into_body(self) -> Body {
        Body::new(self.into_chunks())
    }

    fn into_chunks(self) -> Chunks {
        let remaining = self.len() as u64;
        Chunks {
            framed: self,
            next: 0,
            head_sent: false,
            remaining,
        }
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
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let list = match &this.framed.0 {
            Shape::List(list) => list,
            // A chunk made already goes as it is.
            Shape::Made(chunks) => {
                let chunk = chunks[this.next].clone();
                this.next += 1;
                this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
        };
        let (head, items, tail, join) = (&list.head, &list.items, &list.tail, list.join);
        let count = items.count();
        // The head alone when nothing follows it (a body that was one
        // buffer), so it is sent without a copy.
        if !this.head_sent && count == 0 && tail.is_empty() {
            this.head_sent = true;
            this.remaining = 0;
            return Poll::Ready(Some(Ok(Frame::data(head.clone()))));
        }
        // The chunk's items measured first, so that it is allocated once.
        let mut size = if this.head_sent { 0 } else { head.len() };
        let mut end = this.next;
        while end < count && size < CHUNK {
            size += join.len(end, items.len(end));
            end += 1;
        }
        if end == count {
            size += tail.len();
        }
        let mut out = BytesMut::with_capacity(size);
        if !this.head_sent {
            out.put_slice(head);
            this.head_sent = true;
        }
        while this.next < end {
            if !list.put_item(this.next, &mut out) {
                let failed = this.next;
                this.remaining = 0;
                tracing::error!(
                    item = failed,
                    "a list item could not be written: the response is cut short"
                );
                return Poll::Ready(Some(Err(io::Error::other(format!(
                    "list item {failed} could not be written"
                )))));
            }
            this.next += 1;
        }
        if this.next == count {
            out.put_slice(tail);
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
            let whole = framed.clone().into_bytes().unwrap();
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

    /// Items of which one can no longer be made (a view whose packed
    /// encoding would not unpack).
    struct Broken(usize);

    impl Items for Broken {
        fn count(&self) -> usize {
            3000
        }

        fn len(&self, _: usize) -> usize {
            700
        }

        fn write(&self, index: usize, out: &mut BytesMut) -> bool {
            if index == self.0 {
                return false;
            }
            out.put_bytes(b'x', 700);
            true
        }
    }

    #[tokio::test]
    async fn an_item_that_cannot_be_made_cuts_the_response_short_with_an_error() {
        let framed = Framed::new(
            Bytes::from_static(b"["),
            Broken(2000),
            Bytes::from_static(b"]"),
            Join::Comma,
        );
        assert!(framed.clone().into_bytes().is_none());
        let mut body = framed.into_body();
        let (mut sent, mut failed) = (0, None);
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(data) => sent += data.into_data().unwrap().len(),
                Err(e) => failed = Some(e.to_string()),
            }
        }
        let failed = failed.expect("the body fails instead of ending well-formed");
        assert!(failed.contains("2000"), "{failed}");
        assert!(
            sent <= 1 + 2000 * 700 + 1999,
            "nothing of the broken item or after it is sent (the head, 2,000 items and their commas at most): {sent} bytes"
        );
    }

    #[tokio::test]
    async fn a_list_made_once_is_sent_whole_by_every_body_made_from_it() {
        let framed = Framed::new(
            Bytes::from_static(b"{\"items\":["),
            items(300, 700),
            Bytes::from_static(b"]}\n"),
            Join::Comma,
        );
        let whole = framed.clone().into_bytes().unwrap();
        let chunks = framed.make().await.unwrap();
        assert!(chunks.len() > 1, "made in chunks: {}", chunks.len());
        for _ in 0..2 {
            let made = Framed::made(chunks.clone());
            assert_eq!(made.len(), whole.len());
            assert_eq!(made.clone().into_bytes().unwrap(), whole);
            let (sent_chunks, body, announced) = sent(made).await;
            assert_eq!((body, announced), (whole.clone(), Some(whole.len() as u64)));
            assert_eq!(sent_chunks.len(), chunks.len(), "sent as they were made");
        }
        assert!(
            Framed::new(Bytes::new(), Broken(1), Bytes::new(), Join::Comma)
                .make()
                .await
                .is_none(),
            "a list with an item that cannot be made is not made"
        );
    }

    #[tokio::test]
    async fn json_items_are_joined_by_commas() {
        let framed = Framed::new(
            Bytes::from_static(b"["),
            vec![Bytes::from_static(b"1"), Bytes::from_static(b"{}")],
            Bytes::from_static(b"]"),
            Join::Comma,
        );
        assert_eq!(&framed.clone().into_bytes().unwrap()[..], b"[1,{}]");
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
