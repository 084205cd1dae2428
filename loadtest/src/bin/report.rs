//! `sitegrid-report`: issue 17's benchmark, in one command. Runs the chosen
//! scenarios against a release sitegrid-proxy process and directly against
//! the same in-memory upstream, prints a progress line on stderr, and
//! writes `<out-dir>/<YYYY-MM-DD>.md` with PNG charts next to it.
//!
//! Benchmarks are not tests: nothing here asserts a time. Run a release build:
//! `cargo build --profile dist -p sitegrid-proxy -p sitegrid-loadtest &&
//!  target/dist/sitegrid-report`.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::{anyhow, Context, Result};
use clap::{Parser, ValueEnum};
use parking_lot::Mutex;
use sitegrid_loadtest::{
    proxy_bin,
    report::{
        charts,
        env::{Env, Progress, Scale},
        external, faults,
        machine::Machine,
        markdown,
        model::Report,
        profile, scenarios,
    },
};
use tokio::time::Instant;

/// A scenario to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// N clients list then watch at once against a starting proxy.
    Cold,
    /// Fixed-rate churn to 100 watchers, proxy vs direct.
    Churn,
    /// RSS idle, per 10k endpoints, per idle watcher.
    Memory,
    /// LIST latency at S2 and S3.
    List,
    /// Many changes written at once (a rolling update's worth).
    Burst,
    /// One watcher reading at 1 KB/s among 99: the others' latency, the slow one's 410.
    Slow,
    /// Upstream faults under churn: history compacted (410 → relist), upstream restart.
    Faults,
    /// k6 and wrk, when installed.
    External,
}

/// What the proxies read their upstream in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Upstream {
    /// Protobuf, as kube-apiserver answers the proxy's reflectors (the default).
    Protobuf,
    /// JSON.
    Json,
}

