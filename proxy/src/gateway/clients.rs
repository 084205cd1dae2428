//! Who may use this proxy at all (`--client-group`): a proxy that serves one
//! site's view to the site's node proxies across a WAN (a site proxy in the
//! cloud) answers only clients whose verified certificate names one of its
//! groups — a site's credentials read that site's view and nothing else.
//! Everything but the health and metrics endpoints is refused otherwise,
//! cached reads included: without the restriction a cached read needs no
//! credentials at all (kube-proxy's plain-HTTP setup on its own node).

use std::sync::Arc;

use http::Request;
use sitegrid_apimachinery::Status;
use sitegrid_runtime::serve::PeerCertificates;

use crate::http::Body;

/// The groups (a client certificate's O values) allowed; empty: anyone.
#[derive(Debug, Clone, Default)]
pub struct ClientGroups(Arc<[String]>);

impl ClientGroups {
    /// Only clients in one of `groups` (none: no restriction).
    pub fn new(groups: Vec<String>) -> ClientGroups {
        ClientGroups(groups.into())
    }

    /// The 403 for `req` when its client is not allowed; `None` when it is.
    pub fn refuse(&self, req: &Request<Body>) -> Option<Status> {
        if self.0.is_empty() {
            return None;
        }
        let subject = req
            .extensions()
            .get::<PeerCertificates>()
            .and_then(PeerCertificates::subject);
        let wanted = self.0.join(", ");
        let message = match subject {
            Some(s) if s.groups.iter().any(|g| self.0.contains(g)) => return None,
            Some(s) => format!(
                "forbidden: this sitegrid-proxy serves clients in group {wanted} only; \
                 the certificate of {:?} names {:?}",
                s.user, s.groups
            ),
            None => format!(
                "forbidden: this sitegrid-proxy serves clients in group {wanted} only, \
                 with a client certificate signed by its --ca-file"
            ),
        };
        Some(Status::failure(403, Some("Forbidden"), message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(groups: Option<&[&str]>) -> Request<Body> {
        let mut req = Request::new(Body::new(http_body_util::Empty::<bytes::Bytes>::new()));
        if let Some(groups) = groups {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "node-proxy:bj-1");
            for g in groups {
                params
                    .distinguished_name
                    .push(rcgen::DnType::OrganizationName, *g);
            }
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = params.self_signed(&key).unwrap();
            req.extensions_mut()
                .insert(PeerCertificates::new(vec![cert.der().clone()]));
        }
        req
    }

    #[test]
    fn only_certificates_naming_an_allowed_group_pass() {
        let open = ClientGroups::default();
        assert!(open.refuse(&request(None)).is_none());
        let beijing = ClientGroups::new(vec!["sitegrid:site:beijing".into()]);
        assert!(beijing
            .refuse(&request(Some(&["sitegrid:site:beijing"])))
            .is_none());
        let other = beijing
            .refuse(&request(Some(&["sitegrid:site:guangzhou"])))
            .expect("another site's certificate is refused");
        assert_eq!(other.code, 403);
        assert!(
            other.message.contains("sitegrid:site:guangzhou"),
            "{}",
            other.message
        );
        let none = beijing
            .refuse(&request(None))
            .expect("no certificate is refused");
        assert!(
            none.message.contains("client certificate"),
            "{}",
            none.message
        );
    }
}
