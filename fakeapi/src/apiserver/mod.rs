//! An in-memory kube-apiserver for list/watch clients (kube-rs, client-go):
//! the upstream of the proxy's tests, its demo and benchmarks. It plays
//! kube-apiserver 1.20 by default, or 1.31 / 1.35 (`version`).
//!
//! Layout: `routing` maps paths to resources, `handler` runs one generic
//! handler per verb, `store` is the etcd stand-in (global resourceVersion,
//! event history), `list`/`watch` serve reads, `write`/`patch` writes,
//! `filter` selectors, `negotiate` the representation a read asks for,
//! `table` kubectl's server-side Tables, `metadata` metadata-only
//! responses, `discovery` the discovery documents, `serve` sockets and the
//! layers around the handler, `faults` the faults a test switches on,
//! `egress` what the server sends, `heartbeat` kubelets' node status writes,
//! `version` the release played and its feature gates, `fields` the field
//! selectors each resource accepts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use parking_lot::Mutex;
use serde_json::Value;
use sitegrid_apimachinery::Status;

mod discovery;
mod egress;
mod faults;
mod fields;
mod filter;
mod handler;
mod heartbeat;
mod list;
mod metadata;
mod negotiate;
mod object;
mod patch;
mod query;
mod resource;
mod routing;
mod serve;
mod store;
mod table;
mod token;
mod version;
mod watch;
mod write;

pub use egress::{Egress, FormEgress, ResourceEgress};
pub use faults::{Corruption, Faults, Verb as FaultVerb};
pub use heartbeat::Heartbeats;
pub(crate) use object::uuid_from;
pub use serve::ServerHandle;
pub(crate) use version::Profile;
pub use version::{ConfigError, FeatureGates, KubernetesVersion};

use egress::Meter;
use resource::Resources;
use store::{key_of, Store};

/// Response body of every handler: a full JSON body or a watch stream.
pub(crate) type Body = UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Served version of discovery.k8s.io EndpointSlices: "v1" (default) or
    /// "v1beta1" (as Kubernetes 1.20 does). Only that version is served (the
    /// other is 404), and discovery reports only it. 1.31 and 1.35 serve v1
    /// only: "v1beta1" with them is a [`ConfigError`].
    pub endpointslice_version: &'static str,
    /// The kube-apiserver release played (default 1.20, this server's
    /// behaviour before releases could be chosen).
    pub kubernetes_version: KubernetesVersion,
    /// Feature gates set away from that release's defaults.
    pub feature_gates: FeatureGates,
    /// Watch events kept for resume (default 1000). A watch from an older
    /// resourceVersion gets the 410 ERROR frame.
    pub history: usize,
    /// Interval between BOOKMARK events on watches with
    /// allowWatchBookmarks=true (default 60 s).
    pub bookmark_interval: Duration,
    /// Whether sitegrid's CRDs are installed (default true): the grids
    /// (`superedge.io/v1`) and NodeUnits/NodeGroups (`site.superedge.io/v1alpha2`)
    /// are served. False plays a cluster without them: their groups are
    /// absent from discovery and their paths answer 404.
    pub crds: bool,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        ApiServerConfig {
            endpointslice_version: "v1",
            history: 1000,
            bookmark_interval: Duration::from_secs(60),
            kubernetes_version: KubernetesVersion::V1_20,
            feature_gates: FeatureGates::default(),
            crds: true,
        }
    }
}

impl ApiServerConfig {
    /// The defaults, playing `version` with its default feature gates.
    pub fn for_version(version: KubernetesVersion) -> Self {
        ApiServerConfig {
            kubernetes_version: version,
            ..ApiServerConfig::default()
        }
    }

    /// Check the configuration as the played release would (gates that do
    /// not exist or are locked, an EndpointSlice version it does not serve).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.profile().map(|_| ())
    }

    /// What the configuration resolves to.
    pub(crate) fn profile(&self) -> Result<Profile, ConfigError> {
        Profile::new(
            self.kubernetes_version,
            self.feature_gates,
            self.endpointslice_version,
        )
    }
}

