//! Why an upstream list or watch failed, read off kube's error (the reason
//! the reflectors count in `upstream_errors_total{reason}`), and the one
//! place a reflector's errors are recorded and logged ([`ErrorStreak`]).

use std::error::Error as StdError;

use kube::runtime::watcher;

use sitegrid_cache::{Cache, ResourceKind};
use tracing::{debug, info, warn};

use super::deadline::DeadlineElapsed;
pub use sitegrid_cache::UpstreamErrorReason as Reason;

/// One reflector's errors: each is counted by reason and, while the kind
/// has nothing to serve, marks the upstream unreachable; a spell of them
/// is logged once — a warning when errors start or change reason, a note
/// when the stream works again, and each retry in between at debug level.
pub struct ErrorStreak {
    kind: ResourceKind,
    /// The reason of the last error, while errors go on.
    reason: Option<Reason>,
    /// Errors since the stream last worked.
    errors: u64,
}

impl ErrorStreak {
    /// No errors yet, for the reflector of `kind`.
    pub fn new(kind: ResourceKind) -> ErrorStreak {
        ErrorStreak {
            kind,
            reason: None,
            errors: 0,
        }
    }

    /// Records `err` in `cache`'s metrics and readiness, and logs it if it
    /// starts a spell (or changes its reason).
    pub fn failed(&mut self, cache: &Cache, err: &watcher::Error) {
        let (kind, reason) = (self.kind, reason(err));
        cache.metrics().upstream_error(kind, reason);
        if !cache.readiness().is_served(kind) {
            cache.readiness().upstream_unreachable();
        }
        if reason.is_upstream_failing() {
            cache.readiness().upstream_failing(reason.as_str());
        }
        self.errors += 1;
        if reason == Reason::Expired {
            // A compacted version: the watcher relists, as designed.
            info!(resource = %kind, error = %err, "upstream watch expired; relisting");
        } else if self.reason == Some(reason) {
            debug!(resource = %kind, %reason, error = %err, "upstream list/watch failed again; retrying");
        } else {
            warn!(resource = %kind, %reason, error = %err, "upstream list/watch failed; retrying with backoff, the cache keeps serving (repeats are logged at debug level)");
        }
        self.reason = Some(reason);
    }

    /// The stream yielded an event: a spell of errors, if any, is over.
    pub fn over(&mut self, cache: &Cache) {
        cache.readiness().upstream_working();
        if let Some(reason) = self.reason.take() {
            if reason != Reason::Expired || self.errors > 1 {
                info!(resource = %self.kind, errors = self.errors, last_reason = %reason, "upstream list/watch works again");
            }
        }
        self.errors = 0;
    }
}

/// The reason of a reflector's error.
pub fn reason(err: &watcher::Error) -> Reason {
    match err {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => client_reason(e),
        watcher::Error::WatchError(status) => by_code(status.code),
        watcher::Error::NoResourceVersion => Reason::Decode,
    }
}

/// The reason of a failed request of the client's own (discovery).
pub fn client_reason(err: &kube::Error) -> Reason {
    match err {
        kube::Error::Api(status) => by_code(status.code),
        kube::Error::SerdeError(_) | kube::Error::LinesCodecMaxLineLengthExceeded => Reason::Decode,
        other => by_source(other),
    }
}

fn by_code(code: u16) -> Reason {
    match code {
        410 => Reason::Expired,
        429 => Reason::Throttled,
        500..=599 => Reason::ServerError,
        _ => Reason::Rejected,
    }
}

/// A transport error by what caused it: TLS, a deadline, or the connection.
fn by_source(err: &(dyn StdError + 'static)) -> Reason {
    let mut connect = false;
    let found = visit(err, &mut connect, 0);
    match found {
        Some(reason) => reason,
        None if connect => Reason::Connect,
        None => Reason::Other,
    }
}

/// Looks for a telling cause in `err` and its sources, looking inside
/// `io::Error`s too (hyper-rustls wraps rustls' error in two of them, and
/// `io::Error::source` skips the error it wraps).
fn visit(err: &(dyn StdError + 'static), connect: &mut bool, depth: usize) -> Option<Reason> {
    if depth > 16 {
        return None;
    }
    if err.is::<rustls::Error>() {
        return Some(Reason::Tls);
    }
    if err.is::<DeadlineElapsed>() || err.is::<tokio::time::error::Elapsed>() {
        return Some(Reason::Timeout);
    }
    if let Some(h) = err.downcast_ref::<hyper_util::client::legacy::Error>() {
        *connect |= h.is_connect();
    }
    if let Some(h) = err.downcast_ref::<hyper::Error>() {
        *connect |= h.is_closed() || h.is_incomplete_message() || h.is_canceled();
    }
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        if let Some(inner) = io.get_ref() {
            if let Some(found) = visit(inner, connect, depth + 1) {
                return Some(found);
            }
        }
        if io.kind() == std::io::ErrorKind::TimedOut {
            return Some(Reason::Timeout);
        }
    }
    visit(err.source()?, connect, depth + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_status_code_and_cause() {
        let status = |code| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        let list = |e| reason(&watcher::Error::InitialListFailed(e));
        assert_eq!(list(status(429)), Reason::Throttled);
        assert_eq!(list(status(500)), Reason::ServerError);
        assert_eq!(list(status(410)), Reason::Expired);
        assert_eq!(list(status(403)), Reason::Rejected);
        // As hyper-rustls reports a refused certificate.
        let tls = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        assert_eq!(list(kube::Error::Service(Box::new(tls))), Reason::Tls);
        let late = DeadlineElapsed(std::time::Duration::from_secs(1));
        assert_eq!(list(kube::Error::Service(Box::new(late))), Reason::Timeout);
        let bad = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(list(kube::Error::SerdeError(bad)), Reason::Decode);
    }
}
