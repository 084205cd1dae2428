//! Abusive clients against a running sitegrid-proxy (in this process, over
//! loopback sockets, upstream the in-memory API server): each gets a clear
//! answer or a closed connection within a bound, and a well-behaved client
//! next to it is still served. Timeouts are shortened to a second so the
//! tests are quick; what they assert is the outcome, not the time.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::Value;
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig, ServerHandle};
use sitegrid_loadtest::abuse::{self, h2, Ended};
use sitegrid_proxy::{
    app::{start, ProxyOptions, RunningProxy},
    http::tls::TlsFiles,
    passthrough::AnonymousPassthrough,
};
use sitegrid_runtime::serve::ConnLimits;

/// Long enough for any answer on a loaded 2-core machine; an attack the
/// proxy does not end within it counts as not ended.
const GIVE_UP: Duration = Duration::from_secs(20);

struct Env {
    api: ApiServer,
    _upstream: ServerHandle,
    proxy: RunningProxy,
}

impl Env {
    async fn new(tls: Option<TlsFiles>) -> Env {
        let api = ApiServer::new(ApiServerConfig::default());
        api.load(sample::two_sites("v1"));
        let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let config = kube::Config::new(upstream.url().parse().unwrap());
        let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
        opts.anonymous_passthrough = AnonymousPassthrough::All;
        opts.grace = Duration::from_secs(1);
        opts.tls = tls;
        opts.conn = ConnLimits {
            header_read_timeout: Duration::from_secs(1),
            tls_handshake_timeout: Duration::from_secs(1),
            ..ConnLimits::default()
        };
        let proxy = start(config, opts).await.unwrap();
        while !proxy.cache.readiness().is_ready() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Env {
            api,
            _upstream: upstream,
            proxy,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.proxy.local_addr)
    }

