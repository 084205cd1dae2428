//! Passthrough: every request the cache does not serve goes to the API server
//! and the answer streams back unchanged (status, headers, body; watches of
//! other kinds included) — as whom depends on the caller, so that a local
//! client never gets more than it could do on its own:
//!
//! - with its own `Authorization` (a bearer token, say): forwarded with it
//!   and none of the proxy's credentials; the API server authorizes the
//!   caller;
//! - with a client certificate the proxy verified (`--ca-file`): with the
//!   proxy's credentials and `Impersonate-User`/`Impersonate-Group` naming
//!   the certificate's CN and O (the proxy's RBAC limits whom it may
//!   impersonate); the API server authorizes that user;
//! - this node's kubelet (on the kubelet port, see [`crate::http::caller`]):
//!   with the kubelet's own client certificate
//!   ([`crate::upstream::kubelet`]), none of the proxy's credentials;
//! - with neither: with the proxy's credentials, but only for Events (what
//!   kube-proxy sends that the cache does not answer) and the read-only
//!   discovery, `/version` and health ([`kube_proxy_needs`]; the table in
//!   proxy/README.md decides); anything else gets 403 naming
//!   `--anonymous-passthrough=all`, which widens it to everything the proxy
//!   may do.
//!
//! A caller's own `Impersonate-*` headers travel only with its own
//! credentials (the API server checks its right to impersonate); they are
//! dropped otherwise.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response};
use http_body_util::{LengthLimitError, Limited};
use hyper::body::Incoming;
use sitegrid_apimachinery::{path::ApiPath, Status};
use tower::ServiceExt;
use tower_http::timeout::{TimeoutBody, TimeoutError};
use tracing::{debug, warn};

use crate::{
    http::{response, Body, BoxError, Caller},
    upstream::{kubelet::KubeletCredentials, Upstream},
};

/// Hop-by-hop headers (RFC 9110 §7.6.1): never forwarded.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    header::HOST,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

/// The flag that lets requests without credentials do everything the proxy may.
pub const WIDEN_FLAG: &str = "--anonymous-passthrough=all";

/// What a request without credentials may do with the proxy's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AnonymousPassthrough {
    /// What kube-proxy needs past the cache: creating and patching Events;
    /// and discovery, `/version` and health (read-only).
    #[default]
    KubeProxy,
    /// Everything the proxy's own credentials allow (any process on the node
    /// can then act as the proxy).
    All,
}

/// The passthrough branch: two upstream clients and the rule between them.
#[derive(Clone)]
pub struct Passthrough {
    /// With the proxy's credentials.
    proxy: Upstream,
    /// Without them: for requests that carry their own.
    caller: Upstream,
    /// This node's kubelet's own credentials, for its requests (the kubelet port).
    kubelet: Option<std::sync::Arc<KubeletCredentials>>,
    anonymous: AnonymousPassthrough,
    max_body: usize,
    /// A request body that stalls this long fails (408).
    body_idle: Duration,
}

/// How long a passthrough request body may stall by default (kube-apiserver's
/// header read timeout; a client sends a body at once).
pub const DEFAULT_BODY_IDLE: Duration = Duration::from_secs(32);

impl Passthrough {
    /// `proxy` carries the proxy's credentials, `caller` none; bodies
    /// above `max_body` bytes get 413.
    pub fn new(
        proxy: Upstream,
        caller: Upstream,
        anonymous: AnonymousPassthrough,
        max_body: usize,
    ) -> Passthrough {
        Passthrough {
            proxy,
            caller,
            kubelet: None,
            anonymous,
            max_body,
            body_idle: DEFAULT_BODY_IDLE,
        }
    }

    /// A request body with no part arriving for `idle` is given up (408 to the
    /// client, the upstream request aborted).
    pub fn with_body_idle_timeout(mut self, idle: Duration) -> Passthrough {
        self.body_idle = idle;
        self
    }