/// The user (CN) of the client certificate a TLS connection presented, on
/// each of its requests.
#[derive(Debug, Clone)]
pub(crate) struct ClientUser(pub String);

/// What [`ApiServer::serve_tls`] serves with (PEM).
#[derive(Debug, Clone)]
pub struct TlsServing {
    /// The serving certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
    /// The CA client certificates are verified against.
    pub client_ca: String,
}

impl TlsServing {
    fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, String> {
        use rustls_pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.cert.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::from_pem_slice(self.key.as_bytes()).map_err(|e| e.to_string())?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(self.client_ca.as_bytes()) {
            roots
                .add(ca.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| e.to_string())?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// One request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, e.g. `/api/v1/services`.
    pub path: String,
    /// The raw (still percent-encoded) query, empty if none.
    pub query: String,
    /// Who the request claims to be: its `Authorization` and `Impersonate-*`
    /// headers (names lower-case), in the order received. This server
    /// authorizes nothing; tests read who a proxy sent a request as.
    pub credentials: Vec<(String, String)>,
    /// The user (CN) of the client certificate the request came with, when
    /// served over TLS ([`ApiServer::serve_tls`]).
    pub client: Option<String>,
}

/// State shared by the handle, the HTTP handlers and the watch streams.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: ApiServerConfig,
    /// The release played, resolved from `config`.
    pub profile: Profile,
    pub store: Store,
    /// Bumped by `disconnect_watches`; every watch stream ends on a change.
    pub disconnect: tokio::sync::watch::Sender<u64>,
    /// What has been sent, and the open watches.
    pub egress: Arc<Meter>,
    pub requests: Mutex<Vec<RequestRecord>>,
    /// Faults a test switched on.
    pub faults: Faults,
}

/// The in-memory API server. Cheap to clone; clones share the same state.
#[derive(Debug, Clone)]
pub struct ApiServer {
    inner: Arc<Shared>,
}

impl ApiServer {
    /// An empty server at resourceVersion 1.
    ///
    /// # Panics
    ///
    /// On a configuration the played release would refuse; use
    /// [`ApiServer::try_new`] to get the error instead.
    pub fn new(config: ApiServerConfig) -> Self {
        match Self::try_new(config) {
            Ok(server) => server,
            Err(e) => panic!("ApiServer::new: {e}"),
        }
    }

    /// An empty server at resourceVersion 1, or why `config` is refused.
    pub fn try_new(config: ApiServerConfig) -> Result<Self, ConfigError> {
        let profile = config.profile()?;
        let mut resources = Resources::new(&profile);
        if !config.crds {
            resources = resources.without_crds();
        }
        let egress = Arc::new(Meter::new(resources.len()));
        let store = Store::new(resources, config.history);
        Ok(ApiServer {
            inner: Arc::new(Shared {
                config,
                profile,
                store,
                disconnect: tokio::sync::watch::channel(0).0,
                egress,
                requests: Mutex::new(Vec::new()),
                faults: Faults::default(),
            }),
        })
    }

    /// The configuration the server was made with.
    pub fn config(&self) -> &ApiServerConfig {
        &self.inner.config
    }

    /// The release played, resolved.
    pub(crate) fn profile(&self) -> Profile {
        self.inner.profile
    }

    /// Bind `addr` (tests pass 127.0.0.1:0) and serve HTTP/1.1 and h2c in a
    /// spawned task until the handle is dropped or shut down.
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<ServerHandle> {
        serve::serve(Arc::clone(&self.inner), addr, None).await
    }

    /// Serves HTTPS on `addr` with `tls`: client certificates are taken
    /// when presented (verified against `tls.client_ca`) and their user is
    /// recorded with each request ([`RequestRecord::client`]); nothing is
    /// authorized by them.
    pub async fn serve_tls(
        &self,
        addr: SocketAddr,
        tls: &TlsServing,
    ) -> std::io::Result<ServerHandle> {
        let acceptor = tls.acceptor().map_err(std::io::Error::other)?;
        serve::serve(Arc::clone(&self.inner), addr, Some(acceptor)).await
    }

