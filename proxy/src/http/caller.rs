//! Who a request comes from: decided once per request from what its
//! connection proved (the verified client certificate, read once per
//! connection, and the port it arrived on) and what it carries (its own
//! `Authorization`). Passthrough acts as this caller upstream, the node
//! cache answers only the kubelet, `--client-group` reads its groups: one
//! model for all three.
//!
//! | the request | on the serving port | on the kubelet port |
//! |---|---|---|
//! | its own `Authorization` | [`Caller::Own`] | [`Caller::Own`] (a bootstrap token) |
//! | a verified certificate of `system:node:<this node>` in `system:nodes` | [`Caller::Certificate`] (`--ca-file`'s: impersonated) | [`Caller::Kubelet`] (the cluster CA's) |
//! | another verified certificate | [`Caller::Certificate`] | [`Caller::Stranger`] (refused) |
//! | nothing | [`Caller::Anonymous`] | [`Caller::Stranger`] (refused) |

use std::sync::Arc;

use http::{header, request::Parts};
use sitegrid_runtime::serve::{PeerCertificates, Subject};

/// The user a node's kubelet authenticates as, in group [`NODES_GROUP`].
pub fn node_user(node: &str) -> String {
    format!("system:node:{node}")
}

/// The group of every kubelet's certificate.
pub const NODES_GROUP: &str = "system:nodes";

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// It carries its own credentials (a bearer token): it goes upstream
    /// with them and none of the proxy's.
    Own,
    /// A client certificate the serving port verified against `--ca-file`:
    /// upstream as that user, by the proxy's impersonation.
    Certificate(Subject),
    /// This node's kubelet, proved by a certificate of
    /// `system:node:<node>` that the kubelet port verified against the
    /// cluster's CA: upstream with the kubelet's own certificate, and the
    /// only caller the node cache answers.
    Kubelet,
    /// On the kubelet port, anyone else: refused.
    Stranger(Option<Subject>),
    /// No credentials on the serving port: the proxy's identity, for what
    /// kube-proxy needs only (`--anonymous-passthrough`).
    Anonymous,
}

/// Put on every request that arrived on the kubelet port, naming the node
/// whose kubelet alone that port serves.
#[derive(Debug, Clone)]
pub struct KubeletPort {
    /// This node.
    pub node: Arc<str>,
}

impl Caller {
    /// The caller of a request with these parts.
    pub fn of(parts: &Parts) -> Caller {
        let own = parts.headers.contains_key(header::AUTHORIZATION);
        let subject = parts
            .extensions
            .get::<PeerCertificates>()
            .and_then(PeerCertificates::subject);
        match parts.extensions.get::<KubeletPort>() {
            _ if own => Caller::Own,
            Some(port) => match subject {
                Some(s)
                    if s.user == node_user(&port.node)
                        && s.groups.iter().any(|g| g == NODES_GROUP) =>
                {
                    Caller::Kubelet
                }
                other => Caller::Stranger(other.cloned()),
            },
            None => match subject {
                Some(s) => Caller::Certificate(s.clone()),
                None => Caller::Anonymous,
            },
        }
    }

    /// The caller the gateway classified the request as, or worked out now
    /// for one that skipped it (a service called directly).
    pub fn classified(parts: &Parts) -> Caller {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_else(|| Caller::of(parts))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A request from a client whose certificate names `user` in `groups`
    /// (none: no certificate), on the kubelet port of bj-1 or not.
    pub(crate) fn request(cert: Option<(&str, &[&str])>, kubelet_port: bool) -> http::Request<()> {
        let mut req = http::Request::new(());
        if let Some((user, groups)) = cert {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::default();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, user);
            for g in groups {
                params
                    .distinguished_name
                    .push(rcgen::DnType::OrganizationName, *g);
            }
            let cert = params.self_signed(&key).unwrap();
            req.extensions_mut()
                .insert(PeerCertificates::new(vec![cert.der().clone()]));
        }
        if kubelet_port {
            req.extensions_mut().insert(KubeletPort {
                node: "bj-1".into(),
            });
        }
        req
    }

    fn caller(req: http::Request<()>) -> Caller {
        Caller::of(&req.into_parts().0)
    }

    #[test]
    fn the_kubelet_is_this_nodes_certificate_on_the_kubelet_port_only() {
        let kubelet = Some(("system:node:bj-1", &["system:nodes"][..]));
        assert_eq!(caller(request(kubelet, true)), Caller::Kubelet);
        // The same subject on the serving port is another certificate (of
        // --ca-file, impersonated: the proxy's RBAC cannot act as a node).
        assert!(matches!(
            caller(request(kubelet, false)),
            Caller::Certificate(_)
        ));
        for stranger in [
            Some(("system:node:bj-2", &["system:nodes"][..])),
            Some(("system:node:bj-1", &[][..])),
            Some(("alice", &["system:nodes"][..])),
            None,
        ] {
            assert!(
                matches!(caller(request(stranger, true)), Caller::Stranger(_)),
                "{stranger:?}"
            );
        }
        assert_eq!(caller(request(None, false)), Caller::Anonymous);
        let mut with_token = request(None, true);
        with_token
            .headers_mut()
            .insert(header::AUTHORIZATION, "Bearer bootstrap".parse().unwrap());
        assert_eq!(caller(with_token), Caller::Own, "a bootstrap token");
    }
}
