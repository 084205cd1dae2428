//! sitegrid-proxy binary: parse flags, start logging, build, serve, drain on SIGTERM.

use std::process::ExitCode;

use clap::Parser;
use sitegrid_proxy::{
    app::{start, ProxyOptions},
    config::Cli,
};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.proxy.log.init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", sitegrid_runtime::error_line("sitegrid-proxy", &err));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let args = &cli.proxy;
    let config = sitegrid_runtime::kube_config(args.kubeconfig.as_deref()).await?;
    let mut opts = ProxyOptions::new(args.node_name(), args.bind_address);
    opts.cache = args.cache_config();
    opts.serve = args.serve_settings();
    opts.max_body = args.max_body_bytes;
    opts.grace = std::time::Duration::from_secs(args.shutdown_grace_seconds);
    opts.tls = args.tls_files();
    opts.debug = args.debug;
    opts.metrics_bind_address = args.metrics_bind_address;
    opts.limits = sitegrid_proxy::stack::Limits {
        cached_inflight: args.max_requests_inflight,
        passthrough_inflight: args.max_requests_inflight,
    };
    let proxy = start(config, opts).await?;
    sitegrid_runtime::shutdown_signal().await;
    proxy.shutdown().await;
    Ok(())
}
