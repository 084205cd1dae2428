//! A list read gives its freed memory back at once, though it is far less
//! than the periodic rule waits for (`sitegrid_runtime::memory`). A file of
//! its own: its test is the only one in its process, so no other test's
//! allocations move the resident size it reads, and its trimmer trims no
//! other test's memory.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod leftovers;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test]
async fn what_a_list_left_free_goes_back_though_it_is_below_the_threshold() {
    use std::time::Duration;

    use leftovers::{BLOCKS, FREED};
    use sitegrid_runtime::memory::{
        give_back_freed_memory, note_list_read, resident_bytes, CHECK_EVERY,
    };

    let anon = || resident_bytes().expect("RssAnon");
    let trimmer = tokio::spawn(give_back_freed_memory());
    let (freed, kept) = leftovers::allocate();
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
