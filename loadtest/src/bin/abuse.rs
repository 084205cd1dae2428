//! `sitegrid-abuse`: a release sitegrid-proxy under each abusive client of
//! `sitegrid_loadtest::abuse`, at scale, one after the other, while a
//! well-behaved client lists Services every 20 ms and watches them through
//! a series of changes. Per attack: what the attackers got, the proxy's RSS
//! before it, at its peak and `--settle-seconds` after it, the good client's
//! LIST latency (p50/p99/max) and whether its watch missed a change. Prints a
//! Markdown report.
//!
//! Benchmarks are not tests: nothing here asserts; `tests/abuse.rs` does.
//! Run a release build:
//! `cargo build --profile dist -p sitegrid-proxy -p sitegrid-loadtest && target/dist/sitegrid-abuse`.

use std::{
    path::PathBuf,
    process::Child,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use clap::Parser;
use http_body_util::BodyExt;
use serde_json::Value;
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};
use sitegrid_loadtest::{
    abuse::{self, h2, Ended},
    client, proxy_bin, rss_kib, spawn_proxy, wait_served, HttpClient,
};
use tokio::{io::AsyncWriteExt, net::TcpStream};

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-abuse",
    about = "sitegrid-proxy under abusive clients: peak RSS and a good client's latency"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// The synthetic cluster's size.
    #[command(flatten)]
    size: sample::SyntheticSize,
    /// Idle connections, and open watches, at once.
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Slowloris connections, stalled TLS handshakes and oversized requests.
    #[arg(long, default_value_t = 1_000)]
    slow: usize,
    /// Rapid-reset connections (each up to 5,000 cancelled streams).
    #[arg(long, default_value_t = 20)]
    resets: usize,
    /// How long each attack is held, in seconds.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// How long after each attack the proxy's RSS is read again (the goal:
    /// within 20 % of before the attack, 60 s after it).
    #[arg(long, default_value_t = 60)]
    settle_seconds: u64,
    /// Only these attacks, comma-separated (default: all of them).
    #[arg(long, value_delimiter = ',', value_enum)]
    only: Vec<Attack>,
}

/// The attacks, for `--only`, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Attack {
    Baseline,
    Idle,
    Watches,
    Slowloris,
    Oversized,
    Reset,
    Tls,
}

/// A proxy process, stopped when this is dropped (also when the run ends
/// early with an error).
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one attack did and cost.
struct Row {
    attack: String,
    outcome: String,
    before_rss_kib: u64,
    peak_rss_kib: u64,
    after_rss_kib: u64,
    latency: Latency,
    missed: Option<usize>,
}

/// The good client's LIST latencies during an attack, in ms.
#[derive(Default)]
struct Latency {
    /// Each LIST's latency in ms, with when it was sent.
    samples: Vec<(f64, Instant)>,
    failed: usize,
}

impl Latency {
    fn pct(&self, p: f64) -> f64 {
        if self.samples.is_empty() {
            return f64::NAN;
        }
        let mut s: Vec<f64> = self.samples.iter().map(|&(ms, _)| ms).collect();
        s.sort_by(|a, b| a.total_cmp(b));
        s[((s.len() - 1) as f64 * p).round() as usize]
    }