    /// Create or replace `obj` (resource from its apiVersion and kind, namespace
    /// `default` if unset), exactly as an HTTP write: a new resourceVersion and
    /// a watch event, none if nothing changed. Returns the stored object.
    ///
    /// # Panics
    ///
    /// If the object is not of a served kind or has no name; use
    /// [`ApiServer::try_apply`] to get the `Status` instead.
    pub fn apply(&self, obj: Value) -> Value {
        match self.try_apply(obj) {
            Ok(v) => v,
            Err(status) => panic!("ApiServer::apply: {status}"),
        }
    }

    /// [`ApiServer::apply`], returning the apiserver's `Status` on a bad object.
    pub fn try_apply(&self, obj: Value) -> Result<Value, Status> {
        let (rt, stored) = self.inner.store.apply(obj)?;
        Ok(stored.to_typed_value(&rt))
    }

    /// Delete `name` of `resource` (plural, e.g. "endpointslices"; or
    /// `plural.group` for `events.events.k8s.io`) in `namespace` (None for
    /// cluster-scoped types). Returns its last state, None if absent.
    pub fn delete(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let store = &self.inner.store;
        let rt = store.resources.by_id(resource)?;
        let ns = scoped_namespace(rt.namespaced, namespace)?;
        store
            .delete(rt, ns, name)
            .ok()
            .map(|o| o.to_typed_value(rt))
    }

    /// The current object, with kind and apiVersion, as a GET returns it.
    pub fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let store = &self.inner.store;
        let rt = store.resources.by_id(resource)?;
        let ns = scoped_namespace(rt.namespaced, namespace)?;
        store
            .get(rt, &key_of(rt, ns, name))
            .map(|o| o.to_typed_value(rt))
    }

    /// Every object of `resource` in all namespaces, sorted by namespace/name,
    /// each with kind and apiVersion. Empty for an unknown resource.
    pub fn list(&self, resource: &str) -> Vec<Value> {
        let store = &self.inner.store;
        let Some(rt) = store.resources.by_id(resource) else {
            return Vec::new();
        };
        let objs = store.read(|s| s.objects[rt.idx].values().cloned().collect::<Vec<_>>());
        objs.iter().map(|o| o.to_typed_value(rt)).collect()
    }

    /// The last resourceVersion handed out (what a LIST reports).
    pub fn resource_version(&self) -> u64 {
        self.inner.store.rv()
    }

    /// Forget all watch history: a watch from any older resourceVersion gets
    /// 410 Expired (simulates etcd compaction).
    pub fn compact(&self) {
        self.inner.store.compact();
    }

    /// End every open watch stream now (simulates a dropped connection);
    /// clients re-watch.
    pub fn disconnect_watches(&self) {
        self.inner
            .disconnect
            .send_modify(|generation| *generation += 1);
    }

    /// The faults this server plays (see [`Faults`]); none are set at first.
    pub fn faults(&self) -> &Faults {
        &self.inner.faults
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.requests.lock().clone()
    }

    /// Number of watch streams currently open, per resource (e.g.
    /// "services" -> 1), in any form; resources without open watches are absent.
    pub fn open_watches(&self) -> BTreeMap<String, usize> {
        self.egress()
            .resources
            .into_iter()
            .filter_map(|(id, e)| {
                let n = usize::try_from(e.open_watches()).unwrap_or(usize::MAX);
                (n > 0).then_some((id, n))
            })
            .collect()
    }

    /// What this server has sent since it started, per resource and form
    /// (see [`Egress`]); also served as JSON on `GET /debug/egress`.
    pub fn egress(&self) -> Egress {
        self.inner.egress.snapshot(&self.inner.store.resources)
    }
}

/// The namespace argument of a namespaced / cluster-scoped lookup.
fn scoped_namespace(namespaced: bool, namespace: Option<&str>) -> Option<&str> {
    if namespaced {
        namespace
    } else {
        Some("")
    }
}