    /// A well-behaved client's GET: code and JSON body.
    async fn get(&self, path: &str) -> (u16, Value) {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let resp = client.get(self.url(path).parse().unwrap()).await.unwrap();
        let code = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// The good client: lists services and gets the same names as before.
    async fn still_served(&self) {
        let (code, list) = self.get("/api/v1/services").await;
        assert_eq!(code, 200, "{list}");
        assert!(!list["items"].as_array().unwrap().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_idle_connections_are_closed_while_others_are_served() {
    let env = Env::new(None).await;
    let addr = env.proxy.local_addr;
    let slow: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(abuse::slow_headers(
                addr,
                Duration::from_millis(100),
                GIVE_UP,
            ))
        })
        .collect();
    for _ in 0..5 {
        env.still_served().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for s in slow {
        let ended = s.await.unwrap().unwrap();
        assert!(
            matches!(ended, Ended::Closed(_)),
            "a slowloris connection stayed open: {ended:?}"
        );
    }
    // A keep-alive connection that went quiet after its request is closed too.
    let (answers, _) = abuse::raw_http1(
        addr,
        b"GET /api/v1/nodes/bj-1 HTTP/1.1\r\nHost: sitegrid\r\n\r\n",
        Duration::from_millis(500),
    )
    .await
    .unwrap();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].code, 200);
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert!(matches!(
        abuse::until_closed(&mut idle, GIVE_UP).await,
        Ended::Closed(_)
    ));
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_silent_connections_is_queued_and_each_closed() {
    sitegrid_runtime::raise_open_files_limit();
    let env = Env::new(None).await;
    let addr = env.proxy.local_addr;
    // More at once than a 1,024-long accept queue holds (what the listener
    // had before it asked for net.core.somaxconn): the kernel dropped the
    // rest before the proxy saw them, and the clients hung, never closed.
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    let burst = 1_500.min(somaxconn.saturating_sub(100));
    let silent: Vec<_> = (0..burst)
        .map(|_| {
            tokio::spawn(async move {
                let mut conn = tokio::net::TcpStream::connect(addr).await?;
                Ok::<_, std::io::Error>(abuse::until_closed(&mut conn, GIVE_UP).await)
            })
        })
        .collect();
    let mut open = 0;
    for s in silent {
        if !matches!(s.await.unwrap().unwrap(), Ended::Closed(_)) {
            open += 1;
        }
    }
    assert_eq!(open, 0, "{open} of {burst} silent connections never closed");
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_heads_get_431_and_large_selectors_are_answered_exactly() {
    let env = Env::new(None).await;
    let addr = env.proxy.local_addr;
    let big = "a".repeat(300 * 1024);
    let header = format!("GET /api/v1/services HTTP/1.1\r\nHost: sitegrid\r\nX-Big: {big}\r\n\r\n");
    let (answers, ended) = abuse::raw_http1(addr, header.as_bytes(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(answers.iter().map(|a| a.code).collect::<Vec<_>>(), [431]);
    assert!(matches!(ended, Ended::Closed(_)));
    let url =
        format!("GET /api/v1/services?labelSelector={big} HTTP/1.1\r\nHost: sitegrid\r\n\r\n");
    let (answers, _) = abuse::raw_http1(addr, url.as_bytes(), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(answers.iter().map(|a| a.code).collect::<Vec<_>>(), [431]);

    // 4,000 requirements (about 60 KB) fit: each `kN!=v` holds for every
    // service (none has those labels), so the answer is the whole list.
    let selector: Vec<String> = (0..4000).map(|i| format!("k{i}!=v")).collect();
    let (code, filtered) = env
        .get(&format!(
            "/api/v1/services?labelSelector={}",
            selector.join(",")
        ))
        .await;
    assert_eq!(code, 200, "{filtered}");
    let (_, all) = env.get("/api/v1/services").await;
    assert_eq!(filtered["items"], all["items"]);
    // Nesting is not part of the syntax: a clear 400, as kube-apiserver says it.
    let (code, status) = env
        .get("/api/v1/services?labelSelector=a%20in%20(b,(c))")
        .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_percent_encoding_get_400_status() {
    let env = Env::new(None).await;
    // What kube-apiserver answers each (its Go strings hold any bytes; a
    // resourceVersion it cannot parse is its 500, see the reference).
    for (query, code) in [
        ("labelSelector=%ff%fe", 400),
        ("labelSelector=app%3D%c3%28", 400),
        ("resourceVersion=%c3%28", 500),
        ("limit=%zz", 400),
        ("continue=%ff%ff", 400),
        ("timeoutSeconds=%80", 400),
    ] {
        let (got, status) = env.get(&format!("/api/v1/endpoints?{query}")).await;
        assert_eq!(got, code, "{query}: {status}");
        assert_eq!(status["kind"], "Status", "{query}");
        assert_eq!(status["code"], code, "{query}");
        assert!(!status["message"].as_str().unwrap().is_empty());
    }
    // A field selector value that is not UTF-8 names no object: an empty list.
    let (code, list) = env
        .get("/api/v1/endpoints?fieldSelector=metadata.name%3D%ff")
        .await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["items"], serde_json::json!([]));
    // Raw bytes above 0x7f in the request line: refused by the HTTP parser.
    let (answers, _) = abuse::raw_http1(
        env.proxy.local_addr,
        b"GET /api/v1/services?labelSelector=\xff\xfe HTTP/1.1\r\nHost: sitegrid\r\n\r\n",
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    assert_eq!(answers.iter().map(|a| a.code).collect::<Vec<_>>(), [400]);
    env.still_served().await;
}

/// A ConfigMap as JSON, for the passthrough cases.
fn config_map(name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"k": "v"},
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_lengths_cannot_smuggle_a_request() {
    let env = Env::new(None).await;
    let addr = env.proxy.local_addr;
    // Content-Length claims 4 bytes; Transfer-Encoding: chunked carries the
    // whole object, and a DELETE follows. Read by the length, the rest would
    // be taken for requests; read as RFC 9112 says (chunked wins, the length
    // is dropped) it is one body.
    let body = config_map("framed-by-chunks");
    let smuggled =
        "DELETE /api/v1/namespaces/default/configmaps/victim HTTP/1.1\r\nHost: sitegrid\r\n\r\n";
    env.api
        .apply(serde_json::from_str(&config_map("victim")).unwrap());
    let chunk = &body;
    let request = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: sitegrid\r\nContent-Type: application/json\r\n\
         Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n{smuggled}",
        chunk.len()
    );
    let (answers, _) = abuse::raw_http1(addr, request.as_bytes(), Duration::from_secs(3))
        .await
        .unwrap();
    // RFC 9112 §6.3: the server answers and then closes the connection,
    // so the bytes after the body are never taken for a request.
    let codes: Vec<u16> = answers.iter().map(|a| a.code).collect();
    assert_eq!(codes, [201], "{answers:?}");
    assert_eq!(answers[0].header("connection"), Some("close"));
    let created = env
        .api
        .get("configmaps", Some("default"), "framed-by-chunks")
        .unwrap();
    assert_eq!(created["data"]["k"], "v");
    assert!(env
        .api
        .get("configmaps", Some("default"), "victim")
        .is_some());

    // The classic smuggle: the body by its length ends early and a DELETE
    // hides behind it. Two different lengths: refused, connection closed,
    // nothing reaches the API server.
    let request = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: sitegrid\r\nContent-Type: application/json\r\n\
         Content-Length: 5\r\nContent-Length: {}\r\n\r\n{body}{smuggled}",
        body.len()
    );
    let (answers, ended) = abuse::raw_http1(addr, request.as_bytes(), Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(answers.iter().map(|a| a.code).collect::<Vec<_>>(), [400]);
    assert!(matches!(ended, Ended::Closed(_)));
    // A Transfer-Encoding that does not end in chunked: refused too.
    let request = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: sitegrid\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked, identity\r\n\r\n{body}{smuggled}"
    );
    let (answers, _) = abuse::raw_http1(addr, request.as_bytes(), Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(answers.iter().map(|a| a.code).collect::<Vec<_>>(), [400]);
    assert!(
        env.api
            .get("configmaps", Some("default"), "victim")
            .is_some(),
        "the smuggled DELETE ran"
    );
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_request_body_gets_408_and_creates_nothing() {
    let env = Env::new(None).await;
    let body = config_map("half-sent");
    let request = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: sitegrid\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{}",
        body.len(),
        &body[..20]
    );
    let (answers, _) = abuse::raw_http1(env.proxy.local_addr, request.as_bytes(), GIVE_UP)
        .await
        .unwrap();
    assert_eq!(
        answers.iter().map(|a| a.code).collect::<Vec<_>>(),
        [408],
        "{answers:?}"
    );
    let status: Value = serde_json::from_slice(&answers[0].body).unwrap();
    assert_eq!(status["reason"], "Timeout");
    assert!(env
        .api
        .get("configmaps", Some("default"), "half-sent")
        .is_none());
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_rapid_reset_ends_the_connection_and_others_are_served() {
    let env = Env::new(None).await;
    let seen = h2::rapid_reset(env.proxy.local_addr, "/api/v1/services", 5_000, GIVE_UP)
        .await
        .unwrap();
    assert!(
        seen.settings.contains(&(h2::MAX_CONCURRENT_STREAMS, 250)),
        "{:?}",
        seen.settings
    );
    assert!(
        seen.settings
            .contains(&(h2::MAX_HEADER_LIST_SIZE, 256 * 1024)),
        "{:?}",
        seen.settings
    );
    assert_eq!(
        seen.goaway,
        Some(h2::ENHANCE_YOUR_CALM),
        "sent {} streams",
        seen.sent
    );
    // A well-behaved HTTP/2 client on its own connection.
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Empty<Bytes>>();
    let resp = client
        .get(env.url("/api/v1/services").parse().unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_flood_is_held_to_250_streams() {
    let env = Env::new(None).await;
    // 300 watches at once on one connection, ignoring the announced limit.
    let seen = h2::flood(
        env.proxy.local_addr,
        "/api/v1/services?watch=1",
        300,
        Duration::from_secs(3),
    )
    .await
    .unwrap();
    assert_eq!(seen.answered, 250, "{seen:?}");
    let refused: Vec<u32> = seen
        .reset
        .iter()
        .filter(|(_, code)| *code == h2::REFUSED_STREAM)
        .map(|(stream, _)| *stream)
        .collect();
    assert_eq!(refused.len(), 50, "{seen:?}");
    assert!(refused.iter().all(|&s| s > 2 * 250), "{refused:?}");
    env.still_served().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshakes_that_never_finish_are_dropped() {
    let pki = Pki::new();
    let env = Env::new(Some(pki.files())).await;
    let addr = env.proxy.local_addr;
    let silent = tokio::spawn(abuse::stalled_tls(addr, false, GIVE_UP));
    let partial = tokio::spawn(abuse::stalled_tls(addr, true, GIVE_UP));
    // A real TLS client meanwhile.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tls.write_all(b"GET /api/v1/services HTTP/1.1\r\nHost: sitegrid\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    for stalled in [silent, partial] {
        let ended = stalled.await.unwrap().unwrap();
        assert!(
            matches!(ended, Ended::Closed(_)),
            "a stalled handshake stayed open: {ended:?}"
        );
    }
}

/// A CA and a serving certificate for 127.0.0.1, in a directory of their own.
struct Pki {
    dir: std::path::PathBuf,
    ca_der: rustls::pki_types::CertificateDer<'static>,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, SanType};
        let dir = std::env::temp_dir().join(format!("sitegrid-abuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = CertificateParams::default();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let mut leaf = CertificateParams::default();
        leaf.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
        let key = KeyPair::generate().unwrap();
        let cert = leaf.signed_by(&key, &ca).unwrap();
        std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
        Pki {
            ca_der: ca.der().clone(),
            dir,
        }
    }

    fn files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.dir.join("tls.crt"),
            key: self.dir.join("tls.key"),
            client_ca: None,
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
