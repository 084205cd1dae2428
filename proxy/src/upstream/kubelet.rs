//! The kubelet's own credentials upstream: its client certificate and key
//! (`--kubelet-client-certificate`, by default the kubelet's
//! `/var/lib/kubelet/pki/kubelet-client-current.pem`), so that what the
//! kubelet asks through the proxy reaches the API server as the kubelet —
//! the Node authorizer and NodeRestriction decide as they would without the
//! proxy, and the proxy's own ServiceAccount needs no right to act as a
//! node. Re-read when the kubelet rotates its certificate (a new file
//! behind the same symlink). A certificate of another node is refused.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Weak},
    time::Duration,
};

use arc_swap::ArcSwapOption;
use base64::Engine;
use hyper_timeout::TimeoutConnector;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use kube::client::ConfigExt;
use parking_lot::Mutex;
use sitegrid_runtime::{fs::FileStamp, serve::Subject};
use tower::{util::BoxCloneSyncService, ServiceBuilder, ServiceExt};
use tracing::{info, warn};

use super::Upstream;
use crate::http::{
    caller::{node_user, NODES_GROUP},
    Body, BoxError,
};

/// How long the kubelet's requests wait for a connection to the API
/// server before the node cache answers instead (a black-holed API server
/// would otherwise hold each first request for the system's TCP timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The kubelet's credentials, loaded and followed.
pub struct KubeletCredentials {
    node: String,
    cert: PathBuf,
    key: PathBuf,
    base: kube::Config,
    current: ArcSwapOption<Upstream>,
    loaded_from: Mutex<Option<(Option<FileStamp>, Option<FileStamp>)>>,
}

impl std::fmt::Debug for KubeletCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletCredentials")
            .field("node", &self.node)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Why the kubelet's credentials cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// A file cannot be read.
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
    /// No certificate in the file.
    #[error("{0}: no certificate")]
    NoCertificate(PathBuf),
    /// The certificate is some other identity's.
    #[error("{path}: the certificate is {found:?}, not the kubelet of {node} ({user} in {NODES_GROUP})", user = node_user(node))]
    NotThisNode {
        /// The file.
        path: PathBuf,
        /// The node served.
        node: String,
        /// Who the certificate names.
        found: Option<Subject>,
    },
    /// The certificate and key make no TLS client.
    #[error("the kubelet's certificate and key")]
    Client(#[from] kube::Error),
}

impl KubeletCredentials {
    /// The kubelet of `node`, its certificate in `cert` and key in `key`
    /// (the same file for the kubelet's rotated pair), reaching the API
    /// server `base` names. Loaded now when the files are there: a kubelet
    /// that has not bootstrapped yet has none, and they are picked up when
    /// they appear.
    pub fn new(
        base: &kube::Config,
        node: &str,
        cert: &Path,
        key: &Path,
    ) -> Result<Arc<KubeletCredentials>, CredentialsError> {
        let creds = Arc::new(KubeletCredentials {
            node: node.to_owned(),
            cert: cert.to_owned(),
            key: key.to_owned(),
            base: base.clone(),
            current: ArcSwapOption::empty(),
            loaded_from: Mutex::new(None),
        });
        match creds.reload_if_changed() {
            Ok(_) => {}
            // Not there yet (a kubelet still bootstrapping): not an error.
            Err(CredentialsError::Read(path, e)) if e.kind() == std::io::ErrorKind::NotFound => {
                warn!(path = %path.display(), "the kubelet's client certificate is not there yet; its requests get 503 until it is")
            }
            Err(e) => return Err(e),
        }
        Ok(creds)
    }

    /// The upstream client that speaks as the kubelet, if its credentials are loaded.
    pub fn upstream(&self) -> Option<Upstream> {
        self.current.load_full().map(|u| (*u).clone())
    }

    /// Reads the files again if they changed; returns whether the client was replaced.
    pub fn reload_if_changed(&self) -> Result<bool, CredentialsError> {
        let mut loaded_from = self.loaded_from.lock();
        let now = (FileStamp::of(&self.cert), FileStamp::of(&self.key));
        if loaded_from.as_ref() == Some(&now) {
            return Ok(false);
        }
        let cert =
            std::fs::read(&self.cert).map_err(|e| CredentialsError::Read(self.cert.clone(), e))?;
        let key =
            std::fs::read(&self.key).map_err(|e| CredentialsError::Read(self.key.clone(), e))?;
        let leaf = first_certificate(&cert)
            .ok_or_else(|| CredentialsError::NoCertificate(self.cert.clone()))?;
        let subject = Subject::of(&leaf);
        let is_node = subject.as_ref().is_some_and(|s| {
            s.user == node_user(&self.node) && s.groups.iter().any(|g| g == NODES_GROUP)
        });
        if !is_node {
            return Err(CredentialsError::NotThisNode {
                path: self.cert.clone(),
                node: self.node.clone(),
                found: subject,
            });
        }
        let upstream = kubelet_client(&self.base, &cert, &key)?;
        self.current.store(Some(Arc::new(upstream)));
        *loaded_from = Some(now);
        Ok(true)
    }

    /// A task that re-reads the files every `every` while anything holds the credentials.
    pub fn reloader(
        self: &Arc<Self>,
        every: Duration,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        reload_loop(Arc::downgrade(self), every)
    }
}

async fn reload_loop(owner: Weak<KubeletCredentials>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.tick().await;
    let mut reported: Option<String> = None;
    loop {
        ticks.tick().await;
        let Some(creds) = owner.upgrade() else { return };
        let path = creds.cert.clone();
        match tokio::task::spawn_blocking(move || creds.reload_if_changed()).await {
            Ok(Ok(false)) => {}
            Ok(Ok(true)) => {
                reported = None;
                info!(cert = %path.display(), "loaded the kubelet's client certificate");
            }
            Ok(Err(e)) => {
                let message = e.to_string();
                if reported.as_ref() != Some(&message) {
                    warn!(error = %message, "the kubelet's client certificate cannot be used; the previous one (if any) stays in use");
                    reported = Some(message);
                }
            }
            Err(e) => warn!(error = %e, "kubelet certificate reload task failed"),
        }
    }
}

/// The first certificate of a PEM file, in DER.
fn first_certificate(pem: &[u8]) -> Option<Vec<u8>> {
    use rustls_pki_types::{pem::PemObject, CertificateDer};
    CertificateDer::pem_slice_iter(pem)
        .next()?
        .ok()
        .map(|c| c.to_vec())
}

/// A pooled client to the API server `base` names, with `cert` and `key`
/// (PEM) as its only credentials.
fn kubelet_client(base: &kube::Config, cert: &[u8], key: &[u8]) -> Result<Upstream, kube::Error> {
    let mut config = base.clone();
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    config.auth_info = kube::config::AuthInfo {
        client_certificate_data: Some(b64(cert)),
        client_key_data: Some(b64(key).into()),
        ..kube::config::AuthInfo::default()
    };
    let mut connector = TimeoutConnector::new(config.rustls_https_connector()?);
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let client: Client<_, Body> = Client::builder(TokioExecutor::new()).build(connector);
    let svc = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .layer(config.extra_headers_layer()?)
        .service(client.map_err(BoxError::from))
        .map_err(BoxError::from);
    Ok(BoxCloneSyncService::new(svc))
}
