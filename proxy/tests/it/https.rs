//! HTTPS with client-certificate verification, end to end: the real kubectl
//! talks to the proxy with the flags an operator would use, for cached and
//! passthrough kinds alike; a client without a CA-signed certificate is refused.

use std::{net::IpAddr, path::PathBuf, time::Duration};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use sitegrid_fakeapi::{kubectl::Kubectl, sample, ApiServer, ApiServerConfig};
use sitegrid_proxy::{
    app::{start, ProxyOptions},
    http::tls::TlsFiles,
};

struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// A CA, a serving certificate for 127.0.0.1, a client certificate signed by
    /// the CA (what kube-proxy would hold) and one that nobody signed.
    fn new(test: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("sitegrid-https-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = CertificateParams::default();
        ca.distinguished_name
            .push(DnType::CommonName, "sitegrid test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
        let leaf = |cn: &str, usage: ExtendedKeyUsagePurpose, sans: Vec<SanType>| {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.extended_key_usages = vec![usage];
            p.subject_alt_names = sans;
            (p, KeyPair::generate().unwrap())
        };
        let (p, k) = leaf(
            "sitegrid-proxy",
            ExtendedKeyUsagePurpose::ServerAuth,
            vec![SanType::IpAddress(IpAddr::from([127, 0, 0, 1]))],
        );
        std::fs::write(dir.join("serving.crt"), p.signed_by(&k, &ca).unwrap().pem()).unwrap();
        std::fs::write(dir.join("serving.key"), k.serialize_pem()).unwrap();
        let (p, k) = leaf(
            "system:kube-proxy",
            ExtendedKeyUsagePurpose::ClientAuth,
            vec![],
        );
        std::fs::write(dir.join("client.crt"), p.signed_by(&k, &ca).unwrap().pem()).unwrap();
        std::fs::write(dir.join("client.key"), k.serialize_pem()).unwrap();
        // Node proxies of two sites, each certificate naming its site's group.
        for (name, group) in [
            ("gz", "sitegrid:site:guangzhou"),
            ("bj", "sitegrid:site:beijing"),
        ] {
            let (mut p, k) = leaf(
                &format!("sitegrid:node-proxy:{name}"),
                ExtendedKeyUsagePurpose::ClientAuth,
                vec![],
            );
            p.distinguished_name.push(DnType::OrganizationName, group);
            let cert = p.signed_by(&k, &ca).unwrap().pem();
            std::fs::write(dir.join(format!("{name}.crt")), cert).unwrap();
            std::fs::write(dir.join(format!("{name}.key")), k.serialize_pem()).unwrap();
        }
        let (p, k) = leaf("intruder", ExtendedKeyUsagePurpose::ClientAuth, vec![]);
        std::fs::write(dir.join("unsigned.crt"), p.self_signed(&k).unwrap().pem()).unwrap();
        std::fs::write(dir.join("unsigned.key"), k.serialize_pem()).unwrap();
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// kubectl for `server` with the CA and `client`'s certificate and key from `pki`.
fn kubectl(pki: &Pki, server: &str, client: &str) -> Kubectl {
    Kubectl::new(server).with_flags([
        "--certificate-authority".to_owned(),
        pki.path("ca.crt"),
        "--client-certificate".to_owned(),
        pki.path(&format!("{client}.crt")),
        "--client-key".to_owned(),
        pki.path(&format!("{client}.key")),
        "--request-timeout".to_owned(),
        "10s".to_owned(),
    ])
}

/// A running proxy serving HTTPS with `pki`'s certificates (clients must
/// hold one the CA signed), with `opts`, in front of the two-site world;
/// returned once it has synced.
struct Served {
    url: String,
    _proxy: sitegrid_proxy::app::RunningProxy,
    _upstream: sitegrid_fakeapi::ServerHandle,
}

async fn serve_https(pki: &Pki, mut opts: ProxyOptions) -> Served {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    opts.tls = Some(TlsFiles {
        cert: pki.dir.join("serving.crt"),
        key: pki.dir.join("serving.key"),
        client_ca: Some(pki.dir.join("ca.crt")),
    });
    let proxy = start(kube::Config::new(upstream.url().parse().unwrap()), opts)
        .await
        .unwrap();
    while !proxy.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Served {
        url: format!("https://{}", proxy.local_addr),
        _proxy: proxy,
        _upstream: upstream,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_over_https_with_client_certificates() {
    let pki = Pki::new("kubectl");
    let served = serve_https(
        &pki,
        ProxyOptions::new("gz-3", "127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let server = served.url.clone();
    let client = kubectl(&pki, &server, "client");
    // Cached kind: guangzhou's endpoints only.
    let out = client
        .ok_async(&[
            "get",
            "endpoints",
            "servicegrid-demo-svc",
            "-o",
            "jsonpath={.subsets[*].addresses[*].ip}",
        ])
        .await;
    let mut ips: Vec<&str> = out.split_whitespace().collect();
    ips.sort();
    assert_eq!(ips, ["10.0.0.139", "10.0.1.8"]);
    // Passthrough kinds and discovery.
    let version = client.ok_async(&["get", "--raw", "/version"]).await;
    assert!(version.contains("gitVersion"), "{version}");
    let ns = client.ok_async(&["get", "namespaces", "-o", "name"]).await;
    assert!(ns.contains("namespace/default"), "{ns}");
    // A certificate nobody signed is refused at the handshake.
    let refused = kubectl(&pki, &server, "unsigned")
        .run_async(&["get", "--raw", "/version"], "")
        .await;
    assert!(
        !refused.success,
        "an unsigned client got in: {}",
        refused.stdout
    );
}

/// A site proxy in the cloud (`--client-group`): the site's node proxies,
/// with certificates in the site's group, read its view; another site's
/// certificate (same CA) reads nothing, cached or passed through; health
/// stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_proxy_serves_only_its_sites_certificates() {
    let pki = Pki::new("site");
    let mut opts = ProxyOptions::new("site-guangzhou", "127.0.0.1:0".parse().unwrap());
    opts.site =
        Some(sitegrid_apimachinery::selector::LabelSelector::parse("location=guangzhou").unwrap());
    opts.client_groups = vec!["sitegrid:site:guangzhou".to_owned()];
    let served = serve_https(&pki, opts).await;
    let server = served.url.clone();
    let jsonpath = "jsonpath={.subsets[*].addresses[*].ip}";
    let args = ["get", "endpoints", "servicegrid-demo-svc", "-o", jsonpath];
    let out = kubectl(&pki, &server, "gz").ok_async(&args).await;
    let mut ips: Vec<&str> = out.split_whitespace().collect();
    ips.sort();
    assert_eq!(ips, ["10.0.0.139", "10.0.1.8"], "guangzhou's view");

    let beijing = kubectl(&pki, &server, "bj");
    // (kubectl's own reads would stop at discovery, without the message.)
    for path in [
        "/api/v1/namespaces/default/endpoints/servicegrid-demo-svc",
        "/api/v1/namespaces",
        "/version",
    ] {
        let args = ["get", "--raw", path];
        let refused = beijing.run_async(&args, "").await;
        assert!(!refused.success, "{args:?}: {}", refused.stdout);
        assert!(
            refused.stderr.contains("sitegrid:site:beijing"),
            "{args:?}: {}",
            refused.stderr
        );
    }
    let health = beijing.ok_async(&["get", "--raw", "/healthz"]).await;
    assert_eq!(health.trim(), "ok");
}
