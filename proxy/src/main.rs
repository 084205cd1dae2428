//! sitegrid-proxy binary: parse flags, start logging, build, serve, drain on SIGTERM.

use std::process::ExitCode;

use clap::Parser;
use sitegrid_proxy::{
    config::{Cli, Command, LogFormat},
    demo,
    run::{start, ProxyOptions},
};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cli.proxy.log_level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.proxy.log_format {
        LogFormat::Json => fmt.json().init(),
        // Colours only on a terminal; log collectors get plain lines.
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line, whatever the causes print (YAML errors come with a code snippet).
            let text = format!("{err:#}");
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            eprintln!("sitegrid-proxy: {}", line.join(" "));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Some(Command::Demo(args)) => {
            let (upstream, proxy) = demo::start_demo(args).await?;
            println!(
                "{}",
                demo::instructions(proxy.local_addr, &upstream.url(), &args.hostname)
            );
            shutdown_signal().await;
            proxy.shutdown().await;
            upstream.shutdown().await;
            Ok(())
        }
        None => {
            let args = &cli.proxy;
            let config = upstream_config(args.kubeconfig.as_deref()).await?;
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
            shutdown_signal().await;
            proxy.shutdown().await;
            Ok(())
        }
    }
}

/// The upstream configuration from `--kubeconfig`, else $KUBECONFIG / ~/.kube/config / in-cluster.
async fn upstream_config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    use anyhow::Context;
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).with_context(|| {
                format!("--kubeconfig {}: cannot read kubeconfig", path.display())
            })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("--kubeconfig {}: invalid kubeconfig", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a cluster")?,
    };
    Ok(config)
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
