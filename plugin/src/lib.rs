//! `kubectl sitegrid`: a kubectl plugin that shows a sitegrid cluster's
//! grids per site, its sites, and what a node's sitegrid-proxy serves.
//!
//! Each command reads the API server with the user's kubeconfig and
//! changes nothing. In the order a command runs:
//!
//! - [`cli`]: kubectl's flags (`--kubeconfig`, `--context`, `-n`, `-A`, `-o`);
//! - [`client`]: the connection and every read, 404s of sitegrid's kinds
//!   told apart as "CRD not installed";
//! - a pure core per command, tested by value: [`status::build`] (grids ×
//!   sites), [`sites::build`] (NodeUnits), [`endpoints::explain`]
//!   (sitegrid-proxy's own filter, `sitegrid_cache::topology`);
//! - [`table`] (kubectl's column layout) or JSON;
//! - [`error`]: one line the user can act on, worded as kubectl words its own.
#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod endpoints;
pub mod error;
pub mod sites;
pub mod status;
pub mod table;

use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use sitegrid_apimachinery::duration::{human_duration_signed, parse_rfc3339};
use sitegrid_cache::topology::NodeLabels;

pub use cli::{Cli, Command, Output};
pub use error::Error;

/// What a command prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Printed {
    /// To standard output.
    pub stdout: String,
    /// To standard error (notes and warnings; the command still succeeded).
    pub stderr: String,
}

impl Printed {
    /// `stdout` only.
    pub fn out(stdout: String) -> Printed {
        Printed {
            stdout,
            stderr: String::new(),
        }
    }

    /// `stderr` only.
    pub fn err(stderr: String) -> Printed {
        Printed {
            stdout: String::new(),
            stderr,
        }
    }
}

/// Runs one command line.
pub async fn run(cli: &Cli) -> Result<Printed, Error> {
    let cluster = client::Cluster::connect(&cli.global).await?;
    let output = cli.global.output;
    match &cli.command {
        Command::Status => status::run(&cluster, output).await,
        Command::Sites => sites::run(&cluster, output).await,
        Command::Endpoints(args) => endpoints::run(&cluster, args, output).await,
    }
}

/// Node name → labels, what the proxy's filter reads.
pub fn node_labels(nodes: Vec<PartialObjectMeta<Node>>) -> NodeLabels {
    nodes
        .into_iter()
        .filter_map(|n| Some((n.metadata.name?, n.metadata.labels.unwrap_or_default())))
        .collect()
}

/// kubectl's AGE column (`5m`, `3d2h`) of an RFC 3339 creation time; empty if unknown.
pub fn age(created: Option<&str>, now: i64) -> String {
    created
        .and_then(parse_rfc3339)
        .map(|t| human_duration_signed(now - t))
        .unwrap_or_default()
}
