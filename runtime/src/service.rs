//! The start-up protocol of a service manager (systemd's `Type=notify`): a
//! binary says it is ready once it serves, so that what is ordered after it
//! starts only then. The node cache depends on it: run as a host service
//! (`deploy/static/sitegrid-proxy.service`), sitegrid-proxy is ready before
//! the kubelet, whose first lists would otherwise be refused and retried
//! after client-go's backoff, seconds after the proxy could have answered.

/// Tells the service manager that started this process that it is ready
/// (`READY=1` on systemd's `NOTIFY_SOCKET`); nothing when none did. A
/// failure is logged: the binary serves all the same, and systemd says the
/// unit did not start in time.
pub fn notify_ready() {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    match sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
        Ok(()) => tracing::info!("told the service manager this process is ready"),
        Err(err) => {
            tracing::warn!(%err, "could not tell the service manager this process is ready")
        }
    }
}