    /// Requests of this node's kubelet go upstream with these credentials.
    pub fn with_kubelet(mut self, kubelet: std::sync::Arc<KubeletCredentials>) -> Passthrough {
        self.kubelet = Some(kubelet);
        self
    }

    /// Forwards `req` upstream as its caller, streaming the body.
    pub async fn forward<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        match self.send(req).await {
            Ok(resp) => resp.map(Body::new),
            Err(not) => not.into_response(),
        }
    }

    /// Forwards `req` upstream as its caller: the API server's answer, or
    /// why there is none.
    pub async fn send<B>(&self, req: Request<B>) -> Result<Response<Incoming>, NotForwarded>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let refused = |status: Status| Err(NotForwarded::Answered(response::status(&status)));
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(NotForwarded::Answered(too_large(self.max_body)));
        }
        let (mut parts, body) = req.into_parts();
        let caller = Caller::classified(&parts);
        if caller == Caller::Anonymous
            && self.anonymous == AnonymousPassthrough::KubeProxy
            && !kube_proxy_needs(&parts.method, parts.uri.path())
        {
            return refused(forbidden(&parts.method, parts.uri.path()));
        }
        // The downstream protocol (HTTP/2 from kube-proxy over TLS, say) says
        // nothing about the upstream connection's: the pooled client picks its own.
        parts.version = http::Version::default();
        for h in HOP_BY_HOP {
            parts.headers.remove(h);
        }
        let kubelet;
        let upstream = match &caller {
            Caller::Own => &self.caller,
            Caller::Certificate(subject) => {
                strip_caller_credentials(&mut parts.headers);
                if let Err(status) = impersonate(&mut parts.headers, &subject.user, &subject.groups)
                {
                    return refused(status);
                }
                &self.proxy
            }
            Caller::Kubelet => {
                strip_caller_credentials(&mut parts.headers);
                kubelet = self.kubelet.as_ref().and_then(|k| k.upstream());
                match &kubelet {
                    Some(upstream) => upstream,
                    None => {
                        return refused(Status::service_unavailable(
                            "sitegrid-proxy has no usable client certificate of the kubelet (--kubelet-client-certificate) to pass its requests on with",
                            10,
                        ))
                    }
                }
            }
            Caller::Stranger(_) => return refused(stranger()),
            Caller::Anonymous => {
                strip_caller_credentials(&mut parts.headers);
                &self.proxy
            }
        };
        parts.uri = match parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .parse()
        {
            Ok(uri) => uri,
            Err(_) => return refused(Status::bad_request("invalid request path")),
        };
        // Undeclared (chunked) bodies are cut off at the limit while streaming.
        let body = Body::new(Limited::new(
            // A client that stalls in the middle of a body (a slow-body
            // attack, or a vanished peer) does not hold a connection to the
            // API server open forever.
            TimeoutBody::new(self.body_idle, body),
            self.max_body,
        ));
        match upstream
            .clone()
            .oneshot(Request::from_parts(parts, body))
            .await
        {
            Ok(resp) => Ok(resp),
            Err(err) if caused_by::<LengthLimitError>(&*err) => {
                Err(NotForwarded::Answered(too_large(self.max_body)))
            }
            Err(err) if caused_by::<TimeoutError>(&*err) => {
                debug!(error = %err, "passthrough request body stalled");
                refused(Status::failure(
                    408,
                    Some("Timeout"),
                    format!(
                        "sitegrid-proxy: no part of the request body arrived for {:?}",
                        self.body_idle
                    ),
                ))
            }
            Err(err) => Err(NotForwarded::Unreachable(err.to_string())),
        }
    }
}

/// Why a request got no answer from the API server.
#[derive(Debug)]
pub enum NotForwarded {
    /// The proxy answered it itself (refused, too large, stalled, a bad path).
    Answered(Response<Body>),
    /// The API server could not be reached (or the connection broke before
    /// its answer): `503`, or an answer from the node cache.
    Unreachable(String),
}

