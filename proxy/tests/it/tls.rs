//! Serving TLS (`sitegrid_proxy::http::tls`): client-certificate checks, ALPN,
//! certificates rotated on disk, and the one-line errors operators see.
//!
//! Every certificate is made here with rcgen; servers listen on 127.0.0.1:0.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use sitegrid_proxy::http::tls::{ReloadingTls, TlsError, TlsFiles};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

/// Bounds every network exchange so a broken handshake fails the test instead of hanging it.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(10);

/// A directory under the system temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("sitegrid-tls-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write scratch file");
        path
    }

    /// Writes `leaf` as server.crt / server.key (and the CA as ca.crt) and names them.
    fn server_files(&self, ca: &Ca, leaf: &Leaf, client_ca: bool) -> TlsFiles {
        TlsFiles {
            cert: self.write("server.crt", leaf.cert.pem()),
            key: self.write("server.key", leaf.key.serialize_pem()),
            client_ca: client_ca.then(|| self.write("ca.crt", ca.issuer.pem())),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A test certificate authority that signs both server and client certificates.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Ca {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "sitegrid test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        Ca { issuer }
    }

    fn issue(&self, cn: &str, serial: u64, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let params = leaf_params(cn, serial, usage);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        Leaf { cert, key }
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.issuer.der().clone()).expect("CA as root");
        roots
    }
}

fn leaf_params(cn: &str, serial: u64, usage: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.serial_number = Some(SerialNumber::from(serial));
    params.extended_key_usages = vec![usage];
    params
}

/// A certificate with its private key.
struct Leaf {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Leaf {
    /// A client certificate that no CA signed.
    fn self_signed(cn: &str) -> Leaf {
        let key = KeyPair::generate().expect("key");
        let cert = leaf_params(cn, 99, ExtendedKeyUsagePurpose::ClientAuth)
            .self_signed(&key)
            .expect("self-sign");
        Leaf { cert, key }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key.serialize_der()).into()
    }
}

fn server_cert(ca: &Ca, cn: &str, serial: u64) -> Leaf {
    ca.issue(cn, serial, ExtendedKeyUsagePurpose::ServerAuth)
}

/// What a client saw from the server.
#[derive(Debug)]
struct Reply {
    body: Vec<u8>,
    server_cert: CertificateDer<'static>,
    alpn: Option<Vec<u8>>,
}

/// Accepts one connection on 127.0.0.1, completes the handshake with a fresh
/// acceptor and writes "ok"; the task returns the server's view of the handshake.
async fn serve_one(tls: Arc<ReloadingTls>) -> (SocketAddr, JoinHandle<io::Result<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        answer(&tls, tcp).await
    });
    (addr, server)
}

async fn answer<S: AsyncRead + AsyncWrite + Unpin>(tls: &ReloadingTls, io: S) -> io::Result<()> {
    let mut stream = tls.acceptor().accept(io).await?;
    stream.write_all(b"ok").await?;
    stream.shutdown().await
}

fn connector(ca: &Ca, client: Option<&Leaf>, alpn: &[&[u8]]) -> TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(ca.roots());
    let mut config = match client {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.der()], leaf.private_key())
            .expect("client cert"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

/// Handshakes as a client over `io` and reads until the server closes.
async fn call<S: AsyncRead + AsyncWrite + Unpin>(
    connector: TlsConnector,
    io: S,
) -> io::Result<Reply> {
    let name = ServerName::try_from("localhost").expect("server name");
    let mut stream = connector.connect(name, io).await?;
    let (_, session) = stream.get_ref();
    let server_cert = session
        .peer_certificates()
        .expect("server sent a certificate")[0]
        .clone();
    let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await?;
    Ok(Reply {
        body,
        server_cert,
        alpn,
    })
}

/// One TCP connection to a fresh server: the client's reply and the server's outcome.
async fn exchange(
    tls: &Arc<ReloadingTls>,
    connector: TlsConnector,
) -> (io::Result<Reply>, io::Result<()>) {
    tokio::time::timeout(EXCHANGE_LIMIT, async {
        let (addr, server) = serve_one(Arc::clone(tls)).await;
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let reply = call(connector, tcp).await;
        let served = server.await.expect("server task");
        (reply, served)
    })
    .await
    .expect("exchange finished in time")
}

#[tokio::test]
async fn with_ca_file_only_clients_signed_by_the_ca_get_in() {
    let scratch = Scratch::new("client-auth");
    let ca = Ca::new();
    let files = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), true);
    let tls = Arc::new(ReloadingTls::load(files).expect("load"));

    let signed = ca.issue("kube-proxy", 2, ExtendedKeyUsagePurpose::ClientAuth);
    let (reply, served) = exchange(&tls, connector(&ca, Some(&signed), &[])).await;
    assert_eq!(reply.expect("signed client accepted").body, b"ok");
    served.expect("server completed the handshake");

    let unsigned = Leaf::self_signed("intruder");
    let (reply, served) = exchange(&tls, connector(&ca, Some(&unsigned), &[])).await;
    assert!(reply.is_err(), "unsigned client got {reply:?}");
    let refusal = served
        .expect_err("server refused the unsigned client")
        .to_string();
    assert!(refusal.contains("UnknownIssuer"), "{refusal}");

    let (reply, served) = exchange(&tls, connector(&ca, None, &[])).await;
    assert!(reply.is_err(), "client without a certificate got {reply:?}");
    let refusal = served
        .expect_err("server refused the anonymous client")
        .to_string();
    assert!(refusal.contains("no certificates"), "{refusal}");
}

