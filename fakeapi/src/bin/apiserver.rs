//! `sitegrid-apiserver`: the in-memory Kubernetes API server on a TCP port,
//! loaded with a sample cluster, until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};

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

/// In-memory Kubernetes API server (kube-apiserver 1.20 list/watch behaviour).
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
    /// Served discovery.k8s.io version of EndpointSlices.
    #[arg(long, default_value = "v1", value_parser = ["v1", "v1beta1"])]
    endpointslice_version: String,
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
    let server = ApiServer::new(ApiServerConfig {
        endpointslice_version: version,
        ..ApiServerConfig::default()
    });
    let objects = match args.sample {
        Sample::TwoSites => sample::two_sites(version),
        Sample::Synthetic => args.size.objects(version),
        Sample::Empty => Vec::new(),
    };
    let count = objects.len();
    server.load(objects);
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
        "serving {count} objects at resourceVersion {} (EndpointSlices {version}); Ctrl-C to stop",
        server.resource_version()
    );
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("sitegrid-apiserver: cannot wait for Ctrl-C: {e}");
        return ExitCode::FAILURE;
    }
    handle.shutdown().await;
    ExitCode::SUCCESS
}
