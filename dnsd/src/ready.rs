//! Readiness, as `/readyz` reports it.
//!
//! ```text
//!   Pending(why) ──first hosts file written (or found identical)──► Ready
//! ```
//!
//! Ready is for good: a later failed write keeps the old file serving, and
//! is reported by the logs and `sitegrid_dnsd_write_errors_total` instead.

use parking_lot::Mutex;

/// Whether the first hosts file has been written, and if not, what dnsd waits for.
#[derive(Debug)]
pub struct Readiness(Mutex<State>);

#[derive(Debug)]
enum State {
    /// Not written yet; the reason is what `/readyz` prints.
    Pending(String),
    /// The file reflects the API server; stays so.
    Ready,
}

impl Readiness {
    /// Pending for `reason`.
    pub fn new(reason: &str) -> Self {
        Readiness(Mutex::new(State::Pending(reason.to_owned())))
    }

    /// Still pending, now for `reason` (no effect once ready).
    pub fn waiting_for(&self, reason: &str) {
        let mut state = self.0.lock();
        if let State::Pending(why) = &mut *state {
            reason.clone_into(why);
        }
    }

    /// The first file is there.
    pub fn set_ready(&self) {
        *self.0.lock() = State::Ready;
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), String> {
        match &*self.0.lock() {
            State::Ready => Ok(()),
            State::Pending(why) => Err(why.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_then_ready_for_good() {
        let r = Readiness::new("starting");
        assert_eq!(r.check(), Err("starting".into()));
        r.waiting_for("listing pods");
        assert_eq!(r.check(), Err("listing pods".into()));
        r.set_ready();
        r.waiting_for("listing pods");
        assert_eq!(r.check(), Ok(()));
    }
}