/// What the probe's watchers read their watch events in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WatchFormat {
    /// JSON, one event a line.
    Json,
    /// Protobuf, as kube-proxy asks for (`application/vnd.kubernetes.protobuf`).
    Protobuf,
}

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-report",
    about = "sitegrid-proxy vs direct against issue 17's goals: writes <out-dir>/<date>.md with charts"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// How the proxies read Services, Endpoints and EndpointSlices from the
    /// in-memory API server: in protobuf, as shipped, or in JSON
    /// (`--upstream-protobuf=false`), for comparison.
    #[arg(long, value_enum, default_value_t = Upstream::Protobuf)]
    upstream: Upstream,
    /// What the watchers read their watch events in (their lists are JSON
    /// either way): JSON, or protobuf as kube-proxy reads them.
    #[arg(long, value_enum, default_value_t = WatchFormat::Json)]
    watch_format: WatchFormat,
    /// Scenarios to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Cold, Scenario::Churn, Scenario::Memory, Scenario::List, Scenario::Burst, Scenario::Slow, Scenario::Faults, Scenario::External])]
    scenarios: Vec<Scenario>,
    /// Where the report and its charts go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/results"))]
    out_dir: PathBuf,
    /// The report's file stem (default: today's UTC date, YYYY-MM-DD).
    #[arg(long)]
    name: Option<String>,
    /// A TrueType font for the charts' text (default: DejaVu Sans from /usr/share/fonts).
    #[arg(long)]
    font: Option<PathBuf>,
    /// Nodes per site in every cluster.
    #[arg(long, default_value_t = 10)]
    nodes_per_site: usize,
    /// Cold start: client counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 10, 100, 1000])]
    cold_clients: Vec<usize>,
    /// Cold start: the cluster.
    #[arg(long, value_enum, default_value_t = Scale::S1)]
    cold_scale: Scale,
    /// Steady churn: changes per second, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [20.0, 200.0, 2000.0])]
    churn_rates: Vec<f64>,
    /// Steady churn: watchers per target.
    #[arg(long, default_value_t = 100)]
    churn_watchers: usize,
    /// Steady churn: how long each rate runs per target ("20s", "1m").
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    churn_duration: Duration,
    /// Steady churn: the cluster.
    #[arg(long, value_enum, default_value_t = Scale::S2)]
    churn_scale: Scale,
    /// Memory: the loaded cluster.
    #[arg(long, value_enum, default_value_t = Scale::S2)]
    memory_scale: Scale,
    /// Memory: idle watches opened.
    #[arg(long, default_value_t = 1000)]
    idle_watchers: usize,
    /// LIST: the clusters, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scale::S2, Scale::S3])]
    list_scales: Vec<Scale>,
    /// LIST: timed requests per target and scale.
    #[arg(long, default_value_t = 200)]
    list_iterations: usize,
    /// Slow watcher and faults: the cluster.
    #[arg(long, value_enum, default_value_t = Scale::S1)]
    fault_scale: Scale,
    /// Slow watcher and faults: churn rate, changes per second.
    #[arg(long, default_value_t = 200.0)]
    fault_rate: f64,
    /// Slow watcher and faults: how long each run churns.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
    fault_duration: Duration,
    /// Slow watcher and faults: full-speed watchers.
    #[arg(long, default_value_t = 99)]
    fault_watchers: usize,
    /// Burst: changes written back to back (the watchers and cluster are the faults').
    #[arg(long, default_value_t = 1000)]
    burst_changes: u64,
    /// Burst: pods a rolling update replaces (two EndpointSlice changes each).
    #[arg(long, default_value_t = 1000)]
    rolling_pods: u64,
    /// Burst: how long the rolling update takes.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    rolling_duration: Duration,
    /// Burst: addresses in the huge Endpoints (6,000: about 1 MB of JSON).
    #[arg(long, default_value_t = 6_000)]
    big_endpoints_addresses: usize,
    /// Burst: changes made to the huge Endpoints.
    #[arg(long, default_value_t = 20)]
    big_endpoints_changes: u64,
    /// Burst: changes a second to the huge Endpoints.
    #[arg(long, default_value_t = 2.0)]
    big_endpoints_rate: f64,
    /// Burst: watchers of the huge Endpoints, per target.
    #[arg(long, default_value_t = 20)]
    big_endpoints_watchers: usize,
    /// Slow watcher: bytes a second it reads.
    #[arg(long, default_value_t = 1024)]
    slow_bytes_per_s: u64,
    /// k6 and wrk: the k6 scripts.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/k6"))]
    k6_dir: PathBuf,
    /// k6 and wrk: the cluster.
    #[arg(long, value_enum, default_value_t = Scale::S1)]
    external_scale: Scale,
    /// k6: concurrent watches.
    #[arg(long, default_value_t = 1000)]
    k6_watches: usize,
    /// k6: LISTs a second.
    #[arg(long, default_value_t = 100)]
    k6_list_rate: u32,
    /// k6: passthrough GETs a second.
    #[arg(long, default_value_t = 500)]
    k6_passthrough_rate: u32,
    /// k6 and wrk: how long each runs ("10s").
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    external_duration: Duration,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// Runs every proxy on this CPU alone, and the report (load generator,
    /// in-memory API server, watchers) on the other CPUs: the proxy's CPU
    /// figures are then its own, on one core, not shared with its load.
    #[arg(long)]
    proxy_cpu: Option<usize>,
}

#[tokio::main]
async fn main() {
    if let Err(e) = run(Args::parse()).await {
        eprintln!("\nsitegrid-report: {e:#}");
        std::process::exit(1);
    }
}

/// Whether a source file is sitegrid's (not a crate's from the registry or
/// the standard library's).
fn is_ours(file: &str) -> bool {
    ["/proxy/src/", "/apimachinery/src/", "/runtime/src/"]
        .iter()
        .any(|d| file.contains(d))
        && !file.contains("/.cargo/")
}

