//! `sitegrid-dnsd`: parse flags, start logging, check the hosts file can be
//! written, watch, write, stop on SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use prometheus_client::registry::Registry;
use sitegrid_dnsd::config::Cli;
use sitegrid_dnsd::file::HostsFile;
use sitegrid_dnsd::metrics::Metrics;
use sitegrid_dnsd::ready::Readiness;
use sitegrid_dnsd::run::{self, Report};
use sitegrid_dnsd::watch::Watches;
use sitegrid_runtime::{ops::Operator, serve};

fn main() -> ExitCode {
    // A bad flag exits 2 with clap's message.
    let cli = Cli::parse();
    cli.log.init();
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
        .and_then(|rt| rt.block_on(dnsd(&cli)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", sitegrid_runtime::error_line("sitegrid-dnsd", &err));
            ExitCode::FAILURE
        }
    }
}

async fn dnsd(cli: &Cli) -> anyhow::Result<()> {
    let file = HostsFile::open(&cli.hosts_file).with_context(|| {
        format!(
            "--hosts-file {}: cannot be written",
            cli.hosts_file.display()
        )
    })?;
    let config = sitegrid_runtime::kube_config(cli.kubeconfig.as_deref()).await?;
    let client = kube::Client::try_from(config).context("building the API client")?;
    let listener = serve::bind(cli.bind_address)
        .await
        .with_context(|| format!("--bind-address {}", cli.bind_address))?;

    let mut registry = Registry::with_prefix("sitegrid_dnsd");
    let metrics = Arc::new(Metrics::register(&mut registry));
    let ready = Arc::new(Readiness::new("starting"));
    let check = Arc::clone(&ready);
    let operator = Operator::new(registry, Arc::new(move || check.check().map(|()| None)));
    let shutdown = sitegrid_runtime::cancel_on_signal();
    let ops = operator.spawn(listener, shutdown.clone());
    let node = cli.node_name();
    tracing::info!(
        %node,
        hosts_file = %cli.hosts_file.display(),
        cluster_domain = %cli.cluster_domain,
        address = %cli.bind_address,
        "starting; serving /healthz, /livez, /readyz and /metrics"
    );
    let watches = Watches::start(client, &node, &metrics);
    run::run(
        watches,
        file,
        cli.cluster_domain.clone(),
        Report { metrics, ready },
        shutdown,
    )
    .await;
    if let Err(err) = ops.await {
        tracing::warn!(error = %err, "operator server ended abnormally");
    }
    Ok(())
}
