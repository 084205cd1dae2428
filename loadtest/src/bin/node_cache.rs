//! `sitegrid-node-cache-bench`: the figures of the node cache (issue 42). A
//! release proxy with `--kubelet-bind-address` serves a modelled kubelet of
//! node `bench-1` (kubelet 1.20's reads of a node with `--pods` pods, each
//! with its own Secret, ConfigMap and projected service-account token) in
//! front of the in-memory API server, over TLS with client certificates as
//! on a node. Measured:
//!
//! - online: the latency of the kubelet's reads through the proxy beside the
//!   same reads sent to the API server directly (what the proxy adds);
//! - the proxy's RSS and the node cache's bytes on disk once it keeps them;
//! - offline (the API server gone): the latency of the same reads answered
//!   from the node cache, and after a restart of the proxy offline the time
//!   to its first answered pod list.
//!
//! Prints a Markdown report. Benchmarks are not tests: nothing here asserts
//! a time. `cargo build --profile dist -p sitegrid-proxy -p sitegrid-loadtest
//! && target/dist/sitegrid-node-cache-bench`.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use clap::Parser;
use http_body_util::BodyExt;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use serde_json::{json, Value};
use sitegrid_fakeapi::{ApiServer, ApiServerConfig, KubernetesVersion, TlsServing};
use sitegrid_loadtest::{free_port, proxy_bin, rss_kib};

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-node-cache-bench",
    about = "sitegrid-proxy's node cache: latency added online, answers offline, memory and disk per node"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// Pods on the node, each with a Secret, a ConfigMap and a token.
    #[arg(long, default_value_t = 100)]
    pods: usize,
    /// Rounds of the kubelet's reads timed, online and offline each.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// Run the proxy on this CPU alone, and this bench (the kubelet model and
    /// the in-memory API server) on the others.
    #[arg(long)]
    proxy_cpu: Option<usize>,
}

