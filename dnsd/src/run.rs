//! The loop: on any change, take a consistent snapshot, render it, and
//! replace the file when the text changed; a failed write keeps the old
//! file and is retried with backoff.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::domain::ClusterDomain;
use crate::file::HostsFile;
use crate::hosts::{self, Hosts};
use crate::metrics::Metrics;
use crate::ready::Readiness;
use crate::watch::Watches;

/// First wait before retrying a failed write; doubled on each failure.
const RETRY_MIN: Duration = Duration::from_millis(500);
/// Longest wait between retries of a failed write.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// What the loop reports to.
#[derive(Clone)]
pub struct Report {
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// `/readyz`.
    pub ready: Arc<Readiness>,
}

/// Keeps `file` equal to what `watches` say, until `cancel`.
pub async fn run(
    watches: Watches,
    file: HostsFile,
    domain: ClusterDomain,
    report: Report,
    cancel: CancellationToken,
) {
    let file = Arc::new(Mutex::new(file));
    let mut retry: Option<(Instant, Duration)> = None;
    let mut warned = Warned::default();
    loop {
        match watches.aim() {
            Err(waiting) => report.ready.waiting_for(waiting),
            Ok(snapshot) => {
                warned.node(&snapshot.node, watches.node_exists());
                let hosts = hosts::hosts(&snapshot.view(), &domain);
                warned.skipped(&hosts);
                let text = hosts.render(&snapshot.node);
                retry = match write(&file, text, &hosts, &report).await {
                    Ok(()) => None,
                    Err(()) => {
                        let wait = retry.map_or(RETRY_MIN, |(_, w)| (w * 2).min(RETRY_MAX));
                        Some((Instant::now() + wait, wait))
                    }
                };
            }
        }
        let retry_at = retry.map(|(at, _)| at);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = watches.changed.notified() => {}
            () = sleep_until(retry_at), if retry_at.is_some() => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Makes the file hold `text` (off the async threads: fsync may block), and reports it.
async fn write(
    file: &Arc<Mutex<HostsFile>>,
    text: String,
    hosts: &Hosts,
    report: &Report,
) -> Result<(), ()> {
    if file.lock().holds(&text) {
        report.metrics.shows(hosts);
        report.ready.set_ready();
        return Ok(());
    }
    let writer = Arc::clone(file);
    let written = tokio::task::spawn_blocking(move || {
        let mut file = writer.lock();
        file.write(&text).map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|e| Err(format!("the write task failed: {e}")));
    match written {
        Ok(_) => {
            tracing::info!(path = %file.lock().path().display(), names = hosts.names(), records = hosts.records.len(), "hosts file written");
            report.metrics.wrote(hosts);
            report.ready.set_ready();
            Ok(())
        }
        Err(err) => {
            tracing::error!(error = %err, "cannot write the hosts file; it keeps its old content; retrying");
            report.metrics.write_failed();
            Err(())
        }
    }
}

/// Warnings said once per change, not on every event.
#[derive(Default)]
struct Warned {
    node_missing: bool,
    skipped: BTreeSet<String>,
}

impl Warned {
    fn node(&mut self, node: &str, exists: bool) {
        if !exists && !self.node_missing {
            tracing::warn!(
                node,
                "no such node: no site, so no names (check --hostname)"
            );
        }
        self.node_missing = !exists;
    }

    fn skipped(&mut self, hosts: &Hosts) {
        if hosts.skipped != self.skipped {
            for name in hosts.skipped.difference(&self.skipped) {
                tracing::warn!(name = %name, "left out: too long for DNS (a label over 63 characters)");
            }
            self.skipped.clone_from(&hosts.skipped);
        }
    }
}
