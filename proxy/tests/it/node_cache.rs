//! The node cache end to end: a kubelet (this node's client certificate,
//! over HTTPS, on the kubelet port) reads through the proxy from the
//! in-memory API server served over HTTPS, which records who each request
//! came as; then the API server goes away, and the kubelet gets what it
//! read before — after a restart of the proxy too — and nothing else.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use serde_json::{json, Value};
use sitegrid_fakeapi::{ApiServer, ApiServerConfig, ServerHandle, TlsServing};
use sitegrid_proxy::{
    app::{start, KubeletOptions, ProxyOptions, RunningProxy},
    http::tls::TlsFiles,
};

pub(crate) const NODE: &str = "bj-1";
/// The kubelet's Accept header (kubelet 1.20-1.35, `--kube-api-content-type`'s default).
pub(crate) const KUBELET_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";
const PODS: &str = "/api/v1/pods?fieldSelector=spec.nodeName%3Dbj-1&limit=500&resourceVersion=0";
const SECRET: &str =
    "/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3Ddb&limit=500&resourceVersion=0";
const CONFIG_MAP: &str =
    "/api/v1/namespaces/shop/configmaps?fieldSelector=metadata.name%3Dsettings&limit=500&resourceVersion=0";
const CSI_DRIVERS: &str = "/apis/storage.k8s.io/v1/csidrivers?limit=500&resourceVersion=0";
const RUNTIME_CLASSES: &str = "/apis/node.k8s.io/v1/runtimeclasses?limit=500&resourceVersion=0";
const CSI_NODE: &str = "/apis/storage.k8s.io/v1/csinodes/bj-1";
const TOKEN: &str = "/api/v1/namespaces/shop/serviceaccounts/web/token";

/// Two CAs, as on a real node: the cluster's (the API server's serving
/// certificate, every kubelet's and the proxy's client certificates) and
/// sitegrid's (the proxy's serving certificate).
pub(crate) struct Pki {
    dir: PathBuf,
    cluster_ca: String,
    pub(crate) sitegrid_ca: String,
}

impl Pki {
    fn new(test: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("sitegrid-node-cache-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca = |cn: &str| {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
        };
        let cluster = ca("kubernetes");
        let sitegrid = ca("sitegrid");
        let write = |name: &str, pem: String| std::fs::write(dir.join(name), pem).unwrap();
        let leaf = |issuer: &CertifiedIssuer<'_, KeyPair>,
                    name: &str,
                    cn: &str,
                    groups: &[&str],
                    server: bool| {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            for g in groups {
                p.distinguished_name.push(DnType::OrganizationName, *g);
            }
            if server {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                p.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
            } else {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
            let k = KeyPair::generate().unwrap();
            let cert = p.signed_by(&k, issuer).unwrap().pem();
            write(&format!("{name}.crt"), cert.clone());
            write(&format!("{name}.key"), k.serialize_pem());
            // The kubelet keeps its rotated certificate and key in one file.
            write(&format!("{name}.pem"), cert + &k.serialize_pem());
        };
        leaf(&cluster, "apiserver", "kube-apiserver", &[], true);
        leaf(
            &cluster,
            "proxy",
            "sitegrid-proxy",
            &["system:serviceaccounts"],
            false,
        );
        leaf(
            &cluster,
            "kubelet-bj-1",
            "system:node:bj-1",
            &["system:nodes"],
            false,
        );
        leaf(
            &cluster,
            "kubelet-bj-2",
            "system:node:bj-2",
            &["system:nodes"],
            false,
        );
        leaf(
            &cluster,
            "admin",
            "kubernetes-admin",
            &["system:masters"],
            false,
        );
        leaf(&sitegrid, "serving", "sitegrid-proxy", &[], true);
        // A node proxy's certificate for its site proxy.
        leaf(
            &sitegrid,
            "node-proxy",
            "sitegrid:node-proxy",
            &["sitegrid:site:beijing"],
            false,
        );
        // The kubelet's subject, signed by sitegrid's CA (what --ca-file verifies on the serving port).
        leaf(
            &sitegrid,
            "fake-kubelet",
            "system:node:bj-1",
            &["system:nodes"],
            false,
        );
        write("cluster-ca.crt", cluster.pem());
        write("sitegrid-ca.crt", sitegrid.pem());
        Pki {
            cluster_ca: cluster.pem(),
            sitegrid_ca: sitegrid.pem(),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap()
    }

    /// The site proxy `site`, as a node proxy of beijing reads it.
    pub(crate) fn site_config(&self, site: &RunningProxy) -> kube::Config {
        let mut config = kube::Config::new(format!("https://{}", site.local_addr).parse().unwrap());
        config.root_cert = Some(vec![rustls_pki_types::CertificateDer::from_pem_slice(
            self.sitegrid_ca.as_bytes(),
        )
        .unwrap()
        .to_vec()]);
        use base64::Engine;
        let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
        config.auth_info.client_certificate_data = Some(b64(self.read("node-proxy.crt")));
        config.auth_info.client_key_data = Some(b64(self.read("node-proxy.key")).into());
        config
    }

    fn api_tls(&self) -> TlsServing {
        TlsServing {
            cert: self.read("apiserver.crt"),
            key: self.read("apiserver.key"),
            client_ca: self.cluster_ca.clone(),
        }
    }

    /// A client of `url` trusting `ca_pem`, with `identity`'s certificate (None: none).
    pub(crate) fn client(&self, url: &str, ca_pem: &str, identity: Option<&str>) -> kube::Client {
        use base64::Engine;
        let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
        let mut config = kube::Config::new(url.parse().unwrap());
        config.root_cert = Some(
            rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes())
                .map(|c| c.unwrap().to_vec())
                .collect(),
        );
        config.default_retry = false;
        if let Some(id) = identity {
            config.auth_info.client_certificate_data = Some(b64(self.read(&format!("{id}.crt"))));
            config.auth_info.client_key_data = Some(b64(self.read(&format!("{id}.key"))).into());
        }
        kube::Client::try_from(config).unwrap()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

use rustls_pki_types::pem::PemObject;

/// The cluster the kubelet reads: the two-site sample, and a pod of bj-1
/// with a Secret, a ConfigMap and a service-account token.
fn cluster(version: sitegrid_fakeapi::KubernetesVersion) -> ApiServer {
    let api = ApiServer::new(ApiServerConfig::for_version(version));
    api.load_two_sites();
    for obj in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web", "namespace": "shop"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
               "type": "Opaque", "data": {"password": "aHVudGVyMg=="}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop"},
               "data": {"mode": "edge"}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web"},
               "spec": {"nodeName": NODE, "serviceAccountName": "web",
                        "containers": [{"name": "web", "image": "web:1",
                            "envFrom": [{"configMapRef": {"name": "settings"}}]}],
                        "volumes": [{"name": "db", "secret": {"secretName": "db"}},
                                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "shop"},
               "spec": {"volumeName": "pv-data", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": NODE}, "spec": {"drivers": []}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {}}),
        json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "runc"}, "handler": "runc"}),
    ] {
        api.apply(obj);
    }
    api
}

pub(crate) struct World {
    pub(crate) pki: Pki,
    pub(crate) api: ApiServer,
    upstream: Option<ServerHandle>,
    upstream_addr: SocketAddr,
    data_dir: PathBuf,
    /// What the proxy reads as this boot of the node (`--boot-id-file`).
    boot_id: PathBuf,
    proxy: Option<RunningProxy>,
    /// A site proxy of beijing between the node's proxy and the API server
    /// (the kubelet's own requests still go to the API server).
    pub(crate) site: Option<RunningProxy>,
}

impl World {
    async fn new(test: &str) -> World {
        World::playing(test, sitegrid_fakeapi::KubernetesVersion::V1_20).await
    }

