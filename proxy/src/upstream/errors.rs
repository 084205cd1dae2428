//! Why an upstream list or watch failed, read off kube's error: the reason
//! the reflectors count (`upstream_errors_total{reason}`) and log.

use std::error::Error as StdError;

use kube::runtime::watcher;

use super::deadline::DeadlineElapsed;

/// Why an upstream list or watch failed: the `reason` label of
/// `upstream_errors_total` (cache metrics).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Reason {
    /// A body that is not the JSON it should be (a list refused whole, or
    /// one watch event skipped).
    Decode,
    /// 429 Too Many Requests, after the client's own retries.
    Throttled,
    /// Any other 5xx answer.
    ServerError,
    /// Another error Status (4xx) than 410.
    Rejected,
    /// 410 Gone: the version watched from was compacted; a relist follows.
    Expired,
    /// No answer in time: a list past its deadline, a watch silent past its timeout.
    Timeout,
    /// The TLS handshake failed (e.g. a serving certificate not trusted).
    Tls,
    /// The connection could not be made or broke.
    Connect,
    /// Anything else.
    Other,
}

impl Reason {
    /// Every reason, in label order.
    pub const ALL: [Reason; 9] = [
        Reason::Decode,
        Reason::Throttled,
        Reason::ServerError,
        Reason::Rejected,
        Reason::Expired,
        Reason::Timeout,
        Reason::Tls,
        Reason::Connect,
        Reason::Other,
    ];

    /// The label value (`server_error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Decode => "decode",
            Reason::Throttled => "throttled",
            Reason::ServerError => "server_error",
            Reason::Rejected => "rejected",
            Reason::Expired => "expired",
            Reason::Timeout => "timeout",
            Reason::Tls => "tls",
            Reason::Connect => "connect",
            Reason::Other => "other",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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

fn client_reason(err: &kube::Error) -> Reason {
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
