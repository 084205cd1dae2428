//! What the proxy reads back from its data directory.

use sitegrid_proxy::cache::{self, persist, ApiVersion, CacheConfig};

/// The node the fuzzed snapshots are loaded for (the seeds were taken for it).
const NODE: &str = "bj-1";

/// The snapshot file (`--data-dir`), loaded as at start and, when it is
/// accepted, restored into a cache and a writer as the proxy then does.
///
/// The first byte picks how far the rest gets past the checksum: `0x01`
/// the rest is an LZ4 payload (size-prepended), `0x02` the postcard
/// encoding of a snapshot, both sealed here with a valid header and CRC;
/// anything else, the rest is the whole file. A snapshot that decodes
/// encodes to one that decodes to the same value.
pub fn snapshot(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = match mode {
        1 => seal(rest),
        2 => seal(&lz4_flex::compress_prepend_size(rest)),
        _ => rest.to_vec(),
    };
    if let Ok(decoded) = persist::Snapshot::decode(&file) {
        if let Ok(again) = decoded.encode() {
            assert_eq!(persist::Snapshot::decode(&again).as_ref(), Ok(&decoded));
        }
    }
    let Ok(restored) = persist::load(&file, NODE) else {
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

/// The file around `payload`: magic, format version 1, CRC-32, length.
fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + payload.len());
    out.extend_from_slice(b"SGPXSNAP");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out
}
