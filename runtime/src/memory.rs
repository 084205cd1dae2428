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
//! Counting the free bytes walks the arenas too, and a heap of hundreds of
//! megabytes in many chunks (ten thousand watches held open) took up to
//! 39 ms, stalling allocations meanwhile; a good client's LIST waited
//! 19 ms behind one. So the allocator is looked at only with a reason: the
//! process stopped growing, many connections ended since the last look
//! ([`note_freed`]), or, with neither, a while has passed, doubling from
//! [`CHECK_EVERY`] to [`QUIET_MAX`] while looks find nothing to trim.
//!
//! A list read from the API server is the other reason, and calls for a
//! trim soon after whatever is free ([`note_list_read`]): its pages and
//! their decoded copies pass through the sync thread's arena and leave it
//! fragmented, holding free pages between the cache's objects. In a
//! cluster of a few thousand endpoints that is a few MiB, below the
//! threshold above, so a node at rest would keep it for good; lists are
//! rare (the first sync, a kind's first request, a relist after an expired
//! watch or an outage), and the walk costs little then. Lists ending
//! within [`AFTER_LIST`] of each other give one trim, and a process still
//! growing meanwhile (a burst of clients beside the list) is not walked:
//! the trim waits for the first check at which it stopped.
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

/// The longest the allocator goes without a look when nothing suggests
/// memory was freed.
pub const QUIET_MAX: Duration = Duration::from_secs(60);

/// How many ended connections (or other [`note_freed`] calls) since the
/// last look call for another.
pub const FREED_FOR_A_LOOK: u64 = 64;

/// How long a trim called for by a list waits for other lists ending with
/// it (a proxy's first sync lists several kinds at once), so they give one:
/// each list ending restarts the wait.
pub const AFTER_LIST: Duration = Duration::from_millis(200);

