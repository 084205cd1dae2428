//! The snapshot file's layout.
//!
//! ```text
//!  offset  size  field
//!  0       8     magic "SGPXSNAP"
//!  8       4     format version (little endian; this proxy writes 2, reads 1 and 2)
//!  12      4     CRC-32 of the payload
//!  16      8     payload length
//!  24      ...   payload: the postcard encoding of [`Snapshot`], compressed:
//!                version 2 as an LZ4 frame, version 1 as one size-prepended LZ4 block
//! ```
//!
//! Version 2 is written as a stream — postcard into an LZ4 frame encoder into
//! the file, the header filled in last — so no buffer ever holds the whole
//! snapshot: version 1 built it three times over in memory (the objects'
//! text, its postcard encoding, the compressed payload) at every write, and
//! glibc kept that memory (docs/decisions/0001).
//!
//! The checksum covers every payload byte, so a torn or truncated write, a
//! flipped bit or a foreign file is refused as a whole: a snapshot is served
//! complete or not at all. The objects inside are JSON text, exactly the
//! bytes the proxy serves and the upstream sent, so the format does not
//! depend on the Kubernetes types a version of the proxy compiles in.

use std::{
    borrow::Cow,
    io::{self, BufWriter, Read, Seek, SeekFrom, Write},
};

use serde::{Deserialize, Serialize};

use crate::View;

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"SGPXSNAP";
/// The format this proxy writes; a file in another than this or
/// [`BLOCK_VERSION`] is discarded, never guessed at.
pub const FORMAT_VERSION: u32 = 2;
/// The format of earlier proxies (one LZ4 block), still read.
const BLOCK_VERSION: u32 = 1;
const HEADER: usize = 24;
/// The buffer between the compressor and the file.
const WRITE_BUFFER: usize = 64 * 1024;
/// The largest uncompressed payload read back (a snapshot of 10,000
/// endpoints is about 1 MiB uncompressed).
const MAX_PLAIN: u32 = 1 << 30;

/// Everything a restarted proxy needs to serve what it served before.
///
/// Its text borrows from what it was taken from when written, and owns it
/// when read back (`Snapshot<'static>`).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Snapshot<'a> {
    /// The node the views were filtered for.
    pub node: Cow<'a, str>,
    /// When it was taken, in milliseconds since the epoch.
    pub written_ms: u64,
    /// The proxy's resourceVersion clock when it was taken.
    pub clock: u64,
    /// The EndpointSlice version the slices are stored in (`v1`, `v1beta1`).
    pub slice_version: Cow<'a, str>,
    /// The served kinds.
    pub kinds: Vec<KindSnapshot<'a>>,
}

/// One served kind.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct KindSnapshot<'a> {
    /// The resource (`services`).
    pub resource: Cow<'a, str>,
    /// Watches from a version at or below this one get 410.
    pub compacted_rv: u64,
    /// The newest version of this resource.
    pub last_rv: u64,
    /// The served objects: their JSON bodies, each with its resourceVersion.
    pub objects: Vec<Text<'a>>,
    /// The newest logged events, oldest first, for watches resumed after a restart.
    pub log: Vec<LoggedEvent<'a>>,
}

/// One logged event.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LoggedEvent<'a> {
    /// Its resourceVersion.
    pub rv: u64,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub event_type: Cow<'a, str>,
    /// The object's JSON body at this event.
    pub object: Text<'a>,
    /// The state before, when no earlier logged event of the same object
    /// carries it (None for ADDED, and when an earlier event does).
    pub prev: Option<Text<'a>>,
}

/// An object's JSON text in a snapshot. When written, a cached view's body,
/// which the cache keeps compressed: unpacked one at a time as it is
/// serialized, so the snapshot never holds every body at once. When read
/// back, the text.
#[derive(Debug)]
pub enum Text<'a> {
    /// The text itself.
    Plain(Cow<'a, str>),
    /// A view's body in the version the cache stores.
    Body(&'a View),
}

impl Text<'_> {
    /// The text.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            Text::Plain(t) => Cow::Borrowed(t),
            // Bodies are JSON the proxy encoded, hence UTF-8.
            Text::Body(v) => Cow::Owned(String::from_utf8_lossy(&v.native_body()).into_owned()),
        }
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(t: &'a str) -> Text<'a> {
        Text::Plain(Cow::Borrowed(t))
    }
}

impl From<String> for Text<'_> {
    fn from(t: String) -> Self {
        Text::Plain(Cow::Owned(t))
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text<'_> {}

impl Serialize for Text<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Text::from)
    }
}