    /// A world whose node proxy reads the cached kinds from a site proxy
    /// of beijing, and its kubelet reads the API server directly.
    pub(crate) async fn behind_a_site_proxy(test: &str) -> World {
        World::with(test, sitegrid_fakeapi::KubernetesVersion::V1_20, true).await
    }

    /// A world whose API server plays `version`.
    pub(crate) async fn playing(test: &str, version: sitegrid_fakeapi::KubernetesVersion) -> World {
        World::with(test, version, false).await
    }

    async fn with(test: &str, version: sitegrid_fakeapi::KubernetesVersion, site: bool) -> World {
        let pki = Pki::new(test);
        let api = cluster(version);
        let upstream = api
            .serve_tls("127.0.0.1:0".parse().unwrap(), &pki.api_tls())
            .await
            .unwrap();
        let upstream_addr = upstream.local_addr();
        let data_dir = pki.path("data");
        let boot_id = pki.path("boot_id");
        std::fs::write(&boot_id, "1b6ac0f2-9d4e-4c31-8f3a-5e0d2b7c9a11\n").unwrap();
        let mut w = World {
            pki,
            api,
            upstream: Some(upstream),
            upstream_addr,
            data_dir,
            boot_id,
            proxy: None,
            site: None,
        };
        if site {
            w.start_site_proxy().await;
        }
        w.start_proxy().await;
        if site {
            // Two syncs in a row (the site proxy's, then the node proxy's from it).
            w.wait_until(|r| !r.contains("waiting for the first sync"))
                .await;
        }
        w
    }

    /// The API server, as the proxy's ServiceAccount.
    fn api_config(&self) -> kube::Config {
        let mut config =
            kube::Config::new(format!("https://{}", self.upstream_addr).parse().unwrap());
        config.root_cert = Some(vec![rustls_pki_types::CertificateDer::from_pem_slice(
            self.pki.cluster_ca.as_bytes(),
        )
        .unwrap()
        .to_vec()]);
        use base64::Engine;
        let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
        config.auth_info.client_certificate_data = Some(b64(self.pki.read("proxy.crt")));
        config.auth_info.client_key_data = Some(b64(self.pki.read("proxy.key")).into());
        config
    }