impl NotForwarded {
    /// The response to give.
    pub fn into_response(self) -> Response<Body> {
        match self {
            NotForwarded::Answered(resp) => resp,
            NotForwarded::Unreachable(err) => {
                warn!(error = %err, "upstream unreachable for passthrough");
                response::status(&Status::service_unavailable(
                    format!("sitegrid-proxy cannot reach the API server: {err}"),
                    1,
                ))
            }
        }
    }
}

/// 403 for a request on the kubelet port that is not this node's kubelet.
pub fn stranger() -> Status {
    Status::failure(
        403,
        Some("Forbidden"),
        "forbidden: the kubelet port of sitegrid-proxy serves this node's kubelet only \
         (a client certificate of system:node:<this node> signed by --kubelet-client-ca-file, \
         or its own bearer token)",
    )
}

/// Drops what a caller could use to speak for someone else through the
/// proxy's identity: `Authorization` and every `Impersonate-*` header.
fn strip_caller_credentials(headers: &mut HeaderMap) {
    headers.remove(header::AUTHORIZATION);
    let impersonating: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("impersonate-"))
        .cloned()
        .collect();
    for k in impersonating {
        headers.remove(k);
    }
}

/// Adds the impersonation headers for `user` in `groups`.
fn impersonate(headers: &mut HeaderMap, user: &str, groups: &[String]) -> Result<(), Status> {
    let value = |v: &str| {
        HeaderValue::from_str(v).map_err(|_| {
            Status::bad_request(format!(
                "the client certificate's subject {v:?} cannot be sent as an Impersonate header"
            ))
        })
    };
    headers.insert("impersonate-user", value(user)?);
    for g in groups {
        headers.append("impersonate-group", value(g)?);
    }
    Ok(())
}

/// Whether a request without credentials may pass through as the proxy:
/// what kube-proxy 1.20 and 1.29–1.35 send that the cache does not answer
/// (Events created or patched, core v1 and events.k8s.io/v1; its own Node
/// comes from the cache), and discovery, `/version` and the API server's
/// health (GET), which kubectl on the node needs to read the cache. The
/// table in proxy/README.md lists each; `tests/it/kube_proxy_table.rs`
/// holds this function to it.
pub fn kube_proxy_needs(method: &Method, path: &str) -> bool {
    let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    // Nothing that a server could read as another path.
    if segments
        .iter()
        .any(|s| *s == "." || *s == ".." || s.contains('%'))
    {
        return false;
    }
    let Some(api) = ApiPath::parse(path) else {
        // Not a resource: discovery and the public endpoints.
        return *method == Method::GET
            && matches!(
                segments.as_slice(),
                ["version"]
                    | ["healthz"]
                    | ["livez"]
                    | ["readyz"]
                    | ["api"]
                    | ["api", "v1"]
                    | ["apis"]
                    | ["apis", _]
                    | ["apis", _, _]
            );
    };
    if api.legacy_watch || api.more {
        return false;
    }
    let events_api = matches!(
        (api.group, api.version),
        ("", "v1") | ("events.k8s.io", "v1")
    );
    match (method.as_str(), api.namespace, api.resource, api.name) {
        ("POST", Some(_), "events", None) | ("PATCH", Some(_), "events", Some(_)) => events_api,
        _ => false,
    }
}

/// 403 for a request without credentials outside what kube-proxy needs.
fn forbidden(method: &Method, path: &str) -> Status {
    Status::failure(
        403,
        Some("Forbidden"),
        format!(
            "forbidden: sitegrid-proxy passes requests without credentials to the API server only for what \
             kube-proxy needs (Events; discovery and /version), not {method} {path}: send your \
             own credentials (a bearer token, or a client certificate signed by the proxy's --ca-file), or \
             start the proxy with {WIDEN_FLAG}"
        ),
    )
}

fn too_large(max_body: usize) -> Response<Body> {
    response::status(&Status::request_entity_too_large(format!(
        "the request body is larger than the limit of {max_body} bytes"
    )))
}

