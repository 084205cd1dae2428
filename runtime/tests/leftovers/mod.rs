//! What a list leaves in an arena, for the trim tests: blocks of a few
//! pages each freed between blocks that stay (the objects kept), so nothing
//! comes back from the heap's top alone; well below the periodic threshold.

/// Blocks freed.
pub const BLOCKS: usize = 192;
/// Their size.
const BLOCK: usize = 16 << 10;
/// Bytes freed in all.
pub const FREED: u64 = (BLOCKS * BLOCK) as u64;
const _: () = assert!(FREED < sitegrid_runtime::memory::TRIM_AFTER_BYTES / 2);

/// The blocks to free and the blocks that stay between them, allocated in
/// turns and written (resident).
pub fn allocate() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut freed = Vec::with_capacity(BLOCKS);
    let mut kept = Vec::with_capacity(BLOCKS);
    for i in 0..BLOCKS {
        freed.push(vec![i as u8; BLOCK]);
        kept.push(vec![i as u8; 64]);
    }
    (freed, kept)
}