const NODE: &str = "bench-1";
const ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let proxy_bin = proxy_bin(args.proxy_bin.as_deref())?;
    let placement = match args.proxy_cpu {
        Some(cpu) => {
            let others = sitegrid_loadtest::affinity::leave_cpu(cpu)?;
            format!(" The proxy ran on CPU {cpu} alone, the bench on CPUs {others:?}.")
        }
        None => " The proxy and the bench shared every CPU.".to_owned(),
    };
    let dir =
        std::env::temp_dir().join(format!("sitegrid-node-cache-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let pki = Pki::new(&dir)?;

    let api = ApiServer::new(ApiServerConfig::for_version(KubernetesVersion::V1_20));
    api.load(objects(args.pods));
    let upstream = api
        .serve_tls(
            "127.0.0.1:0".parse()?,
            &TlsServing {
                cert: pki.read("api.crt")?,
                key: pki.read("api.key")?,
                client_ca: pki.read("cluster-ca.crt")?,
            },
        )
        .await?;
    let api_url = format!("https://{}", upstream.local_addr());
    let direct = pki.client(&api_url, "cluster-ca.crt")?;

    let data = dir.join("data");
    let mut proxy = Proxy::start(&proxy_bin, &pki, &api_url, &data, args.proxy_cpu)?;
    let kubelet = pki.client(&format!("https://{}", proxy.kubelet), "sitegrid-ca.crt")?;
    wait(&kubelet, &format!("/api/v1/nodes/{NODE}")).await?;

    println!("# sitegrid-node-cache-bench\n");
    println!(
        "Node `{NODE}` with {} pods, each with a Secret, a ConfigMap and a projected service-account token; the kubelet's reads as kubelet 1.20 sends them (protobuf), through sitegrid-proxy's kubelet port over TLS with the kubelet's client certificate, the in-memory API server playing 1.20 behind it (HTTPS, client certificates); {} rounds.{placement}\n",
        args.pods, args.rounds
    );
    let reads = reads(args.pods);
    let own_node = Read {
        path: OWN_NODE.into(),
        token: None,
    };
    send(&kubelet, &own_node).await?;
    let _node_watch = watch_own_node(&kubelet).await?;
    // The kubelet's start: everything read (and kept) once.
    for r in &reads {
        send(&kubelet, r).await?;
    }
    // Reads and TokenRequests apart: a token is written to disk (fsync)
    // before the kubelet gets it, which it asks for once per pod and hour.
    let (mut online_proxy, mut online_direct) = (Times::default(), Times::default());
    for _ in 0..args.rounds {
        for r in &reads {
            online_proxy.add(r, send(&kubelet, r).await?);
            online_direct.add(r, send(&direct, r).await?);
        }
    }
    // Written behind (at most a second), then measured.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss = rss_kib(proxy.child.id());
    let disk = dir_bytes(&data.join("node-cache"));

    // The API server goes away.
    upstream.shutdown().await;
    let ops = format!("http://{}/readyz", proxy.metrics);
    wait_readyz(&ops, "answered from the node cache").await?;
    send(&kubelet, &own_node).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut offline = Times::default();
    for _ in 0..args.rounds {
        for r in &reads {
            offline.add(r, send(&kubelet, r).await?);
        }
    }
    let rss_offline = rss_kib(proxy.child.id());
    // A restart offline: the first pod list answered from disk.
    proxy.stop();
    let started = Instant::now();
    proxy = Proxy::start(&proxy_bin, &pki, &api_url, &data, args.proxy_cpu)?;
    let kubelet = pki.client(&format!("https://{}", proxy.kubelet), "sitegrid-ca.crt")?;
    let pods =
        format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}&limit=500&resourceVersion=0");
    let mut node_watch = None;
    let first_list = loop {
        // As the kubelet: its Node listed and watched, then its pods.
        if node_watch.is_none() && status(&kubelet, OWN_NODE).await.is_ok_and(|s| s == 200) {
            node_watch = watch_own_node(&kubelet).await.ok();
        }
        if node_watch.is_some() && status(&kubelet, &pods).await.is_ok_and(|s| s == 200) {
            break started.elapsed();
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the restarted proxy never answered the pod list offline".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    proxy.stop();

    println!("| | requests | p50 | p99 | max | count |");
    println!("|---|---|---|---|---|---|");
    let mut added = Vec::new();
    for (what, tokens) in [("lists and gets", false), ("TokenRequests", true)] {
        let mut p99s = Vec::new();
        for (label, t) in [
            ("online, to the API server directly", &mut online_direct),
            ("online, through the node cache", &mut online_proxy),
            ("offline, from the node cache", &mut offline),
        ] {
            let v = if tokens { &mut t.tokens } else { &mut t.reads };
            let (p50, p99, max) = percentiles(v);
            p99s.push(p99);
            println!(
                "| {label} | {what} | {p50:.2} ms | {p99:.2} ms | {max:.2} ms | {} |",
                v.len()
            );
        }
        added.push(format!("{what} {:.2} ms", p99s[1] - p99s[0]));
    }
    println!(
        "\nAdded online at p99: {}. The proxy's RSS with {} pods kept: {:.1} MiB online, {:.1} MiB offline. The node cache on disk: {} bytes ({:.1} KiB per pod). Restarted offline: its Node and the pod list answered {:.0} ms after the process was spawned (the pod list once the kubelet watches its Node, by design).",
        added.join(", "),
        args.pods,
        rss as f64 / 1024.0,
        rss_offline as f64 / 1024.0,
        disk,
        disk as f64 / 1024.0 / args.pods.max(1) as f64,
        first_list.as_secs_f64() * 1000.0
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// One read of the kubelet: method, path and the body of a TokenRequest.
struct Read {
    path: String,
    token: Option<Value>,
}

/// The kubelet's list of its own Node (read first: offline, a 1.20
/// kubelet's pods are answered once it has its Node, see `kubelet::NodeRead`).
const OWN_NODE: &str =
    "/api/v1/nodes?fieldSelector=metadata.name%3Dbench-1&limit=500&resourceVersion=0";
/// Its watch after that list.
const OWN_NODE_WATCH: &str = "/api/v1/nodes?allowWatchBookmarks=true&fieldSelector=metadata.name%3Dbench-1&resourceVersion=0&timeoutSeconds=300&watch=true";

/// What kubelet 1.20 reads for a node of `pods` pods once it has its Node
/// (proxy/README.md's table): its pods, each pod's Secret and ConfigMap
/// (one list per object) and token, its CSINode, the CSIDrivers and
/// RuntimeClasses.
fn reads(pods: usize) -> Vec<Read> {
    let get = |path: String| Read { path, token: None };
    let mut out = vec![
        get(format!(
            "/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}&limit=500&resourceVersion=0"
        )),
        get(format!("/apis/storage.k8s.io/v1/csinodes/{NODE}")),
        get("/apis/storage.k8s.io/v1/csidrivers?limit=500&resourceVersion=0".into()),
        get("/apis/node.k8s.io/v1/runtimeclasses?limit=500&resourceVersion=0".into()),
    ];
    for i in 0..pods {
        out.push(get(format!(
            "/api/v1/namespaces/shop/secrets?fieldSelector=metadata.name%3Dsecret-{i}&limit=500&resourceVersion=0"
        )));
        out.push(get(format!(
            "/api/v1/namespaces/shop/configmaps?fieldSelector=metadata.name%3Dconfig-{i}&limit=500&resourceVersion=0"
        )));
        out.push(Read {
            path: "/api/v1/namespaces/shop/serviceaccounts/app/token".into(),
            token: Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": ["api"], "expirationSeconds": 3607,
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": format!("app-{i}"), "uid": format!("uid-{i}")}}})),
        });
    }
    out
}

/// The node, its pods and what they use.
fn objects(pods: usize) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "app", "namespace": "shop"}}),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": NODE}, "spec": {"drivers": []}}),
    ];
    for i in 0..pods {
        out.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("secret-{i}"), "namespace": "shop"},
            "type": "Opaque", "data": {"password": "aHVudGVyMg==", "certificate": "Y2VydGlmaWNhdGU=".repeat(40)}}));
        out.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("config-{i}"), "namespace": "shop"},
            "data": {"MODE": "edge", "settings.yaml": "key: value\n".repeat(40)}}));
        out.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("app-{i}"), "namespace": "shop", "uid": format!("uid-{i}"),
                         "labels": {"app": "shop", "pod-template-hash": "6ff4dd4d45"}},
            "spec": {"nodeName": NODE, "serviceAccountName": "app",
                "containers": [{"name": "app", "image": "registry.example/shop/app:1.4.2",
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "envFrom": [{"configMapRef": {"name": format!("config-{i}")}}],
                    "volumeMounts": [{"name": "secret", "mountPath": "/secret"}, {"name": "token", "mountPath": "/token"}]}],
                "volumes": [{"name": "secret", "secret": {"secretName": format!("secret-{i}")}},
                            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607, "audience": "api"}}]}}]},
            "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", i / 250, i % 250 + 2),
                       "conditions": [{"type": "Ready", "status": "True"}]}}));
    }
    out
}