    /// The `n` slowest samples as "MS ms at +S s" from `start`, slowest first:
    /// whether they fall while the attackers arrive, hold or leave.
    fn slowest(&self, n: usize, start: Instant) -> String {
        let mut s = self.samples.clone();
        s.sort_by(|a, b| b.0.total_cmp(&a.0));
        s.iter()
            .take(n)
            .map(|&(ms, sent)| {
                let at = sent.saturating_duration_since(start).as_secs_f64();
                format!("{ms:.1} ms at +{at:.2} s")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

const SERVICES: &str = "/api/v1/services";

/// How long an attack is held, and how long after it the RSS is read again.
#[derive(Clone, Copy)]
struct Hold {
    secs: Duration,
    settle: Duration,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    sitegrid_runtime::raise_open_files_limit();
    let run = |attack: Attack| args.only.is_empty() || args.only.contains(&attack);
    let bin = proxy_bin(args.proxy_bin.as_deref())?;
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(args.size.objects("v1"));
    let up = api.serve("127.0.0.1:0".parse()?).await?;
    let http = client();
    let pki = Pki::new()?;
    let max = (args.connections + 10).to_string();
    let (plain, addr) = spawn_proxy(&bin, &up.url(), &[format!("--max-watches={max}")])?;
    let plain = Stopped(plain);
    let (tls, tls_addr) = spawn_proxy(
        &bin,
        &up.url(),
        &[
            format!("--cert-file={}", pki.cert.display()),
            format!("--key-file={}", pki.key.display()),
        ],
    )?;
    let tls = Stopped(tls);
    wait_served(&http, addr, SERVICES).await?;
    let mut rows = Vec::new();
    let secs = Duration::from_secs(args.seconds);
    let hold = Hold {
        secs,
        settle: Duration::from_secs(args.settle_seconds),
    };
    let n = args.connections;
    let slow = args.slow;

    if run(Attack::Baseline) {
        rows.push(
            attack(&api, &http, &plain, addr, "none (baseline)", hold, async {
                String::from("-")
            })
            .await,
        );
    }
    if run(Attack::Idle) {
        rows.push(
            attack(
                &api,
                &http,
                &plain,
                addr,
                &format!("{n} idle connections"),
                hold,
                async move {
                    let mut held = Vec::with_capacity(n);
                    for _ in 0..n {
                        match TcpStream::connect(addr).await {
                            Ok(c) => held.push(c),
                            Err(e) => return format!("{} connected, then: {e}", held.len()),
                        }
                    }
                    tokio::time::sleep(secs).await;
                    format!("{} held open", held.len())
                },
            )
            .await,
        );
    }
    if run(Attack::Watches) {
        rows.push(
            attack(&api, &http, &plain, addr, &format!("{n} open watches (--max-watches={max})"), hold, async move {
                let mut held = Vec::with_capacity(n);
                for _ in 0..n {
                    let Ok(mut c) = TcpStream::connect(addr).await else { break };
                    let req = "GET /api/v1/endpoints?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: sitegrid\r\n\r\n";
                    if c.write_all(req.as_bytes()).await.is_err() {
                        break;
                    }
                    held.push(c); // never read: the initial events wait in buffers
                }
                tokio::time::sleep(secs).await;
                format!("{} watches opened, none reading", held.len())
            })
            .await,
        );
    }
    if run(Attack::Slowloris) {
        rows.push(
            attack(
                &api,
                &http,
                &plain,
                addr,
                &format!("{slow} slowloris (1 byte/s)"),
                hold,
                async move {
                    // Held past the proxy's 32 s request head timeout.
                    closed_report(slow, "request head timeout 32 s", |_| {
                        abuse::slow_headers(addr, Duration::from_secs(1), Duration::from_secs(60))
                    })
                    .await
                },
            )
            .await,
        );
    }
    if run(Attack::Oversized) {
        rows.push(
            attack(
                &api,
                &http,
                &plain,
                addr,
                &format!("{slow} oversized heads (300 KB)"),
                hold,
                async move {
                    let big = format!(
                        "GET /api/v1/services HTTP/1.1\r\nHost: s\r\nX-Big: {}\r\n\r\n",
                        "a".repeat(300 * 1024)
                    );
                    let big = Arc::new(big);
                    let tasks: Vec<_> = (0..slow)
                        .map(|_| {
                            let big = big.clone();
                            tokio::spawn(async move {
                                abuse::raw_http1(addr, big.as_bytes(), Duration::from_secs(5)).await
                            })
                        })
                        .collect();
                    let mut codes = std::collections::BTreeMap::new();
                    for t in tasks {
                        let code = match t.await {
                            Ok(Ok((answers, _))) => answers.first().map_or(0, |a| a.code),
                            _ => 0,
                        };
                        *codes.entry(code).or_insert(0) += 1;
                    }
                    format!(
                        "answers by code (0: reset while still sending, the 431 unread): {codes:?}"
                    )
                },
            )
            .await,
        );
    }
    let resets = args.resets;
    if run(Attack::Reset) {
        rows.push(
            attack(&api, &http, &plain, addr, &format!("HTTP/2 rapid reset, {resets} connections"), hold, async move {
                let tasks: Vec<_> = (0..resets)
                    .map(|_| tokio::spawn(h2::rapid_reset(addr, SERVICES, 5_000, Duration::from_secs(10))))
                    .collect();
                let (mut goaway, mut sent) = (0, 0);
                for t in tasks {
                    if let Ok(Ok(r)) = t.await {
                        sent += r.sent;
                        goaway += usize::from(r.goaway == Some(h2::ENHANCE_YOUR_CALM));
                    }
                }
                format!("{goaway} of {resets} ended with GOAWAY ENHANCE_YOUR_CALM after {sent} streams in all")
            })
            .await,
        );
    }
    if run(Attack::Tls) {
        let mut tries = 0;
        while !tls_list(tls_addr).await {
            tries += 1;
            if tries > 600 {
                return Err(format!("TLS proxy on {tls_addr} did not serve within 60 s").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        rows.push(
            attack(
                &api,
                &http,
                &tls,
                tls_addr,
                &format!("{slow} stalled TLS handshakes"),
                hold,
                async move {
                    closed_report(slow, "handshake timeout 10 s", |i| {
                        abuse::stalled_tls(tls_addr, i % 2 == 0, Duration::from_secs(60))
                    })
                    .await
                },
            )
            .await,
        );
    }
    drop((plain, tls));

    println!("# sitegrid-abuse\n");
    println!(
        "{} services, {} endpoints; release sitegrid-proxy; a good client LISTs Services every 20 ms (plain HTTP/1.1 keep-alive; over TLS for the TLS row) and watches them through changes; each attack held {} s, RSS read again {} s after it.\n",
        args.size.services,
        args.size.endpoints(),
        args.seconds,
        args.settle_seconds
    );
    println!("| attack | what the attackers got | RSS before | peak RSS | RSS {} s after | good LIST p50 / p99 / max (ms) | failed | watch missed |", args.settle_seconds);
    println!("|---|---|---:|---:|---:|---|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.1} MB | {:.1} MB | {:.1} MB | {:.2} / {:.2} / {:.2} | {} | {} |",
            r.attack,
            r.outcome,
            r.before_rss_kib as f64 / 1024.0,
            r.peak_rss_kib as f64 / 1024.0,
            r.after_rss_kib as f64 / 1024.0,
            r.latency.pct(0.5),
            r.latency.pct(0.99),
            r.latency.pct(1.0),
            r.latency.failed,
            r.missed.map_or("-".to_owned(), |m| m.to_string())
        );
    }
    Ok(())
}

/// Runs `n` attackers, `attacker(i)` each on a task of its own, and says
/// how many of their connections the proxy closed, and when.
async fn closed_report<F>(n: usize, bound: &str, attacker: impl Fn(usize) -> F) -> String
where
    F: std::future::Future<Output = std::io::Result<Ended>> + Send + 'static,
{
    let tasks: Vec<_> = (0..n).map(|i| tokio::spawn(attacker(i))).collect();
    let (mut after, mut open, mut failed) = (Vec::new(), 0, Vec::new());
    for t in tasks {
        match t.await {
            Ok(Ok(Ended::Closed(d))) => after.push(d.as_secs_f64()),
            Ok(Ok(Ended::StillOpen)) => open += 1,
            Ok(Err(e)) => failed.push(e.kind()),
            Err(_) => failed.push(std::io::ErrorKind::Other),
        }
    }
    let first = after.iter().copied().fold(f64::INFINITY, f64::min);
    let last = after.iter().copied().fold(0.0, f64::max);
    let mut out = format!(
        "{} of {n} closed by the proxy, after {first:.1}–{last:.1} s ({bound}); {open} still open after 60 s",
        after.len()
    );
    if !failed.is_empty() {
        failed.sort_by_key(|k| format!("{k:?}"));
        failed.dedup();
        out += &format!("; the others failed on the attacker's side: {failed:?}");
    }
    out
}

/// Runs `attack` while the good client works and RSS is sampled.
async fn attack(
    api: &ApiServer,
    http: &HttpClient,
    proxy: &Stopped,
    addr: std::net::SocketAddr,
    name: &str,
    hold: Hold,
    attack: impl std::future::Future<Output = String> + Send + 'static,
) -> Row {
    eprintln!("attack: {name}");
    let pid = proxy.0.id();
    let before_rss_kib = rss_kib(pid);
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        })
    };
    let tls = proxy_is_tls(addr, http.clone()).await;
    let started = Instant::now();
    let good = good_client(addr, tls, done.clone());
    // The watch is checked over plain HTTP only (the TLS row measures the handshakes).
    let watch = (!tls).then(|| watch_changes(api, addr, hold.secs));
    let outcome = tokio::spawn(attack)
        .await
        .unwrap_or_else(|e| format!("attack failed: {e}"));
    // The attack's future drops what it held when it returns: the attackers leave here.
    let left = started.elapsed().as_secs_f64();
    let missed = match watch {
        Some(w) => Some(w.await.unwrap_or(usize::MAX)),
        None => None,
    };
    done.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap_or(0);
    let latency = tokio::task::spawn_blocking(move || good.join())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    eprintln!(
        "  slowest good LISTs: {} (the attackers left at +{left:.2} s)",
        latency.slowest(6, started)
    );
    tokio::time::sleep(hold.settle).await;
    Row {
        attack: name.to_owned(),
        outcome,
        before_rss_kib,
        peak_rss_kib: peak,
        after_rss_kib: rss_kib(pid),
        latency,
        missed,
    }
}

/// The good client: a LIST every 20 ms until `done`, on a thread and a
/// runtime of its own, as it would be in a process of its own. In the
/// attackers' runtime its requests and their answers would wait behind the
/// attackers' thousands of tasks, and that wait would be counted against
/// the proxy.
fn good_client(
    addr: std::net::SocketAddr,
    tls: bool,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Latency> {
    std::thread::spawn(move || {
        let mut lat = Latency::default();
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("the good client's runtime: {e}");
                return lat;
            }
        };
        rt.block_on(async {
            let http = client();
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                let ok = if tls {
                    tls_list(addr).await
                } else {
                    plain_list(&http, addr).await
                };
                match ok {
                    true => lat.samples.push((t.elapsed().as_secs_f64() * 1000.0, t)),
                    false => lat.failed += 1,
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        lat
    })
}

/// Whether `addr` speaks TLS (the good client adapts).
async fn proxy_is_tls(addr: std::net::SocketAddr, http: HttpClient) -> bool {
    !plain_list(&http, addr).await
}

async fn plain_list(http: &HttpClient, addr: std::net::SocketAddr) -> bool {
    let Ok(uri) = format!("http://{addr}{SERVICES}").parse() else {
        return false;
    };
    match tokio::time::timeout(Duration::from_secs(10), http.get(uri)).await {
        Ok(Ok(resp)) => resp.status() == 200 && resp.into_body().collect().await.is_ok(),
        _ => false,
    }
}

/// One LIST over a new TLS connection (certificate not verified: the
/// attack, not the PKI, is measured here).
async fn tls_list(addr: std::net::SocketAddr) -> bool {
    use tokio::io::AsyncReadExt;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|b| {
        b.dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert))
            .with_no_client_auth()
    });
    let Ok(config) = config else { return false };
    let go = async {
        let tcp = TcpStream::connect(addr).await.ok()?;
        let mut s = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect("127.0.0.1".try_into().ok()?, tcp)
            .await
            .ok()?;
        s.write_all(
            format!("GET {SERVICES} HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .ok()?;
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        Some(out.starts_with(b"HTTP/1.1 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(10), go).await,
        Ok(Some(true))
    )
}

/// Watches Services through the proxy while 20 changes are made upstream
/// over `secs`; returns how many of them the watch did not see.
fn watch_changes(
    api: &ApiServer,
    addr: std::net::SocketAddr,
    secs: Duration,
) -> tokio::task::JoinHandle<usize> {
    let api = api.clone();
    tokio::spawn(async move {
        let Some(mut svc) = api.list("services").into_iter().next() else {
            return usize::MAX;
        };
        let http = client();
        // The proxy's resourceVersions are its own: resume from its LIST.
        let Some(rv) = list_rv(&http, addr).await else {
            return usize::MAX;
        };
        let Ok(uri) = format!("http://{addr}{SERVICES}?watch=1&resourceVersion={rv}").parse()
        else {
            return usize::MAX;
        };
        let Ok(Ok(resp)) = tokio::time::timeout(Duration::from_secs(10), http.get(uri)).await
        else {
            return usize::MAX;
        };
        let marker = format!("abuse-{}", std::process::id());
        let changes = 20;
        let body = resp.into_body();
        let reader = tokio::spawn(async move {
            let mut body = body;
            let mut buf = Vec::new();
            let mut seen = std::collections::BTreeSet::new();
            while let Some(Ok(frame)) = body.frame().await {
                if let Some(d) = frame.data_ref() {
                    buf.extend_from_slice(d);
                }
                while let Some(at) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=at).collect();
                    if let Ok(ev) = serde_json::from_slice::<Value>(&line) {
                        if let Some(v) =
                            ev["object"]["metadata"]["labels"]["sitegrid-abuse"].as_str()
                        {
                            seen.insert(v.to_owned());
                        }
                    }
                }
                if seen.len() >= changes {
                    break;
                }
            }
            seen.len()
        });
        for i in 0..changes {
            tokio::time::sleep(secs / changes as u32).await;
            svc["metadata"]["labels"]["sitegrid-abuse"] = Value::from(format!("{marker}-{i}"));
            if let Some(m) = svc["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            svc = api.apply(svc);
        }
        let seen = tokio::time::timeout(Duration::from_secs(10), reader)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(0);
        changes - seen.min(changes)
    })
}

/// The resourceVersion of a LIST of Services through the proxy.
async fn list_rv(http: &HttpClient, addr: std::net::SocketAddr) -> Option<String> {
    let resp = http
        .get(format!("http://{addr}{SERVICES}").parse().ok()?)
        .await
        .ok()?;
    let body = resp.into_body().collect().await.ok()?.to_bytes();
    let list: Value = serde_json::from_slice(&body).ok()?;
    list["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned)
}

/// Accepts any server certificate.
#[derive(Debug)]
struct AnyCert;

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A self-signed serving certificate for 127.0.0.1.
struct Pki {
    cert: PathBuf,
    key: PathBuf,
}

impl Pki {
    fn new() -> Result<Pki, Box<dyn std::error::Error>> {
        let dir = std::env::temp_dir().join(format!("sitegrid-abuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::IpAddress([127, 0, 0, 1].into())];
        let cert = params.self_signed(&key)?;
        let pki = Pki {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&pki.cert, cert.pem())?;
        std::fs::write(&pki.key, key.serialize_pem())?;
        Ok(pki)
    }
}