    /// Starts beijing's site proxy: it takes client certificates of
    /// sitegrid's CA and of the cluster's (the kubelets' own, which carry
    /// their nodes' offline reports).
    pub(crate) async fn start_site_proxy(&mut self) {
        let bundle = self.pki.path("site-client-ca.crt");
        std::fs::write(
            &bundle,
            format!("{}{}", self.pki.sitegrid_ca, self.pki.cluster_ca),
        )
        .unwrap();
        let mut opts = ProxyOptions::new("site-beijing", "127.0.0.1:0".parse().unwrap());
        opts.site = Some(
            sitegrid_apimachinery::selector::LabelSelector::parse("location=beijing").unwrap(),
        );
        opts.grace = Duration::from_millis(200);
        opts.anonymous_passthrough = sitegrid_proxy::passthrough::AnonymousPassthrough::All;
        opts.tls = Some(TlsFiles {
            cert: self.pki.path("serving.crt"),
            key: self.pki.path("serving.key"),
            client_ca: Some(bundle),
        });
        self.site = Some(start(self.api_config(), opts).await.unwrap());
    }

    /// A client of the site proxy as `identity`.
    pub(crate) fn on_site_proxy(&self, identity: Option<&str>) -> kube::Client {
        let site = self.site.as_ref().expect("a site proxy");
        self.pki.client(
            &format!("https://{}", site.local_addr),
            &self.pki.sitegrid_ca,
            identity,
        )
    }

    pub(crate) async fn start_proxy(&mut self) {
        // Behind a site proxy: the cached kinds from it, the kubelet's own
        // requests to the API server (--kubelet-kubeconfig).
        let (config, kubelet_upstream) = match &self.site {
            Some(site) => (self.pki.site_config(site), Some(self.api_config())),
            None => (self.api_config(), None),
        };
        let mut opts = ProxyOptions::new(NODE, "127.0.0.1:0".parse().unwrap());
        opts.grace = Duration::from_millis(200);
        opts.tls = Some(TlsFiles {
            cert: self.pki.path("serving.crt"),
            key: self.pki.path("serving.key"),
            client_ca: Some(self.pki.path("sitegrid-ca.crt")),
        });
        opts.data_dir = Some(self.data_dir.clone());
        opts.snapshot_wait = Duration::from_millis(200);
        opts.handlers.watch.bookmark_interval = Duration::from_millis(300);
        opts.kubelet = Some(KubeletOptions {
            bind: "127.0.0.1:0".parse().unwrap(),
            client_ca: self.pki.path("cluster-ca.crt"),
            certificate: self.pki.path("kubelet-bj-1.pem"),
            key: self.pki.path("kubelet-bj-1.pem"),
            seal_key: None,
            boot_id_file: self.boot_id.clone(),
            upstream: kubelet_upstream,
        });
        self.proxy = Some(start(config, opts).await.unwrap());
    }

    pub(crate) fn proxy(&self) -> &RunningProxy {
        self.proxy.as_ref().unwrap()
    }

    fn kubelet_url(&self) -> String {
        format!("https://{}", self.proxy().node_cache.as_ref().unwrap().0)
    }

    /// A client of the proxy's served views (kube-proxy's port).
    pub(crate) fn served(&self) -> kube::Client {
        self.pki.client(
            &format!("https://{}", self.proxy().local_addr),
            &self.pki.sitegrid_ca,
            Some("fake-kubelet"),
        )
    }

    /// A client of the kubelet port as `identity`.
    pub(crate) fn on_kubelet_port(&self, identity: Option<&str>) -> kube::Client {
        self.pki
            .client(&self.kubelet_url(), &self.pki.sitegrid_ca, identity)
    }

    pub(crate) fn kubelet(&self) -> kube::Client {
        self.on_kubelet_port(Some("kubelet-bj-1"))
    }

    /// The kubelet's Node watch, as its node informer opens it once it has
    /// stored its Node (offline, its pods are answered only then); open
    /// while the value lives.
    async fn kubelet_watches_its_node(&self) -> Watch {
        Watch::open(&self.kubelet(), OWN_NODE_WATCH).await
    }

    /// The node boots again (the kernel's boot id changes), its proxy too,
    /// with the API server still out of reach.
    pub(crate) async fn reboot_offline(&mut self) {
        std::fs::write(&self.boot_id, "7e2f90c4-51ab-4d08-9c6e-0a3b8d1f4e27\n").unwrap();
        self.restart_offline().await;
    }

    /// The proxy starts again (the node does not reboot), the API server
    /// out of reach; returns once it answers the kubelet from the node cache.
    pub(crate) async fn restart_offline(&mut self) {
        self.proxy.take().unwrap().shutdown().await;
        self.start_proxy().await;
        self.wait_until(|r| r.contains("the kubelet is answered from the node cache"))
            .await;
    }

    /// The API server goes away; returns once the proxy knows.
    pub(crate) async fn go_offline(&mut self) {
        self.upstream.take().unwrap().shutdown().await;
        self.wait_until(|r| r.contains("the kubelet is answered from the node cache"))
            .await;
    }

    /// The API server comes back on the same address.
    pub(crate) async fn come_back(&mut self) {
        self.upstream = Some(
            self.api
                .serve_tls(self.upstream_addr, &self.pki.api_tls())
                .await
                .unwrap(),
        );
    }

