//! What can go wrong, each worded as the one line the user reads.
//!
//! The API server's own refusals read as kubectl words them (`Error from
//! server (Forbidden): …`, `The connection to the server … was refused`), so
//! a user who knows kubectl's messages knows these; sitegrid's own cases
//! (CRDs not installed, an unknown node) say what to do next.

use std::error::Error as _;

use kube::core::Status;

/// How to install the CRDs, for every message that says they are missing.
pub const INSTALL_CRDS: &str =
    "install them with `kubectl apply -f deploy/crds/` (or `sitegrid-controller crds | kubectl apply -f -`)";

/// A failure of one `kubectl sitegrid` command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig (or `--context`) could not be used.
    #[error("error: {0:#}")]
    Config(anyhow::Error),
    /// The API server refused the connection (kubectl's wording).
    #[error("The connection to the server {server} was refused - did you specify the right host or port?")]
    Refused {
        /// `host:port` from the kubeconfig.
        server: String,
    },
    /// Any other transport failure: DNS, TLS, a timeout (kubectl's wording).
    #[error("Unable to connect to the server: {cause}")]
    Unreachable {
        /// The innermost cause, e.g. `invalid peer certificate: UnknownIssuer`.
        cause: String,
    },
    /// Resources of sitegrid's CRDs answered 404: the CRDs are not installed.
    #[error("error: {}", crds_missing(.resources))]
    CrdsMissing {
        /// The missing resources, e.g. `deploymentgrids.superedge.io`.
        resources: Vec<String>,
    },
    /// A named object does not exist.
    #[error("error: {kind} {name:?} not found{}", in_namespace(.namespace.as_deref()))]
    NotFound {
        /// `node`, `service`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Its namespace, for namespaced kinds.
        namespace: Option<String>,
    },
    /// The credentials were refused (kubectl's wording).
    #[error("error: You must be logged in to the server (Unauthorized)")]
    Unauthorized,
    /// Any other refusal by the API server (kubectl's wording).
    #[error("Error from server ({}): {}", reason(.0), .0.message)]
    Api(Box<Status>),
    /// The API server answered something this tool cannot read.
    #[error("error: {0}")]
    Unreadable(String),
}

fn crds_missing(resources: &[String]) -> String {
    format!(
        "sitegrid's CRDs are not installed in this cluster (the API server does not serve {}): {INSTALL_CRDS}",
        resources.join(", ")
    )
}

fn in_namespace(namespace: Option<&str>) -> String {
    namespace.map_or_else(String::new, |ns| format!(" in namespace {ns:?}"))
}

/// kubectl's `Error from server (<Reason>)`: the reason, else the HTTP code's.
fn reason(status: &Status) -> String {
    if !status.reason.is_empty() && status.reason != "Failed to parse error data" {
        return status.reason.clone();
    }
    http::StatusCode::from_u16(status.code)
        .ok()
        .and_then(|c| c.canonical_reason())
        .map_or_else(|| status.code.to_string(), |r| r.replace(' ', ""))
}

impl Error {
    /// A client error of a request to `server` (`host:port`), as kubectl words it.
    pub fn from_kube(err: kube::Error, server: &str) -> Error {
        match err {
            kube::Error::Api(status) if status.code == 401 => Error::Unauthorized,
            kube::Error::Api(status) => Error::Api(status),
            kube::Error::SerdeError(e) => Error::Unreadable(format!("unexpected answer: {e}")),
            other if refused(&other) => Error::Refused {
                server: server.to_owned(),
            },
            other => Error::Unreachable {
                cause: innermost(&other),
            },
        }
    }

    /// Whether the API server answered 404 (a missing object or resource).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api(status) if status.code == 404)
    }
}

/// Whether a connection was refused somewhere in `err`'s causes.
fn refused(err: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = err.source();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = e.source();
    }
    false
}

/// The last message in `err`'s causes (the one that says what happened).
fn innermost(err: &kube::Error) -> String {
    let mut last = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        last = e.to_string();
        source = e.source();
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_kubectl_words_them() {
        let forbidden = Status::failure("nodes is forbidden: User \"x\" cannot list", "Forbidden")
            .with_code(403);
        assert_eq!(
            Error::from_kube(kube::Error::Api(forbidden.boxed()), "h:1").to_string(),
            "Error from server (Forbidden): nodes is forbidden: User \"x\" cannot list"
        );
        // A body that was not a Status (a proxy's HTML page): the HTTP reason.
        let raw = Status::failure("bad gateway", "Failed to parse error data").with_code(502);
        assert_eq!(
            Error::Api(raw.boxed()).to_string(),
            "Error from server (BadGateway): bad gateway"
        );
        let unauthorized = Status::failure("Unauthorized", "Unauthorized").with_code(401);
        assert_eq!(
            Error::from_kube(kube::Error::Api(unauthorized.boxed()), "h:1").to_string(),
            "error: You must be logged in to the server (Unauthorized)"
        );
    }

    #[test]
    fn missing_objects_and_crds_say_what_and_where() {
        let e = Error::NotFound {
            kind: "service",
            name: "web".into(),
            namespace: Some("shop".into()),
        };
        assert_eq!(
            e.to_string(),
            "error: service \"web\" not found in namespace \"shop\""
        );
        let e = Error::CrdsMissing {
            resources: vec!["nodeunits.site.superedge.io".into()],
        };
        let line = e.to_string();
        assert!(line.contains("nodeunits.site.superedge.io"), "{line}");
        assert!(line.contains("kubectl apply -f deploy/crds/"), "{line}");
    }
}
