//! sitegrid-certs as an operator uses it: the binary writes a CA, the
//! proxy's serving certificate, kube-proxy's client certificate and its
//! kubeconfig; a sitegrid-proxy started with those files serves the real
//! kubectl that uses the kubeconfig, embedded or as mounted Secret files,
//! and refuses a client certificate from another CA; what it passes through
//! runs as the certificate's user (impersonated).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sitegrid_fakeapi::{kubectl::Kubectl, sample, ApiServer, ApiServerConfig};
use sitegrid_proxy::{
    app::{start, ProxyOptions},
    http::tls::TlsFiles,
};

/// A directory under the system temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("sitegrid-certs-it-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `sitegrid-certs --out DIR ARGS…`; returns (success, stdout, stderr).
fn certs(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sitegrid-certs"))
        .arg("--out")
        .arg(dir)
        .args(args)
        .output()
        .expect("run sitegrid-certs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn certs_ok(dir: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = certs(dir, args);
    assert!(ok, "sitegrid-certs {args:?} failed: {stderr}");
    stdout
}

/// kubectl that reads everything from `kubeconfig` (the server included).
fn kubectl(kubeconfig: &Path) -> Kubectl {
    Kubectl::new("").with_flags([
        "--kubeconfig".to_owned(),
        kubeconfig.display().to_string(),
        "--request-timeout".to_owned(),
        "10s".to_owned(),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_serves_kubectl_with_the_generated_kubeconfig_and_refuses_another_ca() {
    let scratch = Scratch::new("proxy");
    let pki = scratch.0.join("pki");
    certs_ok(&pki, &["init"]);
    certs_ok(&pki, &["server"]);
    let said = certs_ok(
        &pki,
        &["client", "kube-proxy", "--user", "system:kube-proxy"],
    );
    assert!(
        said.contains("kube-proxy.crt") && said.contains("expires"),
        "{said}"
    );

    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut opts = ProxyOptions::new("gz-3", "127.0.0.1:0".parse().unwrap());
    opts.tls = Some(TlsFiles {
        cert: pki.join("server.crt"),
        key: pki.join("server.key"),
        client_ca: Some(pki.join("ca.crt")),
    });
    // The proxy's own credentials (as from its ServiceAccount).
    let mut config = kube::Config::new(upstream.url().parse().unwrap());
    config.auth_info.token = Some("proxy-token".to_owned().into());
    let proxy = start(config, opts).await.unwrap();
    while !proxy.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let server = format!("https://{}", proxy.local_addr);

    // The embedded kubeconfig: guangzhou's endpoints only, as kube-proxy on gz-3 sees them.
    certs_ok(&pki, &["kubeconfig", "kube-proxy", "--server", &server]);
    let embedded = pki.join("kube-proxy.kubeconfig");
    let ips = |k: &Kubectl| {
        let k = k.clone();
        async move {
            let out = k
                .ok_async(&[
                    "get",
                    "endpoints",
                    "servicegrid-demo-svc",
                    "-o",
                    "jsonpath={.subsets[*].addresses[*].ip}",
                ])
                .await;
            let mut ips: Vec<String> = out.split_whitespace().map(str::to_owned).collect();
            ips.sort();
            ips
        }
    };
    assert_eq!(ips(&kubectl(&embedded)).await, ["10.0.0.139", "10.0.1.8"]);

    // The same with the certificates as a mounted kubernetes.io/tls Secret
    // (tls.crt, tls.key, ca.crt) and the kubeconfig naming those files.
    let mounted = scratch.0.join("secret");
    std::fs::create_dir_all(&mounted).unwrap();
    for (from, to) in [
        ("kube-proxy.crt", "tls.crt"),
        ("kube-proxy.key", "tls.key"),
        ("ca.crt", "ca.crt"),
    ] {
        std::fs::copy(pki.join(from), mounted.join(to)).unwrap();
    }
    let (ok, _, stderr) = certs(&pki, &["kubeconfig", "kube-proxy", "--server", &server]);
    assert!(
        !ok && stderr.contains("--force"),
        "replaced without --force: {stderr}"
    );
    certs_ok(
        &pki,
        &[
            "kubeconfig",
            "kube-proxy",
            "--server",
            &server,
            "--force",
            "--cert-dir",
            mounted.to_str().unwrap(),
        ],
    );
    let by_path = pki.join("kube-proxy.kubeconfig");
    assert!(!std::fs::read_to_string(&by_path).unwrap().contains("-data"));
    assert_eq!(ips(&kubectl(&by_path)).await, ["10.0.0.139", "10.0.1.8"]);

    // Passed through (a kind the proxy does not cache), a request runs as
    // the certificate's user and group: the proxy impersonates them.
    certs_ok(&pki, &["client", "alice", "--group", "edge-admins"]);
    certs_ok(&pki, &["kubeconfig", "alice", "--server", &server]);
    let alice = kubectl(&pki.join("alice.kubeconfig"));
    alice
        .ok_async(&["get", "configmaps", "-n", "kube-system"])
        .await;
    let sent: Vec<Vec<(String, String)>> = api
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/namespaces/kube-system/configmaps")
        .map(|mut r| {
            r.credentials.sort();
            r.credentials
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("authorization", "Bearer proxy-token"),
        ("impersonate-group", "edge-admins"),
        ("impersonate-user", "alice"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(sent, [expected]);

    // A client certificate from another CA (trusting our server) is refused.
    let other = scratch.0.join("other");
    certs_ok(&other, &["init", "--name", "someone else's CA"]);
    certs_ok(&other, &["client", "intruder"]);
    for f in ["intruder.crt", "intruder.key"] {
        std::fs::copy(other.join(f), pki.join(f)).unwrap();
    }
    certs_ok(&pki, &["kubeconfig", "intruder", "--server", &server]);
    let refused = kubectl(&pki.join("intruder.kubeconfig"))
        .run_async(&["get", "--raw", "/version"], "")
        .await;
    assert!(
        !refused.success,
        "a client of another CA got in: {}",
        refused.stdout
    );
}

#[test]
fn files_and_modes_are_as_documented() {
    use std::os::unix::fs::PermissionsExt as _;
    let scratch = Scratch::new("modes");
    let pki = scratch.0.join("pki");
    certs_ok(&pki, &["init"]);
    certs_ok(
        &pki,
        &["server", "--dns", "proxy.example", "--ip", "192.0.2.7"],
    );
    certs_ok(&pki, &["client", "kube-proxy"]);
    certs_ok(&pki, &["kubeconfig"]);
    let mut files: Vec<(String, u32)> = std::fs::read_dir(&pki)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            (e.file_name().to_string_lossy().into_owned(), mode)
        })
        .collect();
    files.sort();
    let expected: Vec<(String, u32)> = [
        ("ca.crt", 0o644),
        ("ca.key", 0o600),
        ("kube-proxy.crt", 0o644),
        ("kube-proxy.key", 0o600),
        ("kube-proxy.kubeconfig", 0o600),
        ("server.crt", 0o644),
        ("server.key", 0o600),
    ]
    .into_iter()
    .map(|(f, m)| (f.to_owned(), m))
    .collect();
    assert_eq!(files, expected);
    // The serving certificate names loopback and the extra names.
    let pem = std::fs::read_to_string(pki.join("server.crt")).unwrap();
    let info = sitegrid_certs::parse_cert(&pki.join("server.crt"), &pem).unwrap();
    assert_eq!(info.common_name, "sitegrid-proxy");
    let mut sans = info.sans.clone();
    sans.sort();
    assert_eq!(
        sans,
        [
            "127.0.0.1",
            "192.0.2.7",
            "::1",
            "localhost",
            "proxy.example"
        ]
    );
    // Unknown flags and missing CAs are clear errors, and nothing is written.
    let empty = scratch.0.join("empty");
    let (ok, _, stderr) = certs(&empty, &["server"]);
    assert!(!ok && stderr.contains("sitegrid-certs init"), "{stderr}");
    assert!(!empty.join("server.key").exists());
    let (ok, _, stderr) = certs(&pki, &["init", "--no-such-flag"]);
    assert!(!ok && stderr.contains("--no-such-flag"), "{stderr}");
}
