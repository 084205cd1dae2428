//! Giving freed memory back to the system. glibc's allocator keeps what a
//! program frees in its arenas (one per thread that allocated) and returns
//! to the system only the top of a heap, so a process that peaked — ten
//! thousand watches opened by an attacker, then closed — stays resident at
//! its peak long after the memory is free. `malloc_trim(0)` returns every
//! whole free page of every arena (glibc >= 2.8), at the price of walking
//! them under their locks; so it runs only when a good amount more is free
//! than after the last trim, checked every few seconds (`mallinfo2`, which
//! sums what the arenas hold free).
//!
//! Written by hand: no well-kept crate wraps the two glibc calls, and the
//! allocator stays glibc (docs/decisions/0003-allocator.md). They are the
//! only unsafe code of the workspace; elsewhere (musl, other systems) this
//! does nothing.

use std::time::Duration;

/// How often the arenas' free bytes are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How much more must be free than after the last trim for another.
pub const TRIM_AFTER_BYTES: u64 = 8 << 20;

/// What the allocator holds that the program freed, in bytes (`None` where
/// the allocator cannot tell).
pub fn free_bytes() -> Option<u64> {
    glibc::free_bytes()
}

/// Returns the allocator's whole free pages to the system; whether it gave
/// anything back.
pub fn trim() -> bool {
    glibc::trim()
}

/// The trimming rule, apart from the allocator: remembers what was free
/// after the last trim.
#[derive(Debug, Default)]
pub struct Trimmer {
    free_after_trim: u64,
}

impl Trimmer {
    /// Whether to trim now, `free` bytes being free; a trim is worth it once
    /// [`TRIM_AFTER_BYTES`] more are free than after the last one (what was
    /// trimmed stays counted as free: its pages are gone, its chunks are not).
    pub fn due(&mut self, free: u64) -> bool {
        // Free memory taken again lowers the mark: what is freed next counts from there.
        self.free_after_trim = self.free_after_trim.min(free);
        free >= self.free_after_trim.saturating_add(TRIM_AFTER_BYTES)
    }

    /// Records a trim after which `free` bytes were free.
    pub fn trimmed(&mut self, free: u64) {
        self.free_after_trim = free;
    }
}

/// Checks every [`CHECK_EVERY`] and trims when [`Trimmer::due`], off the
/// async threads; runs until dropped. For a long-running server.
pub async fn give_back_freed_memory() {
    let mut trimmer = Trimmer::default();
    let mut every = tokio::time::interval(CHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(free) = free_bytes() else {
            return;
        };
        if !trimmer.due(free) {
            continue;
        }
        let after = tokio::task::spawn_blocking(|| {
            let released = trim();
            (released, free_bytes().unwrap_or_default())
        })
        .await;
        if let Ok((released, after)) = after {
            tracing::debug!(free, released, "gave freed memory back to the system");
            trimmer.trimmed(after);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    pub(super) fn free_bytes() -> Option<u64> {
        // SAFETY: mallinfo2 takes nothing and returns a struct by value; glibc
        // locks each arena while it sums it.
        let info = unsafe { libc::mallinfo2() };
        Some(info.fordblks as u64)
    }

    pub(super) fn trim() -> bool {
        // SAFETY: malloc_trim takes no pointer; glibc serialises it with every
        // other allocator call.
        unsafe { libc::malloc_trim(0) == 1 }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod glibc {
    pub(super) fn free_bytes() -> Option<u64> {
        None
    }

    pub(super) fn trim() -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_is_due_once_enough_more_is_free_than_after_the_last() {
        let mut t = Trimmer::default();
        assert!(
            !t.due(TRIM_AFTER_BYTES - 1),
            "a little free memory is left alone"
        );
        assert!(t.due(TRIM_AFTER_BYTES));
        t.trimmed(TRIM_AFTER_BYTES);
        assert!(
            !t.due(TRIM_AFTER_BYTES + 1),
            "what a trim left counted as free does not make the next one due"
        );
        // Some taken again, then freed again: counted from the lower mark.
        assert!(!t.due(1 << 20));
        assert!(t.due((1 << 20) + TRIM_AFTER_BYTES));
    }
}