    /// Polls the proxy's /readyz until `f` holds.
    pub(crate) async fn wait_until(&self, f: impl Fn(&str) -> bool) {
        let ops = self.served();
        for _ in 0..200 {
            let (_, body) = send(&ops, Method::GET, "/readyz", None).await;
            if f(&String::from_utf8_lossy(&body)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_, body) = send(&ops, Method::GET, "/readyz", None).await;
        panic!(
            "readyz never satisfied the condition: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// The users the API server saw `path` (and its query) from.
    pub(crate) fn seen_as(&self, path: &str) -> Vec<Option<String>> {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        self.api
            .requests()
            .into_iter()
            .filter(|r| r.path == path && r.query == query)
            .map(|r| r.client)
            .collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// Sends one request as the kubelet sends it; the status and body.
pub(crate) async fn send(
    client: &kube::Client,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Bytes) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, KUBELET_ACCEPT);
    let body = match body {
        Some(v) => {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
            kube::client::Body::from(serde_json::to_vec(&v).unwrap())
        }
        None => kube::client::Body::empty(),
    };
    match client.send(req.body(body).unwrap()).await {
        Ok(resp) => {
            let status = resp.status();
            let protobuf = resp
                .headers()
                .get(http::header::CONTENT_TYPE)
                .is_some_and(|v| {
                    v.as_bytes()
                        .starts_with(b"application/vnd.kubernetes.protobuf")
                });
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            if protobuf {
                // Protobuf (the kubelet takes it first): a Status or a Service list read as JSON.
                if let Ok(json) = sitegrid_apimachinery::protobuf::to_json::answer(&body) {
                    return (status, Bytes::from(json));
                }
            }
            (status, body)
        }
        Err(e) => panic!("{path}: {e}"),
    }
}

/// A watch as the kubelet opens it, read event by event.
struct Watch {
    body: kube::client::Body,
    buffer: Vec<u8>,
}

impl Watch {
    async fn open(client: &kube::Client, path: &str) -> Watch {
        let req = Request::get(path)
            .header(http::header::ACCEPT, KUBELET_ACCEPT)
            .body(kube::client::Body::empty())
            .unwrap();
        Watch {
            body: client.send(req).await.unwrap().into_body(),
            buffer: Vec::new(),
        }
    }

    /// The next event, `None` at the end of the stream.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(
                    serde_json::from_slice(&line)
                        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&line))),
                );
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("an event within 10 s")?
                .unwrap();
            if let Some(data) = frame.data_ref() {
                self.buffer.extend_from_slice(data);
            }
        }
    }
}

