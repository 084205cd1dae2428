//! `sitegrid-apiserver`: the in-memory Kubernetes API server on a TCP port,
//! loaded with a sample cluster, until Ctrl-C; optionally with kubelets'
//! node heartbeats. What it has sent is on `GET /debug/egress`.
//!
//! A newer cluster: `sitegrid-apiserver --kubernetes-version 1.35` (or
//! `1.31 --feature-gates WatchList=true,MultiCIDRServiceAllocator=true`).
//!
//! The issue-16 scale (5,000 nodes in 100 sites, 10,000 Services):
//! `sitegrid-apiserver --sample synthetic --sites 100 --nodes-per-site 50
//! --services 10000 --node-heartbeat-period 5m`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig, FeatureGates, KubernetesVersion};

/// Which sample cluster to load.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Sample {
    /// The SuperEdge two-site example (bj-1..3, gz-1..3).
    TwoSites,
    /// A large synthetic cluster (see --sites, --services ...).
    Synthetic,
    /// Nothing.
    Empty,
}

/// In-memory Kubernetes API server (kube-apiserver 1.20, 1.31 or 1.35 list/watch behaviour).
#[derive(Debug, Parser)]
#[command(name = "sitegrid-apiserver", version)]
struct Args {
    /// Address to listen on (HTTP/1.1 and h2c, no TLS).
    #[arg(long, default_value = "127.0.0.1:18080")]
    bind_address: SocketAddr,
    /// Sample cluster to load at start.
    #[arg(long, value_enum, default_value = "two-sites")]
    sample: Sample,
    /// The synthetic sample's size.
    #[command(flatten)]
    size: sample::SyntheticSize,
    /// Served discovery.k8s.io version of EndpointSlices (v1beta1: 1.20 only).
    #[arg(long, default_value = "v1", value_parser = ["v1", "v1beta1"])]
    endpointslice_version: String,
    /// The kube-apiserver release to play: 1.20 (this server's long-standing
    /// behaviour), 1.31 or 1.35.
    #[arg(long, default_value = "1.20")]
    kubernetes_version: KubernetesVersion,
    /// Feature gates away from the release's defaults, as kube-apiserver's
    /// flag: WatchList=true,MultiCIDRServiceAllocator=true (1.31 and 1.35).
    #[arg(long, value_parser = FeatureGates::parse, default_value = "")]
    feature_gates: FeatureGates,
    /// Write every Node's status once per this period, spread evenly over
    /// it, as kubelets do (1.20: nodeStatusReportFrequency, 5m). Go-style
    /// duration (5m, 90s; a bare number is seconds), at least 1s. Off by default.
    #[arg(long, value_parser = heartbeat_period)]
    node_heartbeat_period: Option<Duration>,
}

/// A Go-style duration of at least one second.
fn heartbeat_period(s: &str) -> Result<Duration, String> {
    let d = match s.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 5m, 90s)"))?,
    };
    if d < Duration::from_secs(1) {
        return Err("must be at least 1s".into());
    }
    Ok(d)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let version: &'static str = if args.endpointslice_version == "v1beta1" {
        "v1beta1"
    } else {
        "v1"
    };
    let config = ApiServerConfig {
        endpointslice_version: version,
        kubernetes_version: args.kubernetes_version,
        feature_gates: args.feature_gates,
        ..ApiServerConfig::default()
    };
    let loaded = match args.sample {
        Sample::TwoSites => sample::two_sites_for(&config),
        // The synthetic cluster keeps its 1.20 shapes (EndpointSlices in v1
        // unless asked otherwise) on every release.
        Sample::Synthetic => Ok(args.size.objects(version)),
        Sample::Empty => Ok(Vec::new()),
    };
    let (server, objects) = match ApiServer::try_new(config).and_then(|s| Ok((s, loaded?))) {
        Ok(ok) => ok,
        Err(e) => {
            eprintln!("sitegrid-apiserver: {e}");
            return ExitCode::FAILURE;
        }
    };
    let count = objects.len();
    let loading = std::time::Instant::now();
    server.load(objects);
    let loaded_in = loading.elapsed();
    let handle = match server.serve(args.bind_address).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!(
                "sitegrid-apiserver: cannot listen on {}: {e}",
                args.bind_address
            );
            return ExitCode::FAILURE;
        }
    };
    println!("{}", handle.url());
    eprintln!(
        "serving {count} objects (loaded in {loaded_in:.1?}) at resourceVersion {} as Kubernetes {} (EndpointSlices {version}); egress on {}/debug/egress; Ctrl-C to stop",
        server.resource_version(),
        args.kubernetes_version,
        handle.url()
    );
    let _heartbeats = args.node_heartbeat_period.map(|period| {
        let nodes = server.list("nodes").len();
        eprintln!(
            "node heartbeats: {nodes} nodes every {}, {:.1} writes/s",
            humantime::format_duration(period),
            nodes as f64 / period.as_secs_f64()
        );
        server.start_heartbeats(period)
    });
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("sitegrid-apiserver: cannot wait for Ctrl-C: {e}");
        return ExitCode::FAILURE;
    }
    handle.shutdown().await;
    ExitCode::SUCCESS
}
