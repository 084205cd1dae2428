//! `sitegrid-scale`: issue 16's simulation, in one command. Loads the
//! cluster (default 5,000 nodes in 100 sites, 10,000 Services) into the
//! in-memory API server, runs each topology's sample of real proxy processes
//! and model kube-proxies through one kubelet status period with endpoint
//! churn, and writes `<out-dir>/<YYYY-MM-DD>-scale.md` with a PNG chart of
//! the API server's egress per topology (see `sitegrid_loadtest::scale`).
//!
//! `cargo build --profile dist -p sitegrid-proxy -p sitegrid-loadtest &&
//!  target/dist/sitegrid-scale`

use std::{path::PathBuf, time::Duration};

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use sitegrid_fakeapi::sample::SyntheticSize;
use sitegrid_loadtest::{
    proxy_bin,
    report::{charts, env::Progress},
    scale::{self, output, ScaleConfig, Topology},
};

/// Flags.
#[derive(Debug, Parser)]
#[command(
    name = "sitegrid-scale",
    about = "API server egress at thousands of edge nodes: kube-proxy direct, node proxies, site proxies; writes <out-dir>/<date>-scale.md with a chart"
)]
struct Args {
    /// The sitegrid-proxy binary (default: next to this one).
    #[arg(long)]
    proxy_bin: Option<PathBuf>,
    /// Sites.
    #[arg(long, default_value_t = 100)]
    sites: usize,
    /// Nodes per site (the site topology runs this many node proxies).
    #[arg(long, default_value_t = 50)]
    nodes_per_site: usize,
    /// Services (each with one EndpointSlice).
    #[arg(long, default_value_t = 10_000)]
    services: usize,
    /// Endpoints per Service.
    #[arg(long, default_value_t = 10)]
    endpoints_per_service: usize,
    /// Nodes run in the kube-proxy-direct and node-proxy topologies.
    #[arg(long, default_value_t = 10)]
    direct_clients: usize,
    /// The measured window: every Node writes its status once in it ("60s", "2m").
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
    window: Duration,
    /// The kubelet's status period the window's node bytes are spread over.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    kubelet_period: Duration,
    /// EndpointSlice changes per second during the window.
    #[arg(long, default_value_t = 20.0)]
    churn_rate: f64,
    /// Topologies to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Topology::ALL)]
    topologies: Vec<Topology>,
    /// How long a topology's clients may take to sync.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10m")]
    sync_limit: Duration,
    /// Where the report and its chart go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/results"))]
    out_dir: PathBuf,
    /// The report's file stem (default: `<today's UTC date>-scale`).
    #[arg(long)]
    name: Option<String>,
    /// A TrueType font for the chart's text (default: DejaVu Sans from /usr/share/fonts).
    #[arg(long)]
    font: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("sitegrid-scale: {e:#}");
        std::process::exit(1);
    }
}

async fn run(args: Args) -> Result<()> {
    if args.window.is_zero() || args.kubelet_period.is_zero() {
        return Err(anyhow!("--window and --kubelet-period must be above zero"));
    }
    if !(args.churn_rate.is_finite() && args.churn_rate > 0.0) {
        return Err(anyhow!("--churn-rate must be above 0"));
    }
    let config = ScaleConfig {
        size: SyntheticSize {
            sites: args.sites,
            nodes_per_site: args.nodes_per_site,
            services: args.services,
            endpoints_per_service: args.endpoints_per_service,
        },
        direct_clients: args.direct_clients,
        window: args.window,
        kubelet_period: args.kubelet_period,
        churn_rate: args.churn_rate,
        proxy_bin: proxy_bin(args.proxy_bin.as_deref()).map_err(|e| anyhow!(e))?,
        sync_limit: args.sync_limit,
        topologies: args.topologies,
    };
    charts::load_font(args.font.as_deref())?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let _limit = sitegrid_runtime::raise_open_files_limit();
    let date = jiff::Timestamp::now().to_string();
    let date = date.get(..10).unwrap_or("today").to_owned();
    let stem = args.name.clone().unwrap_or_else(|| format!("{date}-scale"));
    let progress = Progress::new(args.quiet);
    let runs = scale::run(&config, &progress).await?;
    let chart = format!("{stem}-egress.png");
    output::chart(&args.out_dir.join(&chart), &config, &runs)?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let md = output::markdown(&config, &runs, &command, &date, &chart);
    let path = args.out_dir.join(format!("{stem}.md"));
    std::fs::write(&path, &md).with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    for line in output::goals(&config, &runs) {
        println!("- {line}");
    }
    Ok(())
}
