//! `sitegrid-bench`: the proxy against a direct connection to the same
//! in-memory upstream. Measures LIST latency (p50/p99), event propagation
//! upstream → client with many watchers (p50/p99), and the proxy process's
//! RSS idle and with the cache loaded. Prints a Markdown report.
//!
//! Benchmarks are not tests: nothing here asserts a time. Run a release build:
//! `cargo build --release -p sitegrid-proxy -p sitegrid-loadtest &&
//!  target/release/sitegrid-bench`.

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};
use serde_json::{json, Value};
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-bench",
    about = "sitegrid-proxy vs direct: LIST latency, propagation latency, RSS"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// Sites in the synthetic cluster.
    #[arg(long, default_value_t = 10)]
    sites: usize,
    /// Nodes per site.
    #[arg(long, default_value_t = 10)]
    nodes_per_site: usize,
    /// Services (each with Endpoints and one EndpointSlice).
    #[arg(long, default_value_t = 1000)]
    services: usize,
    /// Endpoints per Service.
    #[arg(long, default_value_t = 10)]
    endpoints_per_service: usize,
    /// Timed LIST requests per target and path.
    #[arg(long, default_value_t = 200)]
    list_iterations: usize,
    /// Concurrent watchers per target.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Upstream changes whose propagation is timed.
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// Pause between changes.
    #[arg(long, default_value_t = 20)]
    change_interval_ms: u64,
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let proxy_bin = match &args.proxy_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("sitegrid-proxy"),
    };
    if !proxy_bin.exists() {
        return Err(format!(
            "{} not found: build it (cargo build --release -p sitegrid-proxy) or pass --proxy-bin",
            proxy_bin.display()
        )
        .into());
    }
    let total = args.services * args.endpoints_per_service;
    println!("# sitegrid-bench\n");
    println!("{} services, {} endpoints ({} per service), {} sites x {} nodes; proxy for node site-0-node-0\n",
        args.services, total, args.endpoints_per_service, args.sites, args.nodes_per_site);

    // Idle: a cluster with just the local node.
    let idle_rss = {
        let api = ApiServer::new(ApiServerConfig::default());
        api.load(sample::synthetic(1, 1, 0, 0, "v1"));
        let up = api.serve("127.0.0.1:0".parse()?).await?;
        let (mut child, addr) = spawn_proxy(&proxy_bin, &up.url()).await?;
        wait_served(&client(), addr).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = rss_kib(child.id());
        let _ = child.kill();
        let _ = child.wait();
        rss
    };

    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::synthetic(
        args.sites,
        args.nodes_per_site,
        args.services,
        args.endpoints_per_service,
        "v1",
    ));
    let up = api.serve("127.0.0.1:0".parse()?).await?;
    let started = Instant::now();
    let (mut child, proxy) = spawn_proxy(&proxy_bin, &up.url()).await?;
    let http = client();
    wait_served(&http, proxy).await?;
    let sync_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let loaded_rss = rss_kib(child.id());
    let direct = up.local_addr();

    println!(
        "## LIST ({} sequential requests each, keep-alive, full body read)\n",
        args.list_iterations
    );
    println!("| path | target | bytes | p50 | p99 |\n|---|---|---|---|---|");
    for path in [
        "/api/v1/endpoints",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "/api/v1/services",
    ] {
        for (name, addr) in [("direct", direct), ("proxy", proxy)] {
            let (bytes, mut times) = time_lists(&http, addr, path, args.list_iterations).await?;
            println!(
                "| `{path}` | {name} | {bytes} | {} | {} |",
                ms(pct(&mut times, 50.0)),
                ms(pct(&mut times, 99.0))
            );
        }
    }

    println!(
        "\n## Propagation upstream → client ({} watchers, {} changes every {} ms)\n",
        args.watchers, args.changes, args.change_interval_ms
    );
    println!("| target | samples | p50 | p99 | max |\n|---|---|---|---|---|");
    let target = api
        .list("endpoints")
        .into_iter()
        .find(|e| e["metadata"]["name"] == "svc-0")
        .ok_or("no svc-0 endpoints")?;
    let ns = target["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    for (name, addr) in [("direct", direct), ("proxy", proxy)] {
        let mut lat = propagation(&api, &target, &ns, addr, &args).await?;
        println!(
            "| {name} | {} | {} | {} | {} |",
            lat.len(),
            ms(pct(&mut lat, 50.0)),
            ms(pct(&mut lat, 99.0)),
            ms(pct(&mut lat, 100.0))
        );
    }
    let after_rss = rss_kib(child.id());
    let _ = child.kill();
    let _ = child.wait();

    println!("\n## Proxy memory (VmRSS)\n");
    println!("| state | RSS |\n|---|---|");
    println!(
        "| idle (1 node, no services) | {:.1} MiB |",
        idle_rss as f64 / 1024.0
    );
    println!(
        "| cache loaded ({total} endpoints, {} services, synced in {:.0} ms) | {:.1} MiB |",
        args.services,
        sync_time.as_secs_f64() * 1000.0,
        loaded_rss as f64 / 1024.0
    );
    println!(
        "| after the propagation run ({} open watches) | {:.1} MiB |",
        args.watchers,
        after_rss as f64 / 1024.0
    );
    Ok(())
}

