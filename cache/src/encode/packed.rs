//! Cached encodings kept LZ4-compressed against a dictionary per kind and
//! wire format.
//!
//! Every cached object keeps its served encoding (and the resume log keeps
//! older ones), but each is read seldom: when a client lists, gets or starts
//! a watch, and once per change for the watch frame every watcher shares.
//! Objects of one kind share most of their text (keys, labels, owner
//! references, the same ports and conditions), so each encoding is
//! compressed against the first one of its kind and format this process
//! made: an EndpointSlice or a Service of the synthetic clusters keeps about
//! a quarter of its bytes, and reading one back costs about a microsecond
//! per kilobyte (LZ4's block format with an external dictionary, `lz4_flex`).
//!
//! The writer keeps the raw upstream JSON of Endpoints and EndpointSlices
//! the same way, on shelves of their own ([`Shelf::upstream`]).
//!
//! The dictionaries are process-wide and set once: which text one is only
//! changes how well later encodings compress, never what they decode to.

use std::{cell::RefCell, sync::OnceLock};

use bytes::{BufMut, Bytes, BytesMut};

use crate::kind::ResourceKind;

use super::{with_scratch, Wire};

/// LZ4's window: a dictionary longer than this is not read.
const WINDOW: usize = 64 * 1024;

/// One per kind for each wire format and for the upstream's JSON (and, in
/// unit tests, one no other test uses).
const SHELVES: usize = 3 * ResourceKind::ALL.len() + cfg!(test) as usize;

/// One dictionary per shelf.
static DICTIONARIES: [OnceLock<Box<[u8]>>; SHELVES] = [const { OnceLock::new() }; SHELVES];

/// Which dictionary an encoding is compressed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shelf(u8);

impl Shelf {
    /// Encodings of `kind` in `wire`.
    pub fn of(kind: ResourceKind, wire: Wire) -> Shelf {
        Shelf((Self::index(kind) * 3 + wire as usize) as u8)
    }

    /// Objects of `kind` as the API server sent them.
    pub fn upstream(kind: ResourceKind) -> Shelf {
        Shelf((Self::index(kind) * 3 + 2) as u8)
    }

    fn index(kind: ResourceKind) -> usize {
        ResourceKind::ALL
            .iter()
            .position(|x| *x == kind)
            .unwrap_or(0)
    }

    /// Its dictionary, made from `first` if it has none yet.
    fn dictionary(self, first: &[u8]) -> &'static [u8] {
        DICTIONARIES[self.0 as usize]
            .get_or_init(|| first[first.len().saturating_sub(WINDOW)..].into())
    }

    /// Its dictionary (empty before anything was packed on it).
    fn dictionary_if_any(self) -> &'static [u8] {
        DICTIONARIES[self.0 as usize]
            .get()
            .map_or(&[], |d| d.as_ref())
    }
}