pub(crate) async fn get(client: &kube::Client, path: &str) -> (StatusCode, Value) {
    let (status, body) = send(client, Method::GET, path, None).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|i| {
            i["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

pub(crate) fn token_request() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
           "spec": {"audiences": ["api"], "expirationSeconds": 3607,
                    "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "uid-web"}}})
}

/// The kubelet reads its own Node (before its pods are answered offline).
const OWN_NODE: &str =
    "/api/v1/nodes?fieldSelector=metadata.name%3Dbj-1&limit=500&resourceVersion=0";

/// The kubelet's watch of its own Node, after that list.
const OWN_NODE_WATCH: &str = "/api/v1/nodes?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dbj-1&resourceVersion=0&timeoutSeconds=300&watch=true";

/// What a kubelet reads to start bj-1's pod, online; returns the answers.
pub(crate) async fn kubelet_starts(w: &World) -> Vec<(String, Value)> {
    let kubelet = w.kubelet();
    assert_eq!(
        send(&kubelet, Method::GET, OWN_NODE, None).await.0,
        StatusCode::OK
    );
    let mut answers = Vec::new();
    for path in [
        PODS,
        SECRET,
        CONFIG_MAP,
        CSI_DRIVERS,
        RUNTIME_CLASSES,
        CSI_NODE,
    ] {
        let (status, body) = get(&kubelet, path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        answers.push((path.to_owned(), body));
    }
    let (status, body) = send(&kubelet, Method::POST, TOKEN, Some(token_request())).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    answers.push((TOKEN.to_owned(), serde_json::from_slice(&body).unwrap()));
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_kubelet_read_online_is_answered_offline_as_the_api_server_gave_it() {
    let mut w = World::new("offline").await;
    let online = kubelet_starts(&w).await;
    // Upstream as the kubelet itself, with its own certificate: never as the proxy.
    for (path, _) in &online {
        assert_eq!(
            w.seen_as(path),
            [Some("system:node:bj-1".to_owned())],
            "{path}"
        );
    }
    assert_eq!(
        names(&online[0].1),
        ["echoserver-bj-1", "web"],
        "bj-1's pods"
    );
    w.go_offline().await;
    let kubelet = w.kubelet();
    for (path, before) in &online[..online.len() - 1] {
        let (status, after) = get(&kubelet, path).await;
        assert_eq!(status, StatusCode::OK, "{path} offline: {after}");
        match before.get("items") {
            Some(_) => {
                assert_eq!(names(&after), names(before), "{path}");
                assert_eq!(
                    after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
                    "{path}: the API server's version, never one made up"
                );
                for (a, b) in after["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(before["items"].as_array().unwrap())
                {
                    assert_eq!(a["metadata"], b["metadata"], "{path}");
                    assert_eq!(a.get("data"), b.get("data"), "{path}");
                    assert_eq!(a.get("spec"), b.get("spec"), "{path}");
                }
            }
            None => assert_eq!(&after, before, "{path}"),
        }
    }
    // The token the API server issued for this pod, not a made-up one.
    let (status, token) = send(&kubelet, Method::POST, TOKEN, Some(token_request())).await;
    assert_eq!(status, StatusCode::CREATED);
    let token: Value = serde_json::from_slice(&token).unwrap();
    assert_eq!(
        token["status"]["token"],
        online.last().unwrap().1["status"]["token"]
    );
    // A token never asked for online is not made up offline.
    let mut other = token_request();
    other["spec"]["audiences"] = json!(["vault"]);
    assert_eq!(
        send(&kubelet, Method::POST, TOKEN, Some(other)).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // What the served-state cache answers anyone, it answers the kubelet too.
    let (status, nodes) = send(
        &kubelet,
        Method::GET,
        "/api/v1/nodes?fieldSelector=metadata.name%3Dbj-1&limit=500&resourceVersion=0",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    use prost::Message;
    let list = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&nodes[4..]).unwrap();
    let nodes = k8s_pb::api::core::v1::NodeList::decode(list.raw.unwrap().as_slice()).unwrap();
    let names: Vec<_> = nodes
        .items
        .iter()
        .filter_map(|n| n.metadata.as_ref()?.name.clone())
        .collect();
    assert_eq!(names, ["bj-1"], "its own Node, from the served-state cache");
    assert_eq!(
        get(&kubelet, "/api/v1/services?limit=500&resourceVersion=0")
            .await
            .0,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_writes_get_503_at_once_and_the_registration_409() {
    let mut w = World::new("writes").await;
    kubelet_starts(&w).await;
    w.go_offline().await;
    let kubelet = w.kubelet();
    // (A pod's status is taken: offline_the_kubelets_pod_status_moves_….)
    for (method, path, body) in [
        (
            Method::PATCH,
            "/api/v1/nodes/bj-1/status?timeout=10s",
            json!({"status": {}}),
        ),
        (
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/bj-1?timeout=10s",
            json!({}),
        ),
        (Method::POST, "/api/v1/namespaces/default/events", json!({})),
        (Method::POST, "/apis/storage.k8s.io/v1/csinodes", json!({})),
        (
            Method::DELETE,
            "/api/v1/namespaces/shop/pods/web",
            json!({}),
        ),
    ] {
        let (status, answer) = send(&kubelet, method.clone(), path, Some(body)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{method} {path}");
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["kind"], "Status");
    }
    let (status, answer) = send(
        &kubelet,
        Method::POST,
        "/api/v1/nodes",
        Some(json!({"metadata": {"name": NODE}})),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["reason"], "AlreadyExists");
    // Never read online: refused, not answered empty.
    let unknown = "/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3Dunused&limit=500&resourceVersion=0";
    assert_eq!(
        get(&kubelet, unknown).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_this_nodes_kubelet_reads_what_is_kept() {
    let mut w = World::new("identity").await;
    kubelet_starts(&w).await;
    w.go_offline().await;
    // Another node's kubelet, an admin: refused on the kubelet port.
    for stranger in ["kubelet-bj-2", "admin"] {
        let (status, body) = get(&w.on_kubelet_port(Some(stranger)), PODS).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{stranger}: {body}");
    }
    // No certificate: no connection at all.
    assert!(w
        .on_kubelet_port(None)
        .send(
            Request::get(PODS)
                .body(kube::client::Body::empty())
                .unwrap()
        )
        .await
        .is_err());
    // The kubelet's name on a certificate of sitegrid's CA, on the serving
    // port: an impersonated caller, never the node cache's.
    let serving = w.served();
    assert_eq!(get(&serving, PODS).await.0, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_restarted_offline_answers_from_disk_and_refuses_a_damaged_pod_list() {
    let mut w = World::new("restart").await;
    let online = kubelet_starts(&w).await;
    // The first answer of each scope is on disk as soon as the kubelet has
    // it (the write-behind of later changes waits a second): the kubelet
    // watches a scope from the version it got, which a proxy restarted
    // after a crash must still have. (So is the token, in the tokens'
    // journal: the restart below answers it.)
    for file in ["pods", "secrets", "configmaps"] {
        let path = w.data_dir.join("node-cache").join(file);
        assert!(path.exists(), "{}", path.display());
    }
    // The kubelet goes on reading after its token came (its pods' status
    // changes): the token stays kept, and on disk.
    assert_eq!(get(&w.kubelet(), PODS).await.0, StatusCode::OK);
    w.go_offline().await;
    w.restart_offline().await;
    let _node = w.kubelet_watches_its_node().await;
    let (status, pods) = get(&w.kubelet(), PODS).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(names(&pods), names(&online[0].1));
    let (status, token) = send(&w.kubelet(), Method::POST, TOKEN, Some(token_request())).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the token kept before the restart: {}",
        String::from_utf8_lossy(&token)
    );
    assert_eq!(
        pods["metadata"]["resourceVersion"],
        online[0].1["metadata"]["resourceVersion"]
    );
    let files = w.data_dir.join("node-cache");
    for (path, mode) in [
        (files.clone(), 0o700),
        (files.join("pods"), 0o600),
        (files.join("secrets"), 0o600),
    ] {
        let m = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        ) & 0o777;
        assert_eq!(m, mode, "{}", path.display());
    }

    // A torn pods file: the pod list is refused, never answered empty.
    w.proxy.take().unwrap().shutdown().await;
    let pods_file = files.join("pods");
    let bytes = std::fs::read(&pods_file).unwrap();
    std::fs::write(&pods_file, &bytes[..bytes.len() - 9]).unwrap();
    w.start_proxy().await;
    w.wait_until(|r| r.contains("the kubelet is answered from the node cache"))
        .await;
    let (status, answer) = get(&w.kubelet(), PODS).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("refused"),
        "{answer}"
    );
    // The other files still answer.
    assert_eq!(get(&w.kubelet(), SECRET).await.0, StatusCode::OK);
}

/// A 1.20 kubelet lists its pods and its Node at once and admits pods
/// against the Node it has stored: offline, its pods come only once it has
/// its Node, or a node selector on the site's label would reject them for
/// good. Its Node watch says it has it (its informer stores the list before
/// it watches); the Node list answered does not yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_the_pods_come_after_the_kubelet_has_its_node() {
    let mut w = World::new("node-first").await;
    let online = kubelet_starts(&w).await;
    w.go_offline().await;
    for list_first in [false, true] {
        // A node rebooted: a new proxy, the kubelet starting again.
        w.proxy.take().unwrap().shutdown().await;
        w.start_proxy().await;
        w.wait_until(|r| r.contains("the kubelet is answered from the node cache"))
            .await;
        let kubelet = w.kubelet();
        let mut pods = tokio::spawn(async move { get(&kubelet, PODS).await });
        if list_first {
            let node = send(&w.kubelet(), Method::GET, OWN_NODE, None).await;
            assert_eq!(node.0, StatusCode::OK);
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(1), &mut pods)
                .await
                .is_err(),
            "the pods were answered before the kubelet had its Node (its Node listed: {list_first})"
        );
        let _node = w.kubelet_watches_its_node().await;
        let (status, pods) = tokio::time::timeout(Duration::from_secs(30), pods)
            .await
            .expect("the pods once the kubelet watches its Node")
            .unwrap();
        assert_eq!(status, StatusCode::OK, "{pods}");
        assert_eq!(names(&pods), names(&online[0].1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_list_is_empty_offline_only_when_the_api_server_said_so() {
    let mut w = World::new("empty").await;
    // Nothing listed yet: refused.
    w.go_offline().await;
    assert_eq!(
        get(&w.kubelet(), PODS).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // The API server answers, with no pod on this node.
    w.come_back().await;
    w.wait_until(|r| r == "ok").await;
    w.api.delete("pods", Some("shop"), "web");
    w.api.delete("pods", Some("default"), "echoserver-bj-1");
    let (status, online) = get(&w.kubelet(), PODS).await;
    assert_eq!(
        (status, names(&online)),
        (StatusCode::OK, Vec::<String>::new())
    );
    w.go_offline().await;
    let _node = w.kubelet_watches_its_node().await;
    let (status, offline) = get(&w.kubelet(), PODS).await;
    assert_eq!(
        (status, names(&offline)),
        (StatusCode::OK, Vec::<String>::new())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_held_offline_with_bookmarks_and_ends_when_the_api_server_is_back() {
    let mut w = World::new("watch").await;
    let online = kubelet_starts(&w).await;
    let rv = online[0].1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    w.go_offline().await;
    let kubelet = w.kubelet();
    let watch = format!(
        "/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dbj-1&resourceVersion={rv}&timeoutSeconds=300&watch=true"
    );
    let mut held = Watch::open(&kubelet, &watch).await;
    // Bookmarks at the kept version while offline.
    let event = held.next().await.unwrap();
    assert_eq!(event["type"], "BOOKMARK");
    assert_eq!(event["object"]["metadata"]["resourceVersion"], rv.as_str());
    // Back online: the held watch ends, so the kubelet watches the API server.
    w.come_back().await;
    let ended = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(e) = held.next().await {
            assert_eq!(e["type"], "BOOKMARK");
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the held watch ended when the API server came back"
    );
    // A watch from another version than the kept list's: 410, so it lists again.
    w.wait_until(|r| r == "ok").await;
    let stale = watch.replace(&format!("resourceVersion={rv}"), "resourceVersion=1");
    let (status, frame) = send(&kubelet, Method::GET, &stale, None).await;
    assert_eq!(status, StatusCode::OK);
    // One protobuf watch frame (the kubelet takes protobuf first): its length, then the event.
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(frame.len(), 4 + len, "one event, then the end");
    let event: Value = serde_json::from_slice(
        &sitegrid_apimachinery::protobuf::to_json::watch_event(&frame[4..]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (event["type"].as_str(), event["object"]["code"].as_u64()),
        (Some("ERROR"), Some(410))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_no_pod_uses_any_more_is_let_go() {
    let mut w = World::new("retain").await;
    kubelet_starts(&w).await;
    let kubelet = w.kubelet();
    // The kubelet watches its pods from the list; the pod goes.
    let (_, pods) = get(&kubelet, PODS).await;
    let rv = pods["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let watch = format!("/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3Dbj-1&resourceVersion={rv}&watch=true");
    let mut watch = Watch::open(&kubelet, &watch).await;
    w.api.delete("pods", Some("shop"), "web");
    loop {
        let event = watch.next().await.expect("the deletion");
        if event["type"] == "DELETED" && event["object"]["metadata"]["name"] == "web" {
            break;
        }
    }
    w.go_offline().await;
    assert_eq!(
        get(&kubelet, SECRET).await.0,
        StatusCode::SERVICE_UNAVAILABLE,
        "no longer kept"
    );
    let expected: Vec<String> = names(&pods).into_iter().filter(|n| n != "web").collect();
    assert_eq!(names(&get(&kubelet, PODS).await.1), expected);
}

/// Issue 44: offline, the kubelet's status writes for its own pods (new
/// addresses after an offline reboot, readiness) move the endpoints every
/// client of the cache is served; they survive a restart of the proxy; the
/// API server's view wins again once it answers.
/// The path of shop's EndpointSlices.
pub(crate) const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices";
/// The path of web's status, which its kubelet writes.
pub(crate) const STATUS: &str = "/api/v1/namespaces/shop/pods/web/status";

/// A Service of bj-1's pod web (10.0.1.5) and of bj-2's pod web-b
/// (10.0.1.6), in the same site: a slice and an Endpoints.
pub(crate) fn web_service(w: &World) {
    let target = |name: &str, uid: &str| json!({"kind": "Pod", "namespace": "shop", "name": name, "uid": uid});
    for obj in [
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"clusterIP": "10.96.0.80", "ports": [{"port": 80, "protocol": "TCP"}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-x1", "namespace": "shop", "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4", "ports": [{"port": 8080, "protocol": "TCP"}],
               "endpoints": [
                 {"addresses": ["10.0.1.5"], "conditions": {"ready": true, "serving": true, "terminating": false},
                  "nodeName": NODE, "targetRef": target("web", "uid-web")},
                 {"addresses": ["10.0.1.6"], "conditions": {"ready": true, "serving": true, "terminating": false},
                  "nodeName": "bj-2", "targetRef": target("web-b", "uid-web-b")}]}),
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "shop"},
               "subsets": [{"addresses": [
                   {"ip": "10.0.1.5", "nodeName": NODE, "targetRef": target("web", "uid-web")},
                   {"ip": "10.0.1.6", "nodeName": "bj-2", "targetRef": target("web-b", "uid-web-b")}],
                 "ports": [{"port": 8080, "protocol": "TCP"}]}]}),
    ] {
        w.api.apply(obj);
    }
}

/// (address, ready) of each endpoint of web's slice as `c` is served it,
/// and the list's version.
pub(crate) async fn slice_of(c: &kube::Client) -> (Vec<(String, bool)>, u64) {
    let (status, list) = get(c, SLICES).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let eps = list["items"][0]["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["addresses"][0].as_str().unwrap_or_default().to_owned(),
                e["conditions"]["ready"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    (eps, rv)
}

/// Polls until `c` is served web's slice as `want`; the list's version.
pub(crate) async fn until_slice(c: &kube::Client, want: &[(&str, bool)]) -> u64 {
    let want: Vec<(String, bool)> = want.iter().map(|(a, r)| (a.to_string(), *r)).collect();
    for _ in 0..200 {
        let (eps, rv) = slice_of(c).await;
        if eps == want {
            return rv;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the served slice never became {want:?}: {:?}",
        slice_of(c).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_the_kubelets_pod_status_moves_the_served_endpoints_until_the_api_server_is_back() {
    const ENDPOINTS: &str = "/api/v1/namespaces/shop/endpoints/web";
    let mut w = World::new("local-truth").await;
    web_service(&w);
    kubelet_starts(&w).await;
    let before = until_slice(&w.served(), &[("10.0.1.5", true), ("10.0.1.6", true)]).await;
    w.go_offline().await;

    // The pod came back after a reboot: a new address, not ready yet.
    let patch = |ready: &str| {
        json!({"metadata": {"uid": "uid-web"},
               "status": {"podIP": "10.0.1.50", "podIPs": [{"ip": "10.0.1.50"}],
                          "conditions": [{"type": "Ready", "status": ready}]}})
    };
    let (status, body) = send(&w.kubelet(), Method::PATCH, STATUS, Some(patch("False"))).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let pod: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        pod["status"]["podIP"], "10.0.1.50",
        "answered with the patched pod"
    );
    assert_eq!(pod["spec"]["nodeName"], NODE);
    let not_ready = until_slice(&w.served(), &[("10.0.1.50", false), ("10.0.1.6", true)]).await;
    assert!(not_ready > before, "{not_ready} after {before}");
    let (_, ep) = get(&w.served(), ENDPOINTS).await;
    assert_eq!(
        ep["subsets"][0]["notReadyAddresses"][0]["ip"], "10.0.1.50",
        "{ep}"
    );
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "10.0.1.6", "{ep}");
    // Ready: served as ready; the kubelet reads its pod as it wrote it.
    assert_eq!(
        send(&w.kubelet(), Method::PATCH, STATUS, Some(patch("True")))
            .await
            .0,
        StatusCode::OK
    );
    until_slice(&w.served(), &[("10.0.1.50", true), ("10.0.1.6", true)]).await;
    let (_, pod) = get(&w.kubelet(), "/api/v1/namespaces/shop/pods/web").await;
    assert_eq!(pod["status"]["podIP"], "10.0.1.50");
    // Not the kubelet's pod, or not its pod's uid: not taken.
    let (status, _) = send(
        &w.kubelet(),
        Method::PATCH,
        "/api/v1/namespaces/shop/pods/web-b/status",
        Some(json!({"status": {"podIP": "10.0.1.66"}})),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let mut stale = patch("True");
    stale["metadata"]["uid"] = json!("uid-of-a-deleted-pod");
    assert_eq!(
        send(&w.kubelet(), Method::PATCH, STATUS, Some(stale))
            .await
            .0,
        StatusCode::CONFLICT
    );
    // Anyone else on the kubelet port: refused, nothing changes.
    let stranger = w.on_kubelet_port(Some("kubelet-bj-2"));
    assert_eq!(
        send(&stranger, Method::PATCH, STATUS, Some(patch("False")))
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let (eps, offline_rv) = slice_of(&w.served()).await;
    assert_eq!(
        eps,
        [
            ("10.0.1.50".to_owned(), true),
            ("10.0.1.6".to_owned(), true)
        ]
    );

    // The proxy restarts offline: the kubelet's word stays served.
    w.restart_offline().await;
    let (eps, rv) = slice_of(&w.served()).await;
    assert_eq!(
        eps,
        [
            ("10.0.1.50".to_owned(), true),
            ("10.0.1.6".to_owned(), true)
        ]
    );
    assert!(rv >= offline_rv);

    // The API server is back: its view wins (it still says 10.0.1.5 until
    // the kubelet's next status sync reaches it), with a higher version.
    w.come_back().await;
    let back = until_slice(&w.served(), &[("10.0.1.5", true), ("10.0.1.6", true)]).await;
    assert!(back > rv, "{back} after {rv}");
}

/// After a reboot the node's pods run no more where they ran, and the
/// kubelet reports each again only when its turn comes: until it does, their
/// endpoints are served not ready, so traffic goes to the pods it has
/// reported since, never to an old address where nothing listens. A restart
/// of the proxy in the same boot changes nothing the kubelet said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reboot_offline_the_nodes_pods_are_served_not_ready_until_the_kubelet_reports_them()
{
    let mut w = World::new("reboot").await;
    web_service(&w);
    kubelet_starts(&w).await;
    until_slice(&w.served(), &[("10.0.1.5", true), ("10.0.1.6", true)]).await;
    w.go_offline().await;
    // A restart in the same boot: the node's pods still run where they ran.
    w.restart_offline().await;
    assert_eq!(
        slice_of(&w.served()).await.0,
        [("10.0.1.5".to_owned(), true), ("10.0.1.6".to_owned(), true)]
    );

    w.reboot_offline().await;
    // bj-1's pod not ready where it was; bj-2's, on a node that did not
    // reboot, as it was.
    until_slice(&w.served(), &[("10.0.1.5", false), ("10.0.1.6", true)]).await;
    let (_, ep) = get(&w.served(), "/api/v1/namespaces/shop/endpoints/web").await;
    assert_eq!(
        ep["subsets"][0]["notReadyAddresses"][0]["ip"], "10.0.1.5",
        "{ep}"
    );
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "10.0.1.6", "{ep}");
    // The kubelet reports it, started again at a new address and ready.
    let ready = json!({"metadata": {"uid": "uid-web"},
                       "status": {"podIP": "10.0.1.50", "podIPs": [{"ip": "10.0.1.50"}],
                                  "conditions": [{"type": "Ready", "status": "True"}]}});
    assert_eq!(
        send(&w.kubelet(), Method::PATCH, STATUS, Some(ready))
            .await
            .0,
        StatusCode::OK
    );
    until_slice(&w.served(), &[("10.0.1.50", true), ("10.0.1.6", true)]).await;
    // The proxy restarts in this boot: what the kubelet reported stays (it
    // would not write the same status again).
    w.restart_offline().await;
    assert_eq!(
        slice_of(&w.served()).await.0,
        [
            ("10.0.1.50".to_owned(), true),
            ("10.0.1.6".to_owned(), true)
        ]
    );
}