fn client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(512)
        .build_http()
}

async fn spawn_proxy(
    bin: &PathBuf,
    upstream: &str,
) -> Result<(Child, SocketAddr), Box<dyn std::error::Error>> {
    let port = free_port()?;
    let dir = std::env::temp_dir().join(format!("sitegrid-bench-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {upstream}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\ncurrent-context: c\n"))?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let child = Command::new(bin)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--hostname=site-0-node-0")
        .arg(format!("--bind-address={addr}"))
        .arg("--log-level=warn")
        .stdout(Stdio::null())
        .spawn()?;
    Ok((child, addr))
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn wait_served(
    http: &HttpClient,
    addr: SocketAddr,
) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..600 {
        if let Ok(resp) = http
            .get(format!("http://{addr}/api/v1/endpoints?limit=1").parse()?)
            .await
        {
            let ok = resp.status() == 200;
            let _ = resp.into_body().collect().await;
            if ok {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("proxy on {addr} did not serve within 60 s").into())
}

async fn time_lists(
    http: &HttpClient,
    addr: SocketAddr,
    path: &str,
    n: usize,
) -> Result<(usize, Vec<Duration>), Box<dyn std::error::Error>> {
    let uri: hyper::Uri = format!("http://{addr}{path}").parse()?;
    let mut bytes = 0;
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 10 {
        let t = Instant::now();
        let resp = http.get(uri.clone()).await?;
        let body = resp.into_body().collect().await?.to_bytes();
        if i >= 10 {
            times.push(t.elapsed());
        }
        bytes = body.len();
    }
    Ok((bytes, times))
}

/// Opens `watchers` watches on the namespace's endpoints, changes the target
/// object `changes` times (stamping a sequence number into an annotation) and
/// returns, for every watcher and change, the time from the upstream write to
/// the frame's arrival.
async fn propagation(
    api: &ApiServer,
    target: &Value,
    ns: &str,
    addr: SocketAddr,
    args: &Args,
) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let http = client();
    let list = http
        .get(format!("http://{addr}/api/v1/namespaces/{ns}/endpoints?limit=1").parse()?)
        .await?;
    let list: Value = serde_json::from_slice(&list.into_body().collect().await?.to_bytes())?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_owned();
    let run_secs = (args.changes as u64 * args.change_interval_ms) / 1000 + 5;
    let uri: hyper::Uri = format!("http://{addr}/api/v1/namespaces/{ns}/endpoints?watch=1&resourceVersion={rv}&timeoutSeconds={run_secs}").parse()?;
    let mut tasks = Vec::new();
    for _ in 0..args.watchers {
        let resp = http.get(uri.clone()).await?;
        tasks.push(tokio::spawn(read_seqs(resp.into_body())));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sent = Vec::with_capacity(args.changes);
    let mut obj = target.clone();
    for i in 0..args.changes {
        obj["metadata"]["annotations"]["bench/seq"] = json!(i.to_string());
        sent.push(Instant::now());
        obj = api.apply(obj);
        tokio::time::sleep(Duration::from_millis(args.change_interval_ms)).await;
    }
    let sent = Arc::new(sent);
    let mut lat = Vec::new();
    for t in tasks {
        for (seq, at) in t.await? {
            if let Some(s) = sent.get(seq) {
                lat.push(at.saturating_duration_since(*s));
            }
        }
    }
    Ok(lat)
}

async fn read_seqs(mut body: hyper::body::Incoming) -> Vec<(usize, Instant)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let now = Instant::now();
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            if let Some(seq) = find_seq(&line) {
                out.push((seq, now));
            }
        }
    }
    out
}

fn find_seq(line: &[u8]) -> Option<usize> {
    let needle = b"\"bench/seq\":\"";
    let at = line.windows(needle.len()).position(|w| w == needle)? + needle.len();
    let end = line[at..].iter().position(|b| *b == b'"')? + at;
    std::str::from_utf8(&line[at..end]).ok()?.parse().ok()
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[idx.min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
