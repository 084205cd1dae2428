//! The command line, with kubectl's names for kubectl's flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Grids, sites and site-filtered endpoints of a sitegrid cluster.
///
/// kubectl finds this binary on PATH as `kubectl-sitegrid`: run it as
/// `kubectl sitegrid COMMAND`. It reads the cluster with your kubeconfig, as
/// kubectl does, and changes nothing.
#[derive(Debug, Parser)]
#[command(name = "kubectl sitegrid", version)]
pub struct Cli {
    /// What to show.
    #[command(subcommand)]
    pub command: Command,
    /// Which cluster and namespace, and how to print.
    #[command(flatten)]
    pub global: Global,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Grids × sites: ready/desired per cell, not-ready cells marked `*`.
    ///
    /// Rows are DeploymentGrids (dg) and StatefulSetGrids (ssg), from the
    /// per-site status sitegrid-controller writes, and ServiceGrids (sg),
    /// whose cells count the Service's ready/all endpoints in that site.
    Status,
    /// NodeUnits (sites) with their nodes and readiness.
    Sites,
    /// What a node's sitegrid-proxy serves of a Service's endpoints, and why.
    ///
    /// Computed from the API server's Service, Nodes and EndpointSlices with
    /// sitegrid-proxy's own filter code: which topology key matched, and
    /// which endpoints are dropped.
    Endpoints(EndpointsArgs),
}

/// `endpoints SERVICE --node NODE`.
#[derive(Debug, Args)]
pub struct EndpointsArgs {
    /// The Service, in the namespace of -n (or the context's).
    pub service: String,
    /// The node whose proxy's view is shown.
    #[arg(long)]
    pub node: String,
    /// Where sitegrid-proxy's DaemonSet runs, to tell whether the node has one.
    #[arg(long, default_value = "kube-system")]
    pub proxy_namespace: String,
    /// The labels of sitegrid-proxy's pods.
    #[arg(long, default_value = "app=sitegrid-proxy")]
    pub proxy_selector: String,
}

/// kubectl's flags, accepted before or after the subcommand.
#[derive(Debug, Args)]
pub struct Global {
    /// Path to the kubeconfig file (else $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (else its current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace (else the context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Every namespace (status).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format: wide (more columns) or json.
    #[arg(short = 'o', long, global = true, value_enum)]
    pub output: Option<Output>,
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// More columns.
    Wide,
    /// Machine-readable, one JSON document.
    Json,
}