#[tokio::test]
async fn without_ca_file_clients_need_no_certificate() {
    let scratch = Scratch::new("no-client-auth");
    let ca = Ca::new();
    let files = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), false);
    let tls = Arc::new(ReloadingTls::load(files).expect("load"));

    let (reply, served) = exchange(&tls, connector(&ca, None, &[])).await;
    assert_eq!(reply.expect("anonymous client accepted").body, b"ok");
    served.expect("server completed the handshake");
}

#[tokio::test]
async fn alpn_prefers_h2_and_falls_back_to_http1() {
    let scratch = Scratch::new("alpn");
    let ca = Ca::new();
    let files = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), false);
    let tls = Arc::new(ReloadingTls::load(files).expect("load"));

    let (reply, _) = exchange(&tls, connector(&ca, None, &[b"http/1.1", b"h2"])).await;
    assert_eq!(reply.expect("h2 client").alpn.as_deref(), Some(&b"h2"[..]));

    let (reply, _) = exchange(&tls, connector(&ca, None, &[b"http/1.1"])).await;
    assert_eq!(
        reply.expect("http/1.1 client").alpn.as_deref(),
        Some(&b"http/1.1"[..])
    );
}

#[tokio::test]
async fn rotated_files_are_served_after_reload() {
    let scratch = Scratch::new("rotation");
    let ca = Ca::new();
    let old = server_cert(&ca, "proxy", 1);
    let files = scratch.server_files(&ca, &old, true);
    let tls = Arc::new(ReloadingTls::load(files).expect("load"));
    let client = ca.issue("kube-proxy", 2, ExtendedKeyUsagePurpose::ClientAuth);

    let (reply, _) = exchange(&tls, connector(&ca, Some(&client), &[])).await;
    assert_eq!(reply.expect("before rotation").server_cert, old.der());

    let new = server_cert(&ca, "proxy-rotated", 3);
    scratch.server_files(&ca, &new, true);
    assert!(tls.reload_if_changed().expect("reload"), "change noticed");

    let (reply, _) = exchange(&tls, connector(&ca, Some(&client), &[])).await;
    let reply = reply.expect("after rotation");
    assert_eq!(reply.server_cert, new.der());
    assert_eq!(reply.body, b"ok");

    assert!(
        !tls.reload_if_changed().expect("second check"),
        "nothing changed since"
    );
}

#[tokio::test]
async fn bad_files_during_reload_keep_the_old_certificate() {
    let scratch = Scratch::new("bad-reload");
    let ca = Ca::new();
    let old = server_cert(&ca, "proxy", 1);
    let files = scratch.server_files(&ca, &old, false);
    let tls = Arc::new(ReloadingTls::load(files.clone()).expect("load"));

    scratch.write("server.key", "half-written");
    let error = tls.reload_if_changed().expect_err("garbage key refused");
    assert!(error.to_string().starts_with("--key-file "), "{error}");

    let (reply, _) = exchange(&tls, connector(&ca, None, &[])).await;
    let reply = reply.expect("still serving");
    assert_eq!(reply.server_cert, old.der());
    assert_eq!(reply.body, b"ok");

    // The failure is retried, so the rotation completes once the files are whole.
    let new = server_cert(&ca, "proxy-rotated", 2);
    scratch.server_files(&ca, &new, false);
    assert!(tls.reload_if_changed().expect("reload"));
    let (reply, _) = exchange(&tls, connector(&ca, None, &[])).await;
    assert_eq!(reply.expect("after the fix").server_cert, new.der());
}

/// The Display of a failed load.
fn load_error(files: TlsFiles) -> String {
    ReloadingTls::load(files)
        .expect_err("load should fail")
        .to_string()
}

#[test]
fn a_missing_cert_file_is_named() {
    let scratch = Scratch::new("missing");
    let ca = Ca::new();
    let mut files = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), false);
    files.cert = scratch.0.join("absent.crt");
    let message = load_error(files.clone());
    assert_eq!(
        message,
        format!("--cert-file {}: no such file", files.cert.display())
    );
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let scratch = Scratch::new("mismatch");
    let ca = Ca::new();
    let files = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), false);
    scratch.write(
        "server.key",
        server_cert(&ca, "other", 2).key.serialize_pem(),
    );
    let error = ReloadingTls::load(files.clone()).expect_err("mismatch refused");
    assert!(matches!(error, TlsError::KeyMismatch { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "--cert-file {} and --key-file {}: certificate and key do not match",
            files.cert.display(),
            files.key.display()
        )
    );
}