/// Why a snapshot file is not used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// Not written by sitegrid-proxy.
    #[error("not a sitegrid-proxy snapshot (no SGPXSNAP header)")]
    Foreign,
    /// Written in another format.
    #[error(
        "format version {found}, this proxy reads versions {BLOCK_VERSION} and {FORMAT_VERSION}"
    )]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// Shorter than its header says (a torn write or a full disk).
    #[error("truncated: {found} of {expected} bytes")]
    Truncated {
        /// Bytes present.
        found: usize,
        /// Bytes the header announces.
        expected: usize,
    },
    /// The bytes are not the ones written.
    #[error("checksum mismatch (corrupted)")]
    Checksum,
    /// The payload does not decode.
    #[error("undecodable: {0}")]
    Payload(String),
}

impl Snapshot<'_> {
    /// Writes the file into `out` from its start, streaming (see the module
    /// documentation), and returns its length.
    pub fn write_to<W: Write + Seek>(&self, out: &mut W) -> io::Result<u64> {
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&[0; HEADER])?;
        let (crc, len) = {
            let mut sink = Checksummed {
                inner: BufWriter::with_capacity(WRITE_BUFFER, &mut *out),
                crc: crc32fast::Hasher::new(),
                len: 0,
            };
            let lz4 = postcard::to_io(self, lz4_flex::frame::FrameEncoder::new(&mut sink))
                .map_err(io::Error::other)?;
            lz4.finish().map_err(io::Error::other)?;
            sink.inner.flush()?;
            (sink.crc.clone().finalize(), sink.len)
        };
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&header(FORMAT_VERSION, crc, len))?;
        out.flush()?;
        Ok(HEADER as u64 + len)
    }

    /// The file's bytes, in memory (tests and tools; the proxy streams them
    /// with [`Snapshot::write_to`]).
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let mut out = io::Cursor::new(Vec::new());
        self.write_to(&mut out)?;
        Ok(out.into_inner())
    }
}

impl Snapshot<'static> {
    /// Reads a file's bytes; any damage is an error, never a partial snapshot.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot<'static>, FormatError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(FormatError::Foreign);
        }
        let field = |at: usize, len: usize| {
            bytes.get(at..at + len).ok_or(FormatError::Truncated {
                found: bytes.len(),
                expected: HEADER,
            })
        };
        let version = u32::from_le_bytes(field(8, 4)?.try_into().unwrap_or_default());
        if version != FORMAT_VERSION && version != BLOCK_VERSION {
            return Err(FormatError::Version { found: version });
        }
        let crc = u32::from_le_bytes(field(12, 4)?.try_into().unwrap_or_default());
        let len = u64::from_le_bytes(field(16, 8)?.try_into().unwrap_or_default());
        let expected = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(HEADER))
            .ok_or(FormatError::Checksum)?;
        if bytes.len() < expected {
            return Err(FormatError::Truncated {
                found: bytes.len(),
                expected,
            });
        }
        let payload = &bytes[HEADER..expected];
        if bytes.len() != expected || crc32fast::hash(payload) != crc {
            return Err(FormatError::Checksum);
        }
        let plain = if version == BLOCK_VERSION {
            block_payload(payload)?
        } else {
            let mut plain = Vec::new();
            lz4_flex::frame::FrameDecoder::new(payload)
                .take(u64::from(MAX_PLAIN) + 1)
                .read_to_end(&mut plain)
                .map_err(|e| FormatError::Payload(e.to_string()))?;
            if plain.len() > MAX_PLAIN as usize {
                return Err(FormatError::Payload(format!(
                    "more than {MAX_PLAIN} bytes uncompressed"
                )));
            }
            plain
        };
        postcard::from_bytes(&plain).map_err(|e| FormatError::Payload(e.to_string()))
    }
}

/// The header of a file in `version` whose payload is `len` bytes with `crc`.
fn header(version: u32, crc: u32, len: u64) -> [u8; HEADER] {
    let mut out = [0; HEADER];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&version.to_le_bytes());
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    out[16..24].copy_from_slice(&len.to_le_bytes());
    out
}

/// A version 1 payload: one size-prepended LZ4 block.
fn block_payload(payload: &[u8]) -> Result<Vec<u8>, FormatError> {
    // The size LZ4 announces is allocated up front: refuse an absurd one
    // (a file written by hand) instead of aborting on allocation.
    let announced = payload
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()));
    if announced > MAX_PLAIN {
        return Err(FormatError::Payload(format!(
            "announces {announced} bytes uncompressed, more than {MAX_PLAIN}"
        )));
    }
    lz4_flex::decompress_size_prepended(payload).map_err(|e| FormatError::Payload(e.to_string()))
}

