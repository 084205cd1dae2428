//! What `/readyz` and `/metrics` report: the controller's metrics and whether
//! it can do its job. The endpoints themselves are the shared operator
//! server's (`sitegrid_runtime::ops`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::metrics::Metrics;

/// Readiness and metrics, shared by the run loop and the operator endpoints.
pub struct Health {
    /// The metrics.
    pub metrics: Arc<Metrics>,
    ready: AtomicBool,
    why_not_ready: Mutex<String>,
}

impl Health {
    /// Not ready yet, for `reason`.
    pub fn new(metrics: Arc<Metrics>, reason: &str) -> Arc<Self> {
        Arc::new(Self {
            metrics,
            ready: AtomicBool::new(false),
            why_not_ready: Mutex::new(reason.to_owned()),
        })
    }

    /// `/readyz` answers 200 from now on.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    /// `/readyz` answers 503 with `reason`.
    pub fn set_not_ready(&self, reason: &str) {
        *self.why_not_ready.lock() = reason.to_owned();
        self.ready.store(false, Ordering::Release);
    }

    /// `Ok` when ready, else why not (what `/readyz` prints).
    pub fn check(&self) -> Result<(), String> {
        if self.ready.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(self.why_not_ready.lock().clone())
        }
    }
}
