//! A list read gives its freed memory back at once, though it is far less
//! than the periodic rule waits for (`sitegrid_runtime::memory`). A file of
//! its own: its test is the only one in its process, so no other test's
//! allocations move the resident size it reads, and its trimmer trims no
//! other test's memory.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test]
async fn what_a_list_left_free_goes_back_though_it_is_below_the_threshold() {
    use std::time::Duration;

    use sitegrid_runtime::memory::{
        give_back_freed_memory, note_list_read, resident_bytes, CHECK_EVERY, TRIM_AFTER_BYTES,
    };

    // As a list leaves the sync thread's arena: blocks of a few pages freed
    // between blocks that stay (the objects kept), so nothing comes back
    // from the heap's top alone. Well below the periodic threshold.
    const BLOCKS: usize = 192;
    const BLOCK: usize = 16 << 10;
    const FREED: u64 = (BLOCKS * BLOCK) as u64;
    const _: () = assert!(FREED < TRIM_AFTER_BYTES / 2);
    let anon = || resident_bytes().expect("RssAnon");
    let trimmer = tokio::spawn(give_back_freed_memory());
    let mut kept = Vec::with_capacity(BLOCKS);
    let mut freed = Vec::with_capacity(BLOCKS);
    for i in 0..BLOCKS {
        freed.push(vec![i as u8; BLOCK]);
        kept.push(vec![i as u8; 64]);
    }
    let before = anon();
    drop(freed);
    assert!(
        before.saturating_sub(anon()) < FREED / 4,
        "freeing alone gives back little: RssAnon {before} -> {} bytes",
        anon()
    );

    // Past the periodic rule's first look: it leaves this memory where it is.
    tokio::time::sleep(CHECK_EVERY + Duration::from_secs(1)).await;
    let unlisted = anon();
    assert!(
        before.saturating_sub(unlisted) < FREED / 4,
        "no trim for this little without a list: RssAnon {before} -> {unlisted} bytes"
    );

    note_list_read();
    let mut after = anon();
    for _ in 0..200 {
        if unlisted.saturating_sub(after) >= FREED / 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = anon();
    }
    assert!(
        unlisted.saturating_sub(after) >= FREED / 2,
        "at least half of what the list left free went back: RssAnon {unlisted} -> {after} bytes"
    );
    assert_eq!(kept.len(), BLOCKS);
    trimmer.abort();
}
