//! `sitegrid-offline-bench`: the figures of offline restarts (`--data-dir`).
//! A release proxy syncs kube-proxy's kinds (Services, Nodes, EndpointSlices)
//! of a synthetic cluster from the in-memory API server; then, under a fixed
//! rate of EndpointSlice changes, it keeps its snapshot current (bytes
//! written, extrapolated to an hour); then the API server goes away and the
//! proxy is restarted several times: the time from spawning it to its first
//! answered LIST of EndpointSlices, served from the snapshot, and its RSS.
//! Prints a Markdown report.
//!
//! Benchmarks are not tests: nothing here asserts a time. Run a release build:
//! `cargo build --profile dist -p sitegrid-proxy -p sitegrid-loadtest &&
//!  target/dist/sitegrid-offline-bench`.

use std::{
    path::PathBuf,
    process::{Child, Command},
    time::{Duration, Instant},
};

use clap::Parser;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};
use sitegrid_loadtest::{
    client, cpu_ms, metric, proxy_bin, rss_kib, spawn_proxy, wait_served, HttpClient,
};

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-offline-bench",
    about = "sitegrid-proxy's snapshot: size, bytes written under churn, start-up from it with the API server down"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// The synthetic cluster's size.
    #[command(flatten)]
    size: sample::SyntheticSize,
    /// EndpointSlice changes per second during the churn.
    #[arg(long, default_value_t = 20)]
    rate: u64,
    /// How long the churn lasts, in seconds.
    #[arg(long, default_value_t = 240)]
    churn_seconds: u64,
    /// The proxy's --snapshot-interval.
    #[arg(long, default_value = "60s")]
    snapshot_interval: String,
    /// Restarts timed with the API server down.
    #[arg(long, default_value_t = 5)]
    restarts: usize,
}

const SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let proxy_bin = proxy_bin(args.proxy_bin.as_deref())?;
    let data = std::env::temp_dir().join(format!("sitegrid-offline-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let flags = vec![
        format!("--data-dir={}", data.display()),
        format!("--snapshot-interval={}", args.snapshot_interval),
    ];
    let file = data.join("snapshot");
    let total = args.size.endpoints();
    println!("# sitegrid-offline-bench\n");
    println!(
        "{} services, {total} endpoints, {} sites x {} nodes; proxy for node site-0-node-0 reading Services, Nodes and EndpointSlices; --snapshot-interval={}\n",
        args.size.services, args.size.sites, args.size.nodes_per_site, args.snapshot_interval
    );

    let api = ApiServer::new(ApiServerConfig::default());
    api.load(args.size.objects("v1"));
    let up = api.serve("127.0.0.1:0".parse()?).await?;
    let http = client();
    let (mut child, addr) = spawn_proxy(&proxy_bin, &up.url(), &flags)?;
    for path in [
        SLICES,
        "/api/v1/services",
        sitegrid_loadtest::PROXY_NODE_PATH,
    ] {
        wait_served(&http, addr, path).await?;
    }
    let metrics_url = format!("http://{addr}/metrics");
    let writes = |text: &str| metric(text, "sitegrid_proxy_snapshot_writes_total").unwrap_or(0.0);
    until_metric(&http, &metrics_url, |m| writes(m) >= 1.0).await?;
    let first_size = std::fs::metadata(&file)?.len();
    let served_before = list_len(&http, &format!("http://{addr}{SLICES}")).await?;

    // Churn: one EndpointSlice change every 1/rate s, round robin over the
    // slices, each flipping one endpoint's readiness.
    let before = scrape(&http, &metrics_url).await?;
    let cpu_before = cpu_ms(child.id());
    let mut slices = api.list("endpointslices");
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / args.rate.max(1)));
    let changes = args.rate * args.churn_seconds;
    let m = |text: &str, s: &str| metric(text, s).unwrap_or(0.0);
    let bytes = |text: &str| m(text, "sitegrid_proxy_snapshot_written_bytes_total");
    // Each snapshot seen written (polled once a second): when, and the bytes so far.
    let mut seen: Vec<(Instant, f64)> = Vec::new();
    let mut last_writes = writes(&before);
    let started = Instant::now();
    for i in 0..changes as usize {
        tick.tick().await;
        let n = slices.len();
        let slice = &mut slices[i % n];
        let ready = slice["endpoints"][0]["conditions"]["ready"]
            .as_bool()
            .unwrap_or(true);
        slice["endpoints"][0]["conditions"]["ready"] = json!(!ready);
        *slice = api.apply(slice.clone());
        if (i as u64).is_multiple_of(args.rate.max(1)) {
            let now = scrape(&http, &metrics_url).await?;
            if writes(&now) > last_writes {
                last_writes = writes(&now);
                seen.push((Instant::now(), bytes(&now)));
            }
        }
    }
    let churn = started.elapsed();
    let after = scrape(&http, &metrics_url).await?;
    let cpu = cpu_ms(child.id()) - cpu_before;
    let written = bytes(&after) - bytes(&before);
    let snapshots = writes(&after) - writes(&before);
    let churn_size = m(&after, "sitegrid_proxy_snapshot_size_bytes");
    // The steady rate: bytes between the first and the last snapshot seen
    // during the churn, over the time between them (a window that is not a
    // whole number of intervals would skew it).
    let per_hour = match (seen.first(), seen.last()) {
        (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
            (b1 - b0) * 3600.0 / (*t1 - *t0).as_secs_f64()
        }
        _ => written * 3600.0 / churn.as_secs_f64(),
    };
    terminate(&mut child)?;
    let last_size = std::fs::metadata(&file)?.len();

    // The API server goes; the proxy restarts from its snapshot.
    up.shutdown().await;
    let mut starts = Vec::new();
    let mut rss = Vec::new();
    let mut served_after = 0;
    for _ in 0..args.restarts {
        let t0 = Instant::now();
        let (mut child, addr) = spawn_proxy(&proxy_bin, "http://127.0.0.1:1", &flags)?;
        wait_served(&http, addr, SLICES).await?;
        starts.push(t0.elapsed());
        served_after = list_len(&http, &format!("http://{addr}{SLICES}")).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss.push(rss_kib(child.id()));
        terminate(&mut child)?;
    }
    starts.sort();
    let _ = std::fs::remove_dir_all(&data);

    let mib = |b: f64| b / (1024.0 * 1024.0);
    println!("| figure | value |\n|---|---|");
    println!(
        "| snapshot on disk after the first sync | {:.1} KiB |",
        first_size as f64 / 1024.0
    );
    println!(
        "| snapshot after the churn (resume log included) | {:.1} KiB |",
        churn_size.max(last_size as f64) / 1024.0
    );
    println!(
        "| churn | {changes} EndpointSlice changes in {:.0} s ({} /s) |",
        churn.as_secs_f64(),
        args.rate
    );
    println!("| snapshots written during the churn | {snapshots:.0} |");
    println!(
        "| bytes written during the churn | {:.2} MiB |",
        mib(written)
    );
    println!(
        "| bytes written per hour at this rate (first to last snapshot of the churn) | {:.1} MiB |",
        mib(per_hour)
    );
    println!(
        "| proxy CPU during the churn | {:.0} ms ({:.2} % of a core) |",
        cpu,
        cpu / churn.as_secs_f64() / 10.0
    );
    println!("| restart with the API server down → first LIST of EndpointSlices answered (median of {}) | {:.0} ms (min {:.0}, max {:.0}) |",
        starts.len(), ms(starts[starts.len() / 2]), ms(starts[0]), ms(starts[starts.len() - 1]));
    println!(
        "| EndpointSlices served before / after the restart | {served_before} / {served_after} |"
    );
    rss.sort();
    println!(
        "| RSS serving the snapshot (median) | {:.1} MiB |",
        rss[rss.len() / 2] as f64 / 1024.0
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn scrape(http: &HttpClient, url: &str) -> Result<String, Box<dyn std::error::Error>> {
    let resp = http.get(url.parse()?).await?;
    Ok(String::from_utf8_lossy(&resp.into_body().collect().await?.to_bytes()).into_owned())
}

async fn until_metric(
    http: &HttpClient,
    url: &str,
    ok: impl Fn(&str) -> bool,
) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..600 {
        if ok(&scrape(http, url).await?) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("{url}: not within 60 s").into())
}

async fn list_len(http: &HttpClient, url: &str) -> Result<usize, Box<dyn std::error::Error>> {
    let resp = http.get(url.parse()?).await?;
    let list: Value = serde_json::from_slice(&resp.into_body().collect().await?.to_bytes())?;
    Ok(list["items"].as_array().map_or(0, Vec::len))
}

/// SIGTERM (the proxy writes its last snapshot), then waits for the exit.
fn terminate(child: &mut Child) -> std::io::Result<()> {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()?;
    child.wait()?;
    Ok(())
}
