//! `sitegrid-controller`: parse flags, start logging, elect, reconcile, stop on SIGTERM.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use prometheus_client::registry::Registry;
use sitegrid_controller::config::{Cli, Command, ControllerArgs};
use sitegrid_controller::health::Health;
use sitegrid_controller::metrics::Metrics;
use sitegrid_controller::run::{self, Election, Options};
use sitegrid_runtime::{ops::Operator, serve};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Crds { out_dir: None }) => print_crds(),
        Some(Command::Crds { out_dir: Some(dir) }) => write_crds(dir),
        None => {
            cli.controller.log.init();
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")
                .and_then(|rt| rt.block_on(controller(&cli.controller)))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!(
                "{}",
                sitegrid_runtime::error_line("sitegrid-controller", &err)
            );
            ExitCode::FAILURE
        }
    }
}

async fn controller(args: &ControllerArgs) -> anyhow::Result<()> {
    args.validate().map_err(anyhow::Error::msg)?;
    let config = sitegrid_runtime::kube_config(args.kubeconfig.as_deref()).await?;
    let client = kube::Client::try_from(config).context("building the API client")?;
    let listener = serve::bind(args.bind_address)
        .await
        .with_context(|| format!("--bind-address {}", args.bind_address))?;
    let mut registry = Registry::with_prefix("sitegrid_controller");
    let health = Health::new(Arc::new(Metrics::register(&mut registry)), "starting");
    let ready = health.clone();
    let operator = Operator::new(registry, Arc::new(move || ready.check().map(|()| None)));
    let shutdown = sitegrid_runtime::cancel_on_signal();
    let ops_task = operator.spawn(listener, shutdown.clone());
    tracing::info!(address = %args.bind_address, "serving /healthz, /livez, /readyz and /metrics");
    let identity = args.identity();
    let options = Options {
        resync: args.resync_period,
        concurrency: args.concurrent_syncs,
        site_manager: args
            .sites
            .then_some(sitegrid_controller::site_manager::SiteManagerOptions {
                default_unit: args.default_node_units,
            }),
        managed: args.parent_secret.0.clone().map(|secret| {
            sitegrid_controller::fed::managed::ManagedOptions {
                secret,
                heartbeat: args.parent_heartbeat,
                concurrency: args.concurrent_syncs,
                identity: identity.clone(),
            }
        }),
        cluster_grace: args.cluster_grace_period,
        election: args.leader_elect.then(|| Election {
            namespace: args.leader_elect_resource_namespace.clone(),
            name: args.leader_elect_resource_name.clone(),
            identity: identity.clone(),
            lease_duration: args.leader_elect_lease_duration,
            renew_margin: args.leader_elect_renew_margin,
        }),
    };
    let outcome = run::run(client, options, health, shutdown).await;
    ops_task.abort();
    outcome?;
    Ok(())
}

fn print_crds() -> anyhow::Result<()> {
    let yaml = sitegrid_api::crd::all_yaml()?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}

fn write_crds(dir: &Path) -> anyhow::Result<()> {
    for file in sitegrid_api::crd::all() {
        let path = dir.join(&file.file_name);
        let yaml = sitegrid_api::crd::to_yaml(&file.crd)?;
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