/// Calls of [`note_freed`] since the process started.
static FREED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Tells the trimmer that something sizeable was freed (a connection and
/// what it held); enough of them call for a look at the allocator.
pub fn note_freed() {
    FREED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A list's wake-up of the trimmer (a permit kept if it is not waiting).
static LIST_READ: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Tells the trimmer that a list from the API server was read and applied:
/// what its pages took is free now. The trimmer gives it back
/// [`AFTER_LIST`] later, whatever the free count (or, if the process is
/// growing then, at the first check after it stopped).
pub fn note_list_read() {
    LIST_READ.notify_one();
}

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
    /// It grew at a check since the last look at the allocator.
    grew: bool,
    /// [`note_freed`]'s count at the last look.
    freed_at_look: u64,
    /// When the next look is due without a reason, and how long after a
    /// look that one is.
    next_look: Duration,
    quiet: Duration,
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

    /// Whether to look at the allocator (count its free bytes) at this
    /// check, `resident` bytes being resident, `freed` the count of
    /// [`note_freed`], `now` the time since the checks began: when the
    /// process stopped growing, when [`FREED_FOR_A_LOOK`] were freed since
    /// the last look, or when the quiet time since it has passed.
    pub fn look_now(&mut self, resident: u64, freed: u64, now: Duration) -> bool {
        if self.still_growing(resident) {
            self.grew = true;
            return false;
        }
        let look = std::mem::take(&mut self.grew)
            || freed >= self.freed_at_look.saturating_add(FREED_FOR_A_LOOK)
            || now >= self.next_look;
        if look {
            self.freed_at_look = freed;
        }
        look
    }

    /// Records a look at `now` and whether it led to a trim: the quiet time
    /// doubles (up to [`QUIET_MAX`]) while looks find nothing to trim.
    pub fn looked(&mut self, trimmed: bool, now: Duration) {
        self.quiet = if trimmed {
            CHECK_EVERY
        } else {
            (self.quiet * 2).clamp(CHECK_EVERY, QUIET_MAX)
        };
        self.next_look = now + self.quiet;
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

/// Checks every [`CHECK_EVERY`] and trims when [`Trimmer::due`], or
/// [`AFTER_LIST`] after [`note_list_read`], off the async threads; runs
/// until dropped. For a long-running server.
pub async fn give_back_freed_memory() {
    let mut trimmer = Trimmer::default();
    let mut every = tokio::time::interval(CHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = tokio::time::Instant::now();
    // A list's trim put off while the process grew: the resident size then.
    let mut list_waiting: Option<u64> = None;
    loop {
        let listed = tokio::select! {
            _ = every.tick() => false,
            () = LIST_READ.notified() => true,
        };
        if listed {
            let at_list = resident_bytes();
            while tokio::time::timeout(AFTER_LIST, LIST_READ.notified())
                .await
                .is_ok()
            {}
            let now = resident_bytes();
            if let (Some(at_list), Some(now)) = (at_list, now) {
                if now > at_list.saturating_add(GROWING_BYTES) {
                    // Looked at again a whole check from now, not at a tick
                    // already due.
                    list_waiting = Some(now);
                    every.reset();
                    continue;
                }
            }
            if !trim_off_thread(&mut trimmer, "a list was read").await {
                return;
            }
            list_waiting = None;
            continue;
        }
        let Some(resident) = resident_bytes() else {
            return;
        };
        if let Some(then) = list_waiting {
            if resident > then.saturating_add(GROWING_BYTES) {
                list_waiting = Some(resident);
                continue;
            }
            list_waiting = None;
            if !trim_off_thread(&mut trimmer, "a list was read").await {
                return;
            }
            trimmer.looked(true, start.elapsed());
            continue;
        }
        let freed = FREED.load(std::sync::atomic::Ordering::Relaxed);
        if !trimmer.look_now(resident, freed, start.elapsed()) {
            continue;
        }
        // On a blocking thread, as the trim: no async thread (and no request
        // it would serve) waits for the walk.
        let Ok(Some(free)) = tokio::task::spawn_blocking(free_bytes).await else {
            return;
        };
        let due = trimmer.due(free, resident);
        if due && !trim_off_thread(&mut trimmer, "memory was freed").await {
            return;
        }
        trimmer.looked(due, start.elapsed());
    }
}

/// Trims on a blocking thread and records what it left in `trimmer`; false
/// if the runtime is going away.
async fn trim_off_thread(trimmer: &mut Trimmer, why: &'static str) -> bool {
    let before = resident_bytes().unwrap_or_default();
    let after = tokio::task::spawn_blocking(|| {
        let released = trim();
        let free = free_bytes().unwrap_or_default();
        (released, free, resident_bytes().unwrap_or_default())
    })
    .await;
    let Ok((released, free, resident)) = after else {
        return false;
    };
    tracing::debug!(
        why,
        resident_before = before,
        resident_after = resident,
        free_after = free,
        released,
        "gave freed memory back to the system"
    );
    trimmer.trimmed(free, resident);
    true
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

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_steady_process_is_looked_at_less_and_less_often() {
        let mut t = Trimmer::default();
        let mut looks = Vec::new();
        for check in 0..40u32 {
            let now = CHECK_EVERY * check;
            if t.look_now(300 * MIB, 0, now) {
                looks.push(now.as_secs());
                t.looked(false, now);
            }
        }
        // 5 s apart at first, then 10, 20, 40, then a minute.
        assert_eq!(looks, [0, 5, 15, 35, 75, 135, 195]);
    }

    #[test]
    fn ended_connections_or_growth_that_stopped_call_for_a_look_at_once() {
        let mut t = Trimmer::default();
        assert!(t.look_now(300 * MIB, 0, Duration::ZERO), "the first check");
        t.looked(false, Duration::ZERO);
        let few = FREED_FOR_A_LOOK - 1;
        assert!(!t.look_now(300 * MIB, few, S), "a few connections ended");
        assert!(t.look_now(300 * MIB, FREED_FOR_A_LOOK, 2 * S), "many ended");
        t.looked(false, 2 * S);
        // An attack arrives: no look while the process grows, one when it stopped.
        let n = FREED_FOR_A_LOOK;
        assert!(!t.look_now(400 * MIB, n, 3 * S));
        assert!(!t.look_now(500 * MIB, n, 4 * S));
        assert!(t.look_now(500 * MIB, n, 5 * S), "it stopped growing");
        t.looked(false, 5 * S);
        assert!(!t.look_now(500 * MIB, n, 6 * S), "held: no reason to look");
        // It leaves: ten thousand connections end.
        assert!(t.look_now(500 * MIB, n + 10_000, 7 * S));
        // A trim brings the looks back to every check.
        t.looked(true, 7 * S);
        assert!(t.look_now(20 * MIB, n + 10_000, 7 * S + CHECK_EVERY));
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