/// Whether the length limit caused `err` (hyper wraps the body's error).
fn caused_by<E: std::error::Error + 'static>(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<E>() {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unit view of the README's table (the integration test
    /// `kube_proxy_table` sends its rows to a running proxy).
    #[test]
    fn without_credentials_only_events_and_read_only_discovery_pass() {
        let get = Method::GET;
        for path in [
            "/version",
            "/healthz",
            "/api",
            "/api/v1",
            "/apis",
            "/apis/discovery.k8s.io",
            "/apis/discovery.k8s.io/v1beta1",
        ] {
            assert!(kube_proxy_needs(&get, path), "GET {path}");
        }
        for (method, path) in [
            (Method::POST, "/api/v1/namespaces/default/events"),
            (Method::PATCH, "/api/v1/namespaces/default/events/bj-1.16f0"),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/default/events",
            ),
            (
                Method::PATCH,
                "/apis/events.k8s.io/v1/namespaces/kube-system/events/x",
            ),
        ] {
            assert!(kube_proxy_needs(&method, path), "{method} {path}");
        }
        for (method, path) in [
            // Its own Node is answered from the cache, never passed through.
            (Method::GET, "/api/v1/nodes/bj-1"),
            (Method::GET, "/api/v1/nodes/gz-1"),
            (Method::GET, "/api/v1/namespaces/kube-system/secrets"),
            (Method::GET, "/api/v1/secrets"),
            (Method::GET, "/api/v1/namespaces/default/events"),
            (Method::DELETE, "/api/v1/namespaces/default/services/x"),
            (Method::DELETE, "/api/v1/namespaces/default/events/x"),
            (Method::PUT, "/api/v1/namespaces/default/events/x"),
            (Method::POST, "/api/v1/namespaces/default/pods"),
            (Method::PATCH, "/api/v1/nodes/bj-1"),
            (Method::POST, "/apis/apps/v1/namespaces/default/events"),
            (
                Method::POST,
                "/apis/events.k8s.io/v1beta1/namespaces/default/events",
            ),
            (Method::POST, "/apis"),
            (
                Method::PATCH,
                "/api/v1/namespaces/default/events/../secrets/x",
            ),
            (Method::GET, "/api/v1/nodes/bj-1/proxy"),
            (Method::GET, "/api/v1/nodes/%62j-1"),
            (Method::GET, "/apis/apps/v1/deployments"),
        ] {
            assert!(!kube_proxy_needs(&method, path), "{method} {path}");
        }
    }

    #[test]
    fn the_caller_is_its_token_then_its_certificate_then_nobody() {
        use crate::http::caller::tests::request;
        let of = |r: Request<()>| Caller::of(&r.into_parts().0);
        assert_eq!(of(request(None, false)), Caller::Anonymous);
        let alice = Some(("alice", &["edge-admins"][..]));
        assert_eq!(
            of(request(alice, false)),
            Caller::Certificate(sitegrid_runtime::serve::Subject {
                user: "alice".into(),
                groups: vec!["edge-admins".into()]
            })
        );
        let mut with_token = request(alice, false);
        with_token
            .headers_mut()
            .insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        assert_eq!(of(with_token), Caller::Own);
    }

    #[test]
    fn a_caller_cannot_smuggle_credentials_or_impersonation_through_the_proxy_identity() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer stolen".parse().unwrap());
        headers.insert("impersonate-user", "system:admin".parse().unwrap());
        headers.append("impersonate-group", "system:masters".parse().unwrap());
        headers.insert("impersonate-extra-scopes", "x".parse().unwrap());
        headers.insert(header::ACCEPT, "application/json".parse().unwrap());
        strip_caller_credentials(&mut headers);
        impersonate(&mut headers, "alice", &["edge-admins".into()]).unwrap();
        let mut left: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ("accept".to_owned(), "application/json".to_owned()),
                ("impersonate-group".to_owned(), "edge-admins".to_owned()),
                ("impersonate-user".to_owned(), "alice".to_owned()),
            ]
        );
    }
}