/// Writes the proxy's CPU profile next to the report as
/// `<stem>-profile.pb.gz` and summarises it.
fn summarize_profile(
    dir: &std::path::Path,
    stem: &str,
    p: scenarios::Profiled,
) -> Result<profile::ProfileSummary> {
    let file = format!("{stem}-profile.pb.gz");
    std::fs::write(dir.join(&file), &p.raw).with_context(|| format!("writing {file}"))?;
    let (samples, mut top_self, cumulative) = profile::summarize(&p.raw, usize::MAX)?;
    top_self.truncate(15);
    // On the stack, the runtime's frames hold everything; sitegrid's own say where.
    let top_cumulative = cumulative
        .into_iter()
        .filter(|s| is_ours(&s.file))
        .take(15)
        .collect();
    Ok(profile::ProfileSummary {
        rate: p.rate,
        seconds: p.seconds,
        samples,
        top_self,
        top_cumulative,
        file: Some(file),
    })
}

async fn run(args: Args) -> Result<()> {
    let proxy_bin = proxy_bin(args.proxy_bin.as_deref()).map_err(|e| anyhow!(e))?;
    let font = charts::load_font(args.font.as_deref())?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    // 1,000 cold-start clients and 1,000 idle watches need descriptors.
    let _limit = sitegrid_runtime::raise_open_files_limit();
    let started = jiff::Timestamp::now().to_string();
    let stem = args
        .name
        .clone()
        .unwrap_or_else(|| started.get(..10).unwrap_or("report").to_owned());
    let placement = match args.proxy_cpu {
        Some(cpu) => {
            let others = sitegrid_loadtest::affinity::leave_cpu(cpu)?;
            Some(format!(
                "Every proxy ran on CPU {cpu} alone; the load generator, the in-memory API server and the watchers on CPU{} {}.",
                if others.len() > 1 { "s" } else { "" },
                others.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ))
        }
        None => None,
    };
    let env = Env {
        proxy_bin,
        proxy_cpu: args.proxy_cpu,
        // --debug: /debug/pprof/profile for the churn scenario's CPU profile.
        proxy_flags: vec![
            "--max-watches=20000".into(),
            "--debug".into(),
            format!(
                "--upstream-protobuf={}",
                args.upstream == Upstream::Protobuf
            ),
        ],
        nodes_per_site: args.nodes_per_site,
        watch_protobuf: args.watch_format == WatchFormat::Protobuf,
        progress: Progress::new(args.quiet),
        rss: Arc::new(Mutex::new(Vec::new())),
        started: Instant::now(),
    };
    let mut report = Report {
        machine: Machine::read(),
        placement,
        upstream: [
            match args.upstream {
                Upstream::Protobuf => "Every proxy read Services, Endpoints and EndpointSlices from the in-memory API server in protobuf, as it reads kube-apiserver by default (`--upstream=protobuf`).",
                Upstream::Json => "Every proxy read the in-memory API server in JSON (`--upstream=json`: `--upstream-protobuf=false`), not as shipped.",
            },
            match args.watch_format {
                WatchFormat::Json => "The watchers read their watch events in JSON (`--watch-format=json`).",
                WatchFormat::Protobuf => "The watchers read their watch events in protobuf, as kube-proxy does (`--watch-format=protobuf`; their lists in JSON).",
            },
        ]
        .join(" "),
        started,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        churn_cluster: format!(
            "{}; {} watchers per target, {:?} per rate and target.",
            args.churn_scale.describe(args.nodes_per_site),
            args.churn_watchers,
            args.churn_duration
        ),
        cold: Vec::new(),
        churn: Vec::new(),
        one_core: None,
        memory: None,
        lists: Vec::new(),
        bursts: Vec::new(),
        profile: None,
        slow: None,
        faults: Vec::new(),
        external: Vec::new(),
        rss: Vec::new(),
        failures: Vec::new(),
    };
    // A scenario that fails is reported as failed; the others still run.
    let failed = |name: &str, e: anyhow::Error| {
        env.progress.done(&format!("{name} failed: {e:#}"));
        format!("{name}: {e:#}")
    };
    let mut failures = Vec::new();
    for s in &args.scenarios {
        match s {
            Scenario::Cold => {
                match scenarios::cold_start(&env, args.cold_scale, &args.cold_clients).await {
                    Ok(rows) => report.cold = rows,
                    Err(e) => failures.push(failed("cold start", e)),
                }
            }
            Scenario::Churn => match scenarios::churn(
                &env,
                args.churn_scale,
                &args.churn_rates,
                args.churn_watchers,
                args.churn_duration,
            )
            .await
            {
                Ok(out) => {
                    report.churn = out.rows;
                    report.one_core = out.one_core;
                    match out
                        .profile
                        .map(|p| summarize_profile(&args.out_dir, &stem, p))
                    {
                        Some(Ok(summary)) => report.profile = Some(summary),
                        Some(Err(e)) => failures.push(failed("the proxy's CPU profile", e)),
                        None => {}
                    }
                }
                Err(e) => failures.push(failed("steady churn", e)),
            },
            Scenario::Memory => {
                match scenarios::memory(&env, args.memory_scale, args.idle_watchers).await {
                    Ok(m) => report.memory = Some(m),
                    Err(e) => failures.push(failed("memory", e)),
                }
            }
            Scenario::List => {
                match scenarios::lists(&env, &args.list_scales, args.list_iterations).await {
                    Ok(rows) => report.lists = rows,
                    Err(e) => failures.push(failed("LIST", e)),
                }
            }
            Scenario::Burst => match faults::bursts(
                &env,
                args.fault_scale,
                args.fault_watchers,
                &faults::BurstConfig {
                    changes: args.burst_changes,
                    rolling_pods: args.rolling_pods,
                    rolling_duration: args.rolling_duration,
                    big_addresses: args.big_endpoints_addresses,
                    big_changes: args.big_endpoints_changes,
                    big_rate: args.big_endpoints_rate,
                    big_watchers: args.big_endpoints_watchers,
                },
            )
            .await
            {
                Ok(rows) => report.bursts = rows,
                Err(e) => failures.push(failed("bursts", e)),
            },
            Scenario::Slow => match faults::slow_reader(
                &env,
                args.fault_scale,
                args.fault_watchers,
                args.slow_bytes_per_s,
                args.fault_rate,
                args.fault_duration,
            )
            .await
            {
                Ok(s) => report.slow = Some(s),
                Err(e) => failures.push(failed("slow watcher", e)),
            },
            Scenario::Faults => match faults::upstream_faults(
                &env,
                args.fault_scale,
                args.fault_watchers,
                args.fault_rate,
                args.fault_duration,
            )
            .await
            {
                Ok(rows) => report.faults = rows,
                Err(e) => failures.push(failed("upstream faults", e)),
            },
            Scenario::External => {
                let cfg = external::ExternalConfig {
                    k6_dir: args.k6_dir.clone(),
                    scale: args.external_scale,
                    duration: args.external_duration,
                    watches: args.k6_watches,
                    list_rate: args.k6_list_rate,
                    passthrough_rate: args.k6_passthrough_rate,
                };
                match external::run(&env, &cfg).await {
                    Ok(rows) => report.external = rows,
                    Err(e) => failures.push(failed("k6/wrk", e)),
                }
            }
        }
    }
    report.failures = failures;
    report.rss = env.rss.lock().clone();
    let charts = charts::draw_all(&args.out_dir, &stem, &report.churn, &report.rss)?;
    let md = markdown::render(&report, Some(&charts));
    let path = args.out_dir.join(format!("{stem}.md"));
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    env.progress.done(&format!(
        "wrote {} and its charts {}, {} (font {})",
        path.display(),
        charts.0,
        charts.1,
        font.display()
    ));
    Ok(())
}
