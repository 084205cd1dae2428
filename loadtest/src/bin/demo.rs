//! `sitegrid-demo`: sitegrid-proxy for one node of the two-site SuperEdge
//! sample cluster, served by the in-memory API server (no cluster needed).
//! The README's first quick-start command.

use std::{net::SocketAddr, process::ExitCode};

use clap::Parser;
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};
use sitegrid_proxy::app::{start, ProxyOptions};

/// Starts an in-memory API server loaded with the two-site sample cluster and
/// a sitegrid-proxy for one of its nodes; prints kubectl commands to try.
#[derive(Debug, Parser)]
#[command(name = "sitegrid-demo", version, about, long_about = None)]
struct Args {
    /// The node the proxy plays (bj-1..3 are in beijing, gz-1..3 in guangzhou).
    #[arg(long, default_value = "bj-1")]
    hostname: String,
    /// Where the proxy listens.
    #[arg(long, default_value = "127.0.0.1:51006")]
    bind_address: SocketAddr,
    /// Where the in-memory API server listens.
    #[arg(long, default_value = "127.0.0.1:51007")]
    upstream_address: SocketAddr,
    /// EndpointSlice version the in-memory API server serves (v1, or v1beta1 like Kubernetes 1.20).
    #[arg(long, default_value = "v1", value_parser = ["v1", "v1beta1"])]
    endpointslice_version: String,
    /// Logging.
    #[command(flatten)]
    log: sitegrid_runtime::LogArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    args.log.init();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", sitegrid_runtime::error_line("sitegrid-demo", &err));
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let version: &'static str = if args.endpointslice_version == "v1beta1" {
        "v1beta1"
    } else {
        "v1"
    };
    let api = ApiServer::new(ApiServerConfig {
        endpointslice_version: version,
        ..ApiServerConfig::default()
    });
    api.load(sample::two_sites(version));
    let upstream = api.serve(args.upstream_address).await?;
    let config = kube::Config::new(upstream.url().parse()?);
    let mut options = ProxyOptions::new(args.hostname.clone(), args.bind_address);
    // kubectl without credentials may read what passes through (other
    // nodes): the upstream is the in-memory sample, on loopback.
    options.anonymous_passthrough = sitegrid_proxy::passthrough::AnonymousPassthrough::All;
    let proxy = start(config, options).await?;
    println!(
        "{}",
        instructions(proxy.local_addr, &upstream.url(), &args.hostname)
    );
    sitegrid_runtime::shutdown_signal().await;
    proxy.shutdown().await;
    upstream.shutdown().await;
    Ok(())
}

/// What the demo prints once it runs.
fn instructions(proxy: SocketAddr, upstream: &str, node: &str) -> String {
    let p = format!("http://{proxy}");
    format!(
        "sitegrid-demo: sitegrid-proxy for node {node} on {p}, in-memory API server on {upstream}\n\
         \n\
         The sample cluster has nodes bj-1..3 (location=beijing) and gz-1..3 (location=guangzhou);\n\
         Service default/servicegrid-demo-svc has topologyKeys '[\"location\"]' and endpoints in both sites.\n\
         \n\
         What {node} sees (only its own site's endpoints):\n\
         \x20 kubectl --server {p} get endpointslices -A -o wide\n\
         \x20 kubectl --server {p} get endpoints -A\n\
         \x20 kubectl --server {p} get svc,nodes -A   (its own Node from the cache, the others passed through)\n\
         What the API server holds (every endpoint):\n\
         \x20 kubectl --server {upstream} get endpointslices -A -o wide\n\
         Watch the filtered view (replays from a resourceVersion, ends after 30 s):\n\
         \x20 kubectl --server {p} get --raw '/api/v1/endpoints?watch=1&resourceVersion=0&timeoutSeconds=30'\n\
         \n\
         Ctrl-C stops.\n"
    )
}