/// Counts and checksums what goes through it.
struct Checksummed<W> {
    inner: W,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot<'static> {
        Snapshot {
            node: "bj-1".into(),
            written_ms: 1_795_000_000_000,
            clock: 1_795_000_000_000_123,
            slice_version: "v1".into(),
            kinds: vec![KindSnapshot {
                resource: "services".into(),
                compacted_rv: 5,
                last_rv: 7,
                objects: vec![r#"{"metadata":{"name":"a","resourceVersion":"7"}}"#.into()],
                log: vec![LoggedEvent {
                    rv: 7,
                    event_type: "MODIFIED".into(),
                    object: r#"{"metadata":{"name":"a","resourceVersion":"7"}}"#.into(),
                    prev: Some(r#"{"metadata":{"name":"a","resourceVersion":"3"}}"#.into()),
                }],
            }],
        }
    }

    /// A payload with a valid checksum is still only data: whatever it
    /// holds, decoding answers, never panics or allocates what it claims.
    #[test]
    fn any_payload_behind_a_valid_checksum_decodes_or_is_refused() {
        let good = sample().encode().unwrap();
        let seal = |payload: &[u8]| {
            let mut out = good[..HEADER].to_vec();
            out[12..16].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
            out[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
            out.extend_from_slice(payload);
            out
        };
        // A version 1 block announcing 4 GiB.
        let mut huge = seal(&[0xff, 0xff, 0xff, 0xff, 0x10, 0x41]);
        huge[8..12].copy_from_slice(&BLOCK_VERSION.to_le_bytes());
        assert!(matches!(
            Snapshot::decode(&huge),
            Err(FormatError::Payload(_))
        ));
        // Postcard of random bytes behind a valid LZ4 frame, and random frames.
        let mut rng = fastrand::Rng::with_seed(14);
        for _ in 0..2_000 {
            let len = rng.usize(0..64);
            let junk: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            let _ = Snapshot::decode(&seal(&lz4_flex::compress_prepend_size(&junk)));
            let _ = Snapshot::decode(&seal(&junk));
            let mut frame = lz4_flex::frame::FrameEncoder::new(Vec::new());
            frame.write_all(&junk).unwrap();
            let _ = Snapshot::decode(&seal(&frame.finish().unwrap()));
        }
    }

    #[test]
    fn round_trips() {
        let bytes = sample().encode().unwrap();
        assert_eq!(Snapshot::decode(&bytes).unwrap(), sample());
    }

    /// A proxy upgraded from one that wrote version 1 starts from its snapshot.
    #[test]
    fn reads_the_block_format_earlier_proxies_wrote() {
        let payload = lz4_flex::compress_prepend_size(&postcard::to_stdvec(&sample()).unwrap());
        let mut file = header(
            BLOCK_VERSION,
            crc32fast::hash(&payload),
            payload.len() as u64,
        )
        .to_vec();
        file.extend_from_slice(&payload);
        assert_eq!(Snapshot::decode(&file).unwrap(), sample());
    }

    /// Written over a longer file, the snapshot replaces it from the start
    /// and its length is what was written.
    #[test]
    fn writes_a_stream_with_its_header_filled_in_last() {
        let mut big = sample();
        big.kinds[0].objects = (0..5_000)
            .map(|i| {
                format!(
                    r#"{{"metadata":{{"name":"svc-{i}","resourceVersion":"{i}"}},"spec":{{}}}}"#
                )
                .into()
            })
            .collect();
        let mut out = io::Cursor::new(Vec::new());
        let len = big.write_to(&mut out).unwrap();
        let bytes = out.into_inner();
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(&bytes[8..12], &FORMAT_VERSION.to_le_bytes());
        assert!(
            bytes.len() < 250_000 / 3,
            "compressed: {} bytes for about 250 kB of objects",
            bytes.len()
        );
        assert_eq!(Snapshot::decode(&bytes).unwrap(), big);
    }

    #[test]
    fn any_damage_is_refused_whole() {
        let bytes = sample().encode().unwrap();
        // Every truncation, including inside the header.
        for cut in 0..bytes.len() {
            assert!(Snapshot::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // Every single flipped bit in the payload.
        for i in HEADER..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert_eq!(
                Snapshot::decode(&bad),
                Err(FormatError::Checksum),
                "byte {i}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Snapshot::decode(&longer), Err(FormatError::Checksum));
        assert_eq!(
            Snapshot::decode(b"{\"kind\":\"List\"}"),
            Err(FormatError::Foreign)
        );
        let mut other = bytes.clone();
        other[8] = 9;
        assert_eq!(
            Snapshot::decode(&other),
            Err(FormatError::Version { found: 9 })
        );
        assert_eq!(
            Snapshot::decode(&bytes[..30]),
            Err(FormatError::Truncated {
                found: 30,
                expected: bytes.len()
            })
        );
    }
}