/// Sends one read; its time, in milliseconds.
async fn send(client: &kube::Client, r: &Read) -> Result<f64, Box<dyn std::error::Error>> {
    let req = http::Request::builder()
        .uri(&r.path)
        .header(http::header::ACCEPT, ACCEPT);
    let req = match &r.token {
        Some(body) => req
            .method(http::Method::POST)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(kube::client::Body::from(serde_json::to_vec(body)?))?,
        None => req.body(kube::client::Body::empty())?,
    };
    let t = Instant::now();
    let resp = client.send(req).await?;
    let status = resp.status();
    resp.into_body().collect().await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if !status.is_success() {
        return Err(format!(
            "{} {}: {status}",
            if r.token.is_some() { "POST" } else { "GET" },
            r.path
        )
        .into());
    }
    Ok(ms)
}

async fn status(client: &kube::Client, path: &str) -> Result<u16, Box<dyn std::error::Error>> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, ACCEPT)
        .body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    let code = resp.status().as_u16();
    resp.into_body().collect().await?;
    Ok(code)
}

/// The kubelet's watch of its own Node, which its informer opens once it has
/// stored the Node it listed (offline, its pods are answered only then);
/// open while the returned body lives.
async fn watch_own_node(
    client: &kube::Client,
) -> Result<kube::client::Body, Box<dyn std::error::Error>> {
    let req = http::Request::get(OWN_NODE_WATCH)
        .header(http::header::ACCEPT, ACCEPT)
        .body(kube::client::Body::empty())?;
    let resp = client.send(req).await?;
    match resp.status().as_u16() {
        200 => Ok(resp.into_body()),
        code => Err(format!("the kubelet's Node watch answered {code}").into()),
    }
}

/// Waits until `path` answers 200 (the proxy is up and the kubelet's Node read).
async fn wait(client: &kube::Client, path: &str) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..600 {
        if let Ok(200) = status(client, path).await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{path} never answered").into())
}

