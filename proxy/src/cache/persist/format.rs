//! The snapshot file's layout.
//!
//! ```text
//!  offset  size  field
//!  0       8     magic "SGPXSNAP"
//!  8       4     format version (little endian; this proxy writes and reads 1)
//!  12      4     CRC-32 of the payload
//!  16      8     payload length
//!  24      ...   payload: LZ4 (size-prepended) of the postcard encoding of [`Snapshot`]
//! ```
//!
//! The checksum covers every payload byte, so a torn or truncated write, a
//! flipped bit or a foreign file is refused as a whole: a snapshot is served
//! complete or not at all. The objects inside are JSON text, exactly the
//! bytes the proxy serves and the upstream sent, so the format does not
//! depend on the Kubernetes types a version of the proxy compiles in.

use serde::{Deserialize, Serialize};

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"SGPXSNAP";
/// The format this proxy writes; a file in another is discarded, never guessed at.
pub const FORMAT_VERSION: u32 = 1;
const HEADER: usize = 24;
/// The largest uncompressed payload read back (a snapshot of 10,000
/// endpoints is about 1 MiB uncompressed).
const MAX_PLAIN: u32 = 1 << 30;

/// Everything a restarted proxy needs to serve what it served before.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Snapshot {
    /// The node the views were filtered for.
    pub node: String,
    /// When it was taken, in milliseconds since the epoch.
    pub written_ms: u64,
    /// The proxy's resourceVersion clock when it was taken.
    pub clock: u64,
    /// The EndpointSlice version the slices are stored in (`v1`, `v1beta1`).
    pub slice_version: String,
    /// The served kinds.
    pub kinds: Vec<KindSnapshot>,
}

/// One served kind.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct KindSnapshot {
    /// The resource (`services`).
    pub resource: String,
    /// Watches from a version at or below this one get 410.
    pub compacted_rv: u64,
    /// The newest version of this resource.
    pub last_rv: u64,
    /// The served objects: their JSON bodies, each with its resourceVersion.
    pub objects: Vec<String>,
    /// The newest logged events, oldest first, for watches resumed after a restart.
    pub log: Vec<LoggedEvent>,
}

/// One logged event.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Its resourceVersion.
    pub rv: u64,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub event_type: String,
    /// The object's JSON body at this event.
    pub object: String,
    /// The state before, when no earlier logged event of the same object
    /// carries it (None for ADDED, and when an earlier event does).
    pub prev: Option<String>,
}

/// Why a snapshot file is not used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// Not written by sitegrid-proxy.
    #[error("not a sitegrid-proxy snapshot (no SGPXSNAP header)")]
    Foreign,
    /// Written in another format.
    #[error("format version {found}, this proxy reads version {FORMAT_VERSION}")]
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

impl Snapshot {
    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, FormatError> {
        let plain = postcard::to_stdvec(self).map_err(|e| FormatError::Payload(e.to_string()))?;
        let payload = lz4_flex::compress_prepend_size(&plain);
        let mut out = Vec::with_capacity(HEADER + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Reads a file's bytes; any damage is an error, never a partial snapshot.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, FormatError> {
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
        if version != FORMAT_VERSION {
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
        let plain = lz4_flex::decompress_size_prepended(payload)
            .map_err(|e| FormatError::Payload(e.to_string()))?;
        postcard::from_bytes(&plain).map_err(|e| FormatError::Payload(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
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
        // LZ4 announcing 4 GiB.
        let huge = seal(&[0xff, 0xff, 0xff, 0xff, 0x10, 0x41]);
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
        }
    }

    #[test]
    fn round_trips() {
        let bytes = sample().encode().unwrap();
        assert_eq!(Snapshot::decode(&bytes).unwrap(), sample());
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
