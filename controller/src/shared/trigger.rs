//! What makes a kube-runtime `Controller` look at its objects again: its
//! watches, retried with [`TriggerBackoff`] after a failure, and the changes
//! of a watched value, as a stream for `reconcile_all_on` ([`on_change`]).

use std::time::Duration;

/// How long a controller waits before watching again after a watch failed:
/// 0.5 s doubling to 5 s, back to 0.5 s after anything arrives.
///
/// kube-runtime's default (client-go's: 0.8 s doubling to 30 s, reset only
/// after 2 min without errors) is shared by all the watches of one
/// controller, so after an API server outage each failing watch pushed the
/// next attempt further: a change made a minute and a half after the API
/// server was back had not arrived yet. Five seconds between attempts of a
/// handful of watches is nothing for an API server.
#[derive(Clone, Debug)]
pub struct TriggerBackoff {
    next: Duration,
}

impl TriggerBackoff {
    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(5);
}

impl Default for TriggerBackoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Iterator for TriggerBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(wait)
    }
}

impl kube::runtime::utils::Backoff for TriggerBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// One `()` each time the watched value changes (a trigger for
/// `Controller::reconcile_all_on`); ends when the sender is dropped.
pub fn on_change<T: Send + Sync + 'static>(
    rx: tokio::sync::watch::Receiver<T>,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

#[cfg(test)]
mod tests {
    use kube::runtime::utils::Backoff;

    use super::*;

    #[test]
    fn watches_are_retried_within_five_seconds_and_quickly_after_a_success() {
        let mut backoff = TriggerBackoff::default();
        let waits: Vec<u64> = backoff
            .by_ref()
            .take(6)
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 5000, 5000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(500)));
    }
}