thread_local! {
    /// Where each encoding is compressed before it is copied into a blob of
    /// its exact size. Compressing straight into the blob meant allocating
    /// LZ4's worst case (the whole text and more) and shrinking it in place:
    /// each long-lived blob then left a hole of about three times its size
    /// behind it in the heap, which the sync's short-lived allocations
    /// filled only in part.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `raw` compressed against `dict`: its length (4 bytes, little-endian)
/// then the LZ4 block, in an allocation of its own exact size.
fn compress(raw: &[u8], dict: &[u8]) -> Box<[u8]> {
    with_scratch(&SCRATCH, |buf| {
        buf.resize(4 + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
        let len = u32::try_from(raw.len()).unwrap_or(u32::MAX);
        buf[..4].copy_from_slice(&len.to_le_bytes());
        match lz4_flex::block::compress_into_with_dict(raw, &mut buf[4..], dict) {
            Ok(n) => Box::from(&buf[..4 + n]),
            // The buffer has LZ4's worst case: not expected.
            Err(_) => {
                lz4_flex::block::compress_prepend_size_with_dict(raw, dict).into_boxed_slice()
            }
        }
    })
}

/// An encoding, compressed: its length (4 bytes, little-endian) then the
/// LZ4 block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    blob: Box<[u8]>,
    shelf: Shelf,
}

impl Packed {
    /// Compresses `raw` against `shelf`'s dictionary.
    pub fn pack(shelf: Shelf, raw: &[u8]) -> Packed {
        // An empty encoding is only its length: it needs no dictionary, and
        // must not become one.
        let dict = if raw.is_empty() {
            &[][..]
        } else {
            shelf.dictionary(raw)
        };
        Packed {
            blob: compress(raw, dict),
            shelf,
        }
    }

    /// Compresses `raw` against the dictionary this one was.
    pub fn repack(&self, raw: &[u8]) -> Packed {
        Packed::pack(self.shelf, raw)
    }

    /// The length of the encoding (not of its compressed form).
    pub fn len(&self) -> usize {
        lz4_flex::block::uncompressed_size(&self.blob).map_or(0, |(n, _)| n)
    }

    /// Whether the encoding is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The compressed form's size, bytes.
    #[cfg(test)]
    fn packed_len(&self) -> usize {
        self.blob.len()
    }

    /// Appends the encoding to `out`.
    pub fn unpack_into(&self, out: &mut BytesMut) {
        let Ok((n, block)) = lz4_flex::block::uncompressed_size(&self.blob) else {
            return;
        };
        let start = out.len();
        out.put_bytes(0, n);
        let written = lz4_flex::block::decompress_into_with_dict(
            block,
            &mut out[start..],
            self.shelf.dictionary_if_any(),
        );
        // Only what this process compressed is unpacked, against the same
        // dictionary: a failure would be a bug, and leaves nothing behind.
        if !matches!(written, Ok(w) if w == n) {
            out.truncate(start);
        }
    }

    /// The encoding in a buffer of its own, if it decompresses.
    pub fn try_unpack(&self) -> Option<Bytes> {
        let bytes = self.unpack();
        (bytes.len() == self.len()).then_some(bytes)
    }

    /// The encoding in a buffer of its own (empty if it does not decompress).
    pub fn unpack(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.len());
        self.unpack_into(&mut out);
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(i: usize) -> Vec<u8> {
        format!(
            r#"{{"metadata":{{"name":"svc-{i}-abcde","namespace":"default","resourceVersion":"{i}","labels":{{"kubernetes.io/service-name":"svc-{i}"}}}},"addressType":"IPv4","endpoints":[{{"addresses":["10.0.{i}.1"],"conditions":{{"ready":true}},"nodeName":"site-{i}-node-0"}}],"ports":[{{"port":80}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn encodings_come_back_byte_for_byte_and_share_their_kinds_text() {
        // A shelf of this test's own: tests share the process, and which
        // text another test packed first would change the ratio below.
        let shelf = Shelf((SHELVES - 1) as u8);
        let packed: Vec<Packed> = (0..200).map(|i| Packed::pack(shelf, &slice(i))).collect();
        for (i, p) in packed.iter().enumerate() {
            assert_eq!(p.unpack(), slice(i), "slice {i}");
            assert_eq!(p.len(), slice(i).len());
        }
        // Appending keeps what the buffer held.
        let mut out = BytesMut::from(&b"[,"[..]);
        packed[7].unpack_into(&mut out);
        assert_eq!(&out[..2], b"[,");
        assert_eq!(&out[2..], &slice(7)[..]);
        let kept: usize = packed.iter().map(Packed::packed_len).sum();
        let raw: usize = (0..200).map(|i| slice(i).len()).sum();
        assert!(kept * 2 < raw, "{kept} bytes kept of {raw}");
        // The first one's text is what the others share: each compressed
        // alone they would take more than twice as much.
        let alone: usize = (1..200)
            .map(|i| lz4_flex::compress_prepend_size(&slice(i)).len())
            .sum();
        let shared: usize = packed[1..].iter().map(Packed::packed_len).sum();
        assert!(shared * 2 < alone, "{shared} bytes shared, {alone} alone");
        assert_eq!(packed[3].try_unpack().as_deref(), Some(&slice(3)[..]));
        // An object larger than the scratch buffer a thread keeps, then a
        // small one again.
        let big: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        assert_eq!(Packed::pack(shelf, &big).unpack(), big);
        assert_eq!(Packed::pack(shelf, &slice(9)).unpack(), slice(9));
        // Each kind has a shelf of its own per format and for the upstream's JSON.
        let shelves: std::collections::HashSet<u8> = ResourceKind::ALL
            .iter()
            .flat_map(|k| {
                [
                    Shelf::of(*k, Wire::Json),
                    Shelf::of(*k, Wire::Protobuf),
                    Shelf::upstream(*k),
                ]
                .map(|s| s.0)
            })
            .collect();
        assert_eq!(shelves.len(), 3 * ResourceKind::ALL.len());
        assert!(shelves.iter().all(|s| usize::from(*s) < SHELVES));
        assert!(!shelves.contains(&shelf.0), "the test's shelf is its own");
        let empty = Packed::pack(Shelf::of(ResourceKind::Nodes, Wire::Protobuf), b"");
        assert!(empty.is_empty());
        assert_eq!(empty.unpack(), Bytes::new());
    }
}
