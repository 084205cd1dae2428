//! How a cache keeps what it encodes compact: each encoding LZ4-compressed
//! against a dictionary of its [`Family`] ([`Packed`]), and the label keys
//! and values its objects share written as one byte ([`LabelWords`]).
//!
//! Every cached object keeps its served encoding (and the resume log keeps
//! older ones), but each is read seldom: when a client lists, gets or starts
//! a watch, and once per change for the watch frame every watcher shares.
//! Objects of one kind share most of their text (keys, labels, owner
//! references, the same ports and conditions), so each encoding is
//! compressed against the first one of its family this cache made (LZ4's
//! block format with an external dictionary, `lz4_flex`; what that saves
//! and costs: docs/decisions/0002).
//! Which text a dictionary holds only changes how well later encodings
//! compress, never what they decode to.
//!
//! One [`Codec`] belongs to one cache and is made with it: two caches in a
//! process (two proxies, two tests) never share a dictionary or a word.
//! Compression can be switched off (`--cache-compression=false`): encodings
//! are then kept as they are (docs/decisions/0002 has what that costs).

use std::{cell::RefCell, collections::HashSet, sync::Arc, sync::OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::Mutex;

use super::{with_scratch, Wire};
use crate::kind::ResourceKind;

/// LZ4's window: a dictionary longer than this is not read.
const WINDOW: usize = 64 * 1024;

/// A family per kind for each wire format and for the upstream's JSON and
/// protobuf.
const FAMILIES: usize = 4 * ResourceKind::ALL.len();

/// A cache's way of keeping its encodings compact (see the module doc).
#[derive(Debug)]
pub struct Codec {
    /// Whether encodings are compressed.
    compress: bool,
    /// One dictionary per family, from the first encoding of that family.
    dictionaries: [OnceLock<Arc<Dictionary>>; FAMILIES],
    /// The label words of this cache's views.
    words: LabelWords,
}

impl Codec {
    /// A codec with no dictionaries or words yet; `compress: false` keeps
    /// every encoding as it is.
    pub fn new(compress: bool) -> Codec {
        Codec {
            compress,
            dictionaries: [const { OnceLock::new() }; FAMILIES],
            words: LabelWords::default(),
        }
    }

    /// Whether encodings are compressed.
    pub fn compresses(&self) -> bool {
        self.compress
    }

    /// `raw` packed on `family`'s dictionary (made from `raw` if the family
    /// has none yet), or kept as it is when compression is off.
    pub fn pack(&self, family: Family, raw: &[u8]) -> Packed {
        // An empty encoding needs no dictionary, and must not become one.
        if !self.compress || raw.is_empty() {
            return Packed::plain(raw);
        }
        let dict = self.dictionaries[family.0 as usize]
            .get_or_init(|| Arc::new(Dictionary(raw[raw.len().saturating_sub(WINDOW)..].into())));
        Packed::compressed(raw, dict.clone())
    }

    /// The label words of this cache's views.
    pub fn words(&self) -> &LabelWords {
        &self.words
    }
}

impl Default for Codec {
    /// A compressing codec.
    fn default() -> Self {
        Codec::new(true)
    }
}

/// Encodings that share most of their text, and so one dictionary: one
/// kind in one wire format, or one kind's objects as the API server sent them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family(u8);

impl Family {
    /// Encodings of `kind` in `wire`.
    pub fn served(kind: ResourceKind, wire: Wire) -> Family {
        Family((Self::index(kind) * 4 + wire as usize) as u8)
    }

    /// Objects of `kind` as the API server sent them in JSON.
    pub fn upstream(kind: ResourceKind) -> Family {
        Family((Self::index(kind) * 4 + 2) as u8)
    }

    /// Objects of `kind` as the API server sent them in protobuf.
    pub fn upstream_protobuf(kind: ResourceKind) -> Family {
        Family((Self::index(kind) * 4 + 3) as u8)
    }

    fn index(kind: ResourceKind) -> usize {
        ResourceKind::ALL
            .iter()
            .position(|x| *x == kind)
            .unwrap_or(0)
    }
}

/// The text encodings of one family are compressed against.
#[derive(Debug)]
struct Dictionary(Box<[u8]>);

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

/// An encoding as a cache keeps it: compressed against its family's
/// dictionary (its length, 4 bytes little-endian, then the LZ4 block), or
/// as it is when there is no dictionary.
#[derive(Debug, Clone)]
pub struct Packed {
    blob: Box<[u8]>,
    /// The dictionary `blob` was compressed against; None: `blob` is the encoding.
    dict: Option<Arc<Dictionary>>,
}

impl PartialEq for Packed {
    fn eq(&self, other: &Packed) -> bool {
        let same_dict = match (&self.dict, &other.dict) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        same_dict && self.blob == other.blob
    }
}

impl Eq for Packed {}

impl Packed {
    fn plain(raw: &[u8]) -> Packed {
        Packed {
            blob: raw.into(),
            dict: None,
        }
    }

    fn compressed(raw: &[u8], dict: Arc<Dictionary>) -> Packed {
        Packed {
            blob: compress(raw, &dict.0),
            dict: Some(dict),
        }
    }

    /// `raw` packed as this one was (against the same dictionary, if any).
    pub fn repack(&self, raw: &[u8]) -> Packed {
        match &self.dict {
            Some(dict) if !raw.is_empty() => Packed::compressed(raw, dict.clone()),
            _ => Packed::plain(raw),
        }
    }

    /// The length of the encoding (not of its compressed form).
    pub fn len(&self) -> usize {
        match self.dict {
            None => self.blob.len(),
            Some(_) => lz4_flex::block::uncompressed_size(&self.blob).map_or(0, |(n, _)| n),
        }
    }

    /// Whether the encoding is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept form's size, bytes.
    #[cfg(test)]
    fn packed_len(&self) -> usize {
        self.blob.len()
    }

    /// Appends the encoding to `out`.
    pub fn unpack_into(&self, out: &mut BytesMut) {
        let Some(dict) = &self.dict else {
            out.put_slice(&self.blob);
            return;
        };
        let Ok((n, block)) = lz4_flex::block::uncompressed_size(&self.blob) else {
            return;
        };
        let start = out.len();
        out.put_bytes(0, n);
        let written = lz4_flex::block::decompress_into_with_dict(block, &mut out[start..], &dict.0);
        // Only what this cache compressed is unpacked, against the same
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

/// How many words a cache writes as one byte: the control bytes 1 to 31,
/// which no label holds (the API server accepts only `[-A-Za-z0-9_./]`).
const WORD_SLOTS: usize = 31;

/// How many words seen once are remembered (as hashes) while they wait for
/// a second sighting; past that the memory starts over.
const CANDIDATES: usize = 1024;

/// The label keys and values a cache's objects share, each kept as one
/// control byte in its views ([`crate::View`]). A word gets a slot the
/// second time the cache writes it, while slots are free, and keeps it for
/// the cache's life: every EndpointSlice has the same two keys and the same
/// manager, every node the same few keys, so with them an EndpointSlice's
/// labels take 11 bytes rather than 101. Learned from what the cache holds,
/// not from a list: a cluster's own labels (a site key such as `location`)
/// are as short as Kubernetes' own.
#[derive(Debug, Default)]
pub struct LabelWords {
    slots: [OnceLock<Box<str>>; WORD_SLOTS],
    /// What the writer has seen once; None once every slot is taken.
    learning: Mutex<Option<Learning>>,
}

/// The words waiting for a slot.
#[derive(Debug, Default)]
struct Learning {
    /// The next free slot.
    next: usize,
    /// Hashes of the words seen once (a collision only gives a word its
    /// slot one sighting early).
    once: HashSet<u64>,
}

impl LabelWords {
    /// `word`'s one-byte form, if it has one; counts the sighting, which
    /// may give it one.
    pub(crate) fn short(&self, word: &str) -> Option<char> {
        if let Some(c) = self.code(word) {
            return Some(c);
        }
        let mut learning = self.learning.lock();
        let state = learning.get_or_insert_with(Learning::default);
        if state.next >= WORD_SLOTS {
            return None;
        }
        let hash = {
            use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
            BuildHasherDefault::<DefaultHasher>::default().hash_one(word)
        };
        if state.once.insert(hash) {
            if state.once.len() > CANDIDATES {
                state.once.clear();
            }
            return None;
        }
        state.once.remove(&hash);
        let slot = state.next;
        state.next += 1;
        if state.next == WORD_SLOTS {
            // Every slot is taken: nothing more to learn.
            state.once = HashSet::new();
        }
        // The writer is the one caller, and holds the lock: the slot is free.
        let _ = self.slots[slot].set(word.into());
        char::from_u32(slot as u32 + 1)
    }

    /// `word`'s one-byte form, if it already has one.
    fn code(&self, word: &str) -> Option<char> {
        let at = self
            .slots
            .iter()
            .map_while(OnceLock::get)
            .position(|w| &**w == word)?;
        char::from_u32(at as u32 + 1)
    }

    /// A key or value as kept: a one-byte form read back.
    pub(crate) fn long<'a>(&'a self, part: &'a str) -> &'a str {
        match part.as_bytes() {
            [b @ 1..=31] => self.slots[usize::from(*b) - 1].get().map_or(part, |w| &**w),
            _ => part,
        }
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
    fn encodings_come_back_byte_for_byte_and_share_their_familys_text() {
        let codec = Codec::new(true);
        let family = Family::served(ResourceKind::EndpointSlices, Wire::Json);
        let packed: Vec<Packed> = (0..200).map(|i| codec.pack(family, &slice(i))).collect();
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
        // Repacked on the same dictionary.
        assert_eq!(packed[3].repack(&slice(4)), packed[4]);
        // An object larger than the scratch buffer a thread keeps, then a
        // small one again.
        let big: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        assert_eq!(codec.pack(family, &big).unpack(), big);
        assert_eq!(codec.pack(family, &slice(9)).unpack(), slice(9));
        let empty = codec.pack(Family::served(ResourceKind::Nodes, Wire::Protobuf), b"");
        assert!(empty.is_empty());
        assert_eq!(empty.unpack(), Bytes::new());
    }

    #[test]
    fn each_family_of_each_codec_has_a_dictionary_of_its_own() {
        let families: HashSet<u8> = ResourceKind::ALL
            .iter()
            .flat_map(|k| {
                [
                    Family::served(*k, Wire::Json),
                    Family::served(*k, Wire::Protobuf),
                    Family::upstream(*k),
                    Family::upstream_protobuf(*k),
                ]
                .map(|f| f.0)
            })
            .collect();
        assert_eq!(families.len(), FAMILIES);
        // Two codecs, two first encodings: each compresses against its own.
        let family = Family::served(ResourceKind::Services, Wire::Json);
        let (a, b) = (Codec::new(true), Codec::new(true));
        let first_a = a.pack(family, &slice(1));
        let first_b = b.pack(family, b"{\"something\":\"else entirely\"}");
        let later_a = a.pack(family, &slice(2));
        let later_b = b.pack(family, &slice(2));
        assert_eq!(later_a.unpack(), later_b.unpack());
        assert!(
            later_a.packed_len() < later_b.packed_len(),
            "a's dictionary is a slice, b's is not: {} vs {}",
            later_a.packed_len(),
            later_b.packed_len()
        );
        assert_eq!(first_a.unpack(), slice(1));
        assert_ne!(first_a, first_b);
    }

    #[test]
    fn without_compression_encodings_are_kept_as_they_are() {
        let codec = Codec::new(false);
        let family = Family::served(ResourceKind::EndpointSlices, Wire::Json);
        let p = codec.pack(family, &slice(5));
        assert_eq!(p.packed_len(), slice(5).len());
        assert_eq!(p.unpack(), slice(5));
        assert_eq!(p.repack(&slice(6)).unpack(), slice(6));
        assert_eq!(p.len(), slice(5).len());
    }

    #[test]
    fn words_seen_twice_get_a_byte_and_read_back() {
        let words = LabelWords::default();
        assert_eq!(words.short("kubernetes.io/service-name"), None, "seen once");
        let code = words
            .short("kubernetes.io/service-name")
            .expect("seen twice");
        assert_eq!(words.short("kubernetes.io/service-name"), Some(code));
        let mut buf = [0; 4];
        assert_eq!(
            words.long(code.encode_utf8(&mut buf)),
            "kubernetes.io/service-name"
        );
        assert_eq!(words.long("plain"), "plain");
        // Another cache's words are its own.
        let other = LabelWords::default();
        assert_eq!(other.short("kubernetes.io/service-name"), None);
        // Every slot taken: later words stay long, and learning stops.
        for i in 0..100 {
            let w = format!("word-{i}");
            words.short(&w);
            words.short(&w);
        }
        assert_eq!(words.short("late"), None);
        assert_eq!(words.short("late"), None);
        assert!(words.learning.lock().as_ref().unwrap().once.is_empty());
        let last = words.short("word-29").expect("the 31st slot");
        assert_eq!(last as u32, 31);
    }
}
