//! How long a failed reconcile waits before it is tried again.

use std::time::Duration;

/// How long a failed reconcile waits before it is retried (the first time;
/// see [`retry_after`]).
pub const RETRY_AFTER: Duration = Duration::from_secs(10);

/// The longest wait between retries of a grid that keeps failing.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// The wait before retry number `failures` (1, 2, …) of one grid:
/// [`RETRY_AFTER`] doubled each time, at most [`MAX_RETRY_AFTER`], so a grid
/// that keeps failing (an API server answering 500, a webhook down) costs
/// one attempt per five minutes rather than one per ten seconds.
pub fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (RETRY_AFTER * 2u32.pow(doublings)).min(MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_that_keeps_failing_waits_longer_each_time_up_to_five_minutes() {
        let waits: Vec<u64> = (1..=7).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(retry_after(u32::MAX), MAX_RETRY_AFTER);
    }
}