#[test]
fn garbage_pem_names_the_flag_and_file() {
    let scratch = Scratch::new("garbage");
    let ca = Ca::new();
    let good = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), true);

    let broken_base64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
    let files = TlsFiles {
        cert: scratch.write("bad.crt", broken_base64),
        ..good.clone()
    };
    let message = load_error(files.clone());
    let prefix = format!("--cert-file {}: invalid PEM", files.cert.display());
    assert!(message.starts_with(&prefix), "{message}");

    let files = TlsFiles {
        key: scratch.write("bad.key", "not a key at all"),
        ..good.clone()
    };
    assert_eq!(
        load_error(files.clone()),
        format!("--key-file {}: no private key found", files.key.display())
    );

    let unterminated = "-----BEGIN PRIVATE KEY-----\nAAAA\n";
    let files = TlsFiles {
        key: scratch.write("cut.key", unterminated),
        ..good.clone()
    };
    assert_eq!(
        load_error(files.clone()),
        format!(
            "--key-file {}: invalid PEM: no \"-----END PRIVATE KEY-----\" line",
            files.key.display()
        )
    );

    let ca_file = scratch.write("bad-ca.crt", "hello");
    let files = TlsFiles {
        client_ca: Some(ca_file.clone()),
        ..good
    };
    assert_eq!(
        load_error(files),
        format!("--ca-file {}: no certificate found", ca_file.display())
    );
}

#[tokio::test]
async fn sec1_ec_keys_are_accepted() {
    let scratch = Scratch::new("sec1");
    let ca = Ca::new();
    let leaf = server_cert(&ca, "proxy", 1);
    let mut files = scratch.server_files(&ca, &leaf, false);
    let sec1 = sec1_from_pkcs8(&leaf.key.serialize_der());
    files.key = scratch.write("server-ec.key", pem("EC PRIVATE KEY", &sec1));
    let tls = Arc::new(ReloadingTls::load(files).expect("SEC1 key loads"));

    let (reply, _) = exchange(&tls, connector(&ca, None, &[])).await;
    assert_eq!(
        reply.expect("handshake signed with the SEC1 key").body,
        b"ok"
    );
}

#[tokio::test(start_paused = true)]
async fn reloader_follows_the_files_and_stops_with_its_owner() {
    let scratch = Scratch::new("reloader");
    let ca = Ca::new();
    let files = scratch.server_files(&ca, &server_cert(&ca, "proxy", 1), false);
    let tls = Arc::new(ReloadingTls::load(files).expect("load"));
    let reloader = tokio::spawn(tls.reloader(Duration::from_secs(60)));

    let new = server_cert(&ca, "proxy-rotated", 2);
    scratch.server_files(&ca, &new, false);
    tokio::time::sleep(Duration::from_secs(61)).await; // virtual time: one reload tick

    // In memory: paused time and sockets do not mix.
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let (reply, served) = tokio::join!(
        call(connector(&ca, None, &[]), client_io),
        answer(&tls, server_io)
    );
    served.expect("server handshake");
    assert_eq!(reply.expect("client").server_cert, new.der());

    drop(tls);
    tokio::time::timeout(Duration::from_secs(120), reloader)
        .await
        .expect("reloader ended after its owner went away")
        .expect("reloader did not panic");
}

/// The SEC1 `ECPrivateKey` a PKCS#8 `PrivateKeyInfo` wraps (its third field,
/// an OCTET STRING), as `openssl ecparam -genkey` would write it.
fn sec1_from_pkcs8(pkcs8: &[u8]) -> Vec<u8> {
    let (tag, info, _) = der_next(pkcs8);
    assert_eq!(tag, 0x30, "PrivateKeyInfo is a SEQUENCE");
    let (_version, _, rest) = der_next(info);
    let (_algorithm, _, rest) = der_next(rest);
    let (tag, key, _) = der_next(rest);
    assert_eq!(tag, 0x04, "privateKey is an OCTET STRING");
    key.to_vec()
}

/// Splits one DER element off `input`: (tag, contents, rest).
fn der_next(input: &[u8]) -> (u8, &[u8], &[u8]) {
    let (len, header) = match input[1] {
        short @ 0..=0x7f => (usize::from(short), 2),
        0x81 => (usize::from(input[2]), 3),
        0x82 => (usize::from(u16::from_be_bytes([input[2], input[3]])), 4),
        other => panic!("unexpected DER length byte {other:#x}"),
    };
    let (contents, rest) = input[header..].split_at(len);
    (input[0], contents, rest)
}

/// PEM-encodes `der` under `label`.
fn pem(label: &str, der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut base64 = String::new();
    for chunk in der.chunks(3) {
        let bytes = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]);
        for i in 0..4 {
            if i <= chunk.len() {
                base64.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                base64.push('=');
            }
        }
    }
    let lines: Vec<&str> = base64
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).expect("ASCII"))
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}
