//! Giving freed memory back to the system. glibc's allocator keeps what a
//! program frees in its arenas (one per thread that allocated) and returns
//! to the system only the top of a heap, so a process that peaked — ten
//! thousand watches opened by an attacker, then closed — stays resident at
//! its peak long after the memory is free. `malloc_trim(0)` returns every
//! whole free page of every arena (glibc >= 2.8), at the price of walking
//! them under their locks; so it runs only when the process has stopped
//! growing (its resident anonymous memory), the arenas hold a good amount
//! free (`mallinfo2`) and, since the last trim, more was freed or the process
//! grew, checked every few seconds ([`Trimmer`]).
//!
//! Written by hand: no well-kept crate wraps the two glibc calls, and the
//! allocator stays glibc (docs/decisions/0003-allocator.md). They are the
//! only unsafe code of the workspace; elsewhere (musl, other systems) this
//! does nothing.

use std::time::Duration;

/// How often the arenas' free bytes and the resident size are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How much must be free, and how much more freed or grown since the last
/// trim, for another.
pub const TRIM_AFTER_BYTES: u64 = 8 << 20;

/// Growth between two looks that means the process is still growing.
pub const GROWING_BYTES: u64 = 1 << 20;

/// What the allocator holds that the program freed, in bytes (`None` where
/// the allocator cannot tell).
pub fn free_bytes() -> Option<u64> {
    glibc::free_bytes()
}

/// The process's resident anonymous memory (heap and stacks), in bytes.
pub fn resident_bytes() -> Option<u64> {
    let status = procfs::process::Process::myself().ok()?.status().ok()?;
    status.rssanon.map(|kib| kib * 1024)
}

/// Returns the allocator's whole free pages to the system; whether it gave
/// anything back.
pub fn trim() -> bool {
    glibc::trim()
}

/// The trimming rule, apart from the allocator: remembers how much was free
/// and how much resident after the last trim.
///
/// A trim is due when a good amount is free and, since the last trim, either
/// more has been freed or the process has grown. Neither count is enough
/// alone: what a trim gave back stays counted as free (its pages are gone,
/// its chunks are not), so memory taken again, made resident and freed once
/// more leaves the free count where it was; and a trim in the middle of a
/// burst, while the memory is in use, leaves the process as large as it
/// was, so the resident size alone would not call for the trim after it.
/// Each trim moves both marks to what it left, so memory in use does not
/// make trims repeat.
#[derive(Debug, Default)]
pub struct Trimmer {
    free_after_trim: u64,
    resident_after_trim: u64,
    /// The resident size at the last look.
    resident_before: Option<u64>,
}

impl Trimmer {
    /// Whether the process grew by more than [`GROWING_BYTES`] since the
    /// last look, `resident` bytes being resident now. No trim then, nor
    /// the count of free bytes: both walk the arenas under their locks,
    /// which stalls every thread that allocates meanwhile (a good client's
    /// request, mid-attack), and while memory is being taken a trim gives
    /// back little that is not taken again at once. The trim comes at the
    /// first look after the growth stopped.
    pub fn still_growing(&mut self, resident: u64) -> bool {
        let before = self.resident_before.replace(resident);
        before.is_some_and(|before| resident > before.saturating_add(GROWING_BYTES))
    }

    /// Whether to trim now, `free` bytes being free and `resident` resident.
    pub fn due(&mut self, free: u64, resident: u64) -> bool {
        // Memory taken again, or a process that shrank on its own, counts from there.
        self.free_after_trim = self.free_after_trim.min(free);
        self.resident_after_trim = self.resident_after_trim.min(resident);
        free >= TRIM_AFTER_BYTES
            && (free >= self.free_after_trim.saturating_add(TRIM_AFTER_BYTES)
                || resident >= self.resident_after_trim.saturating_add(TRIM_AFTER_BYTES))
    }

    /// Records a trim after which `free` bytes were free and `resident` resident.
    pub fn trimmed(&mut self, free: u64, resident: u64) {
        self.free_after_trim = free;
        self.resident_after_trim = resident;
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
        let Some(resident) = resident_bytes() else {
            return;
        };
        if trimmer.still_growing(resident) {
            continue;
        }
        let Some(free) = free_bytes() else {
            return;
        };
        if !trimmer.due(free, resident) {
            continue;
        }
        let after = tokio::task::spawn_blocking(|| {
            let released = trim();
            let free = free_bytes().unwrap_or_default();
            (released, free, resident_bytes().unwrap_or_default())
        })
        .await;
        if let Ok((released, free_after, resident_after)) = after {
            tracing::debug!(
                free,
                resident,
                resident_after,
                released,
                "gave freed memory back to the system"
            );
            trimmer.trimmed(free_after, resident_after);
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

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_trim_is_due_once_memory_is_free_and_more_was_freed_or_the_process_grew() {
        let mut t = Trimmer::default();
        assert!(
            !t.due(TRIM_AFTER_BYTES - 1, 100 * MIB),
            "little free: left alone"
        );
        assert!(t.due(TRIM_AFTER_BYTES, 100 * MIB));
        // A trim in the middle of a burst: the memory is in use, little is free.
        t.trimmed(10 * MIB, 300 * MIB);
        assert!(!t.due(12 * MIB, 301 * MIB), "nothing new: no trim again");
        // The burst over: much more free, the process as large as it was.
        assert!(t.due(280 * MIB, 300 * MIB));
        t.trimmed(280 * MIB, 20 * MIB);
        // What the trim gave back still counts as free: nothing new, no trim.
        assert!(!t.due(280 * MIB, 20 * MIB));
        // Taken again and freed again: free as before, but resident again.
        assert!(t.due(280 * MIB, 120 * MIB));
    }

    #[test]
    fn no_trim_while_the_process_grows_and_one_once_it_stopped() {
        let mut t = Trimmer::default();
        assert!(
            !t.still_growing(16 * MIB),
            "the first look has nothing to compare"
        );
        assert!(!t.still_growing(16 * MIB + GROWING_BYTES), "steady");
        // An attack: the process grows from one look to the next.
        assert!(t.still_growing(120 * MIB));
        assert!(t.still_growing(300 * MIB));
        // It stopped (the attackers left, their memory freed but resident):
        // a trim is due at this look.
        assert!(!t.still_growing(300 * MIB));
        assert!(t.due(280 * MIB, 300 * MIB));
        t.trimmed(280 * MIB, 18 * MIB);
        // Shrinking is not growing.
        assert!(!t.still_growing(18 * MIB));
    }
}
