//! What the proxy reads back from its data directory.

use sitegrid_cache::{self as cache, persist, ApiVersion, CacheConfig};

/// The node the fuzzed snapshots are loaded for (the seeds were taken for it).
const NODE: &str = "bj-1";

/// The snapshot file (`--data-dir`), loaded as at start and, when it is
/// accepted, restored into a cache and a writer as the proxy then does.
///
/// The first byte picks how far the rest gets past the checksum, sealed here
/// with a valid header and CRC: `0x01` the rest is a version 1 payload (an
/// LZ4 block, size-prepended), `0x02` the postcard encoding of a snapshot
/// in a version 1 file, `0x03` a version 2 payload (an LZ4 frame), `0x04`
/// the postcard encoding in a version 2 file; anything else, the rest is the
/// whole file. A snapshot that decodes encodes to one that decodes to the
/// same value.
pub fn snapshot(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = match mode {
        1 => seal(1, rest),
        2 => seal(1, &lz4_flex::compress_prepend_size(rest)),
        3 => seal(2, rest),
        4 => seal(2, &frame(rest)),
        _ => rest.to_vec(),
    };
    if let Ok(decoded) = persist::Snapshot::decode(&file) {
        if let Ok(again) = decoded.encode() {
            assert_eq!(persist::Snapshot::decode(&again).as_ref(), Ok(&decoded));
        }
    }
    let Ok(restored) = persist::load(&file, NODE, Default::default()) else {
        return;
    };
    let opened = persist::Opened {
        disk: None,
        restored: Some(restored),
    };
    let (cache, slot) = cache::open(CacheConfig::default(), opened);
    let writer = slot.start(NODE, ApiVersion::V1);
    super::encode_every_view(&cache);
    drop(writer);
}

/// `plain` as an LZ4 frame.
fn frame(plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
    // Writing into a Vec does not fail.
    let _ = lz4.write_all(plain);
    lz4.finish().unwrap_or_default()
}

/// The file around `payload`: magic, format `version`, CRC-32, length.
fn seal(version: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + payload.len());
    out.extend_from_slice(b"SGPXSNAP");
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}