/// Waits until the proxy's /readyz says `what`.
async fn wait_readyz(url: &str, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    let http = sitegrid_loadtest::client();
    for _ in 0..600 {
        if let Ok(resp) = http.get(url.parse()?).await {
            let body = resp.into_body().collect().await?.to_bytes();
            if String::from_utf8_lossy(&body).contains(what) {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("/readyz never said {what:?}").into())
}

/// Request times in milliseconds, reads and TokenRequests apart.
#[derive(Default)]
struct Times {
    reads: Vec<f64>,
    tokens: Vec<f64>,
}

impl Times {
    fn add(&mut self, r: &Read, ms: f64) {
        match r.token {
            Some(_) => self.tokens.push(ms),
            None => self.reads.push(ms),
        }
    }
}

/// (p50, p99, max) of `v`, in milliseconds.
fn percentiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        v.get(((v.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    (at(0.5), at(0.99), at(1.0))
}

/// The bytes of the files in `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A release proxy with the node cache.
struct Proxy {
    child: Child,
    kubelet: std::net::SocketAddr,
    metrics: std::net::SocketAddr,
}

impl Proxy {
    fn start(
        bin: &Path,
        pki: &Pki,
        api_url: &str,
        data: &Path,
        cpu: Option<usize>,
    ) -> Result<Proxy, Box<dyn std::error::Error>> {
        let kubeconfig = pki.dir.join("upstream.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {api_url}\n    certificate-authority: {ca}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    client-certificate: {crt}\n    client-key: {key}\ncurrent-context: c\n",
                ca = pki.path("cluster-ca.crt").display(),
                crt = pki.path("proxy.crt").display(),
                key = pki.path("proxy.key").display(),
            ),
        )?;
        let serving = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let kubelet = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let metrics = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let child = Command::new(bin)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--hostname={NODE}"))
            .arg(format!("--bind-address={serving}"))
            .arg(format!("--metrics-bind-address={metrics}"))
            .arg(format!("--kubelet-bind-address={kubelet}"))
            .arg(format!("--cert-file={}", pki.path("serving.crt").display()))
            .arg(format!("--key-file={}", pki.path("serving.key").display()))
            .arg(format!(
                "--ca-file={}",
                pki.path("sitegrid-ca.crt").display()
            ))
            .arg(format!(
                "--kubelet-client-ca-file={}",
                pki.path("cluster-ca.crt").display()
            ))
            .arg(format!(
                "--kubelet-client-certificate={}",
                pki.path("kubelet.crt").display()
            ))
            .arg(format!(
                "--kubelet-client-key={}",
                pki.path("kubelet.key").display()
            ))
            .arg(format!("--data-dir={}", data.display()))
            .arg("--snapshot-wait=200ms")
            .arg("--log-level=warn")
            .stdout(Stdio::null())
            .spawn()?;
        if let Some(cpu) = cpu {
            sitegrid_loadtest::affinity::pin_process(child.id(), cpu)?;
        }
        Ok(Proxy {
            child,
            kubelet,
            metrics,
        })
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two CAs as on a node: the cluster's (the API server's serving
/// certificate, the kubelet's and the proxy's client certificates) and
/// sitegrid's (the proxy's serving certificate).
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Result<Pki, Box<dyn std::error::Error>> {
        let dir = dir.join("pki");
        std::fs::create_dir_all(&dir)?;
        let ca = |cn: &str| -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            CertifiedIssuer::self_signed(p, KeyPair::generate()?)
        };
        let cluster = ca("kubernetes")?;
        let sitegrid = ca("sitegrid")?;
        std::fs::write(dir.join("cluster-ca.crt"), cluster.pem())?;
        std::fs::write(dir.join("sitegrid-ca.crt"), sitegrid.pem())?;
        let leaf = |issuer: &CertifiedIssuer<'_, KeyPair>,
                    name: &str,
                    cn: &str,
                    org: Option<&str>,
                    server: bool|
         -> Result<(), Box<dyn std::error::Error>> {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            if let Some(o) = org {
                p.distinguished_name.push(DnType::OrganizationName, o);
            }
            if server {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                p.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
            } else {
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            }
            let key = KeyPair::generate()?;
            std::fs::write(
                dir.join(format!("{name}.crt")),
                p.signed_by(&key, issuer)?.pem(),
            )?;
            std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem())?;
            Ok(())
        };
        leaf(&cluster, "api", "kube-apiserver", None, true)?;
        leaf(
            &cluster,
            "kubelet",
            &format!("system:node:{NODE}"),
            Some("system:nodes"),
            false,
        )?;
        leaf(
            &cluster,
            "proxy",
            "system:serviceaccount:kube-system:sitegrid-proxy",
            None,
            false,
        )?;
        leaf(&sitegrid, "serving", "sitegrid-proxy", None, true)?;
        Ok(Pki { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn read(&self, name: &str) -> Result<String, std::io::Error> {
        std::fs::read_to_string(self.path(name))
    }

    /// A client of `url` as the kubelet, trusting `ca`.
    fn client(&self, url: &str, ca: &str) -> Result<kube::Client, Box<dyn std::error::Error>> {
        use base64::Engine;
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
        let mut config = kube::Config::new(url.parse()?);
        config.root_cert = Some(vec![CertificateDer::from_pem_slice(
            self.read(ca)?.as_bytes(),
        )?
        .to_vec()]);
        config.auth_info.client_certificate_data = Some(b64(self.read("kubelet.crt")?));
        config.auth_info.client_key_data = Some(b64(self.read("kubelet.key")?).into());
        Ok(kube::Client::try_from(config)?)
    }
}
