//! A list's trim waits while the process grows, and still comes once it
//! stopped (`sitegrid_runtime::memory`). A file of its own, for the reason
//! `trim_after_list.rs` gives.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod leftovers;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test]
async fn a_list_read_while_the_process_grows_is_trimmed_once_it_stopped() {
    use std::time::Duration;

    use leftovers::{BLOCKS, FREED};
    use sitegrid_runtime::memory::{
        give_back_freed_memory, note_list_read, resident_bytes, AFTER_LIST, GROWING_BYTES,
    };

    let anon = || resident_bytes().expect("RssAnon");
    let trimmer = tokio::spawn(give_back_freed_memory());
    // Its first check (at once; a count of free bytes on a blocking thread)
    // done before the list, so the list is what it answers next.
    tokio::time::sleep(AFTER_LIST).await;
    let (freed, kept) = leftovers::allocate();
    drop(freed);

    // The trimmer, woken, takes the list's word at this test's next await
    // (its runtime has one thread), before any timer; the process then
    // grows by more than GROWING_BYTES before the trimmer looks again:
    // clients arriving.
    note_list_read();
    tokio::time::sleep(AFTER_LIST / 4).await;
    let grown: Vec<u8> = vec![1; (2 * GROWING_BYTES) as usize];
    let before = anon();
    tokio::time::sleep(AFTER_LIST * 3).await;
    let during = anon();
    assert!(
        before.saturating_sub(during) < FREED / 4,
        "no trim while the process grew: RssAnon {before} -> {during} bytes"
    );

    // Growth stopped: a later check trims what the list left.
    let mut after = anon();
    for _ in 0..600 {
        if during.saturating_sub(after) >= FREED / 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = anon();
    }
    assert!(
        during.saturating_sub(after) >= FREED / 2,
        "what the list left free went back once the process stopped growing: RssAnon {during} -> {after} bytes"
    );
    assert_eq!(
        (kept.len(), grown.len()),
        (BLOCKS, (2 * GROWING_BYTES) as usize)
    );
    trimmer.abort();
}
