//! sitegrid-proxy binary: parse flags, start logging, build, serve, drain on SIGTERM.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use sitegrid_proxy::{app::start, config::Cli};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.proxy.log.init();
    sitegrid_runtime::raise_open_files_limit();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", sitegrid_runtime::error_line("sitegrid-proxy", &err));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = sitegrid_runtime::kube_config(cli.proxy.kubeconfig.as_deref()).await?;
    let mut options = cli.proxy.options();
    if let (Some(kubelet), Some(path)) = (&mut options.kubelet, &cli.proxy.kubelet_kubeconfig) {
        kubelet.upstream = Some(
            sitegrid_runtime::kube_config(Some(path))
                .await
                .context("--kubelet-kubeconfig")?,
        );
    }
    let proxy = start(config, options).await?;
    // Every port listens and the node cache is loaded: a service manager may
    // start the kubelet now (deploy/static/sitegrid-proxy.service).
    sitegrid_runtime::notify_ready();
    // What a burst of clients (or an attack) made the allocator hold goes
    // back to the system once they are gone, instead of staying resident.
    let trimming = tokio::spawn(sitegrid_runtime::memory::give_back_freed_memory());
    sitegrid_runtime::shutdown_signal().await;
    trimming.abort();
    proxy.shutdown().await;
    Ok(())
}
