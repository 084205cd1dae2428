//! Command-line flags of `sitegrid-controller`.
//!
//! Leader-election flags carry kube-controller-manager's names so manifests
//! read alike; durations are Go-style (`15s`, `5m`, `1h30m`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// sitegrid-controller: runs each DeploymentGrid, StatefulSetGrid and
/// ServiceGrid (`superedge.io/v1`) once per site, where a site is a value of
/// the grid's `gridUniqKey` node label.
#[derive(Debug, Parser)]
#[command(name = "sitegrid-controller", version, about, long_about = None)]
pub struct Cli {
    /// What to run (default: the controller).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Controller flags.
    #[command(flatten)]
    pub controller: ControllerArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CustomResourceDefinitions as multi-document YAML (for `kubectl apply -f -`).
    Crds {
        /// Instead of printing, write one `<group>_<plural>.yaml` per CRD into this
        /// directory (how `deploy/crds/` is regenerated).
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// Flags of the controller itself.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// kubeconfig naming the API server and the controller's credentials (default:
    /// $KUBECONFIG, then ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub bind_address: SocketAddr,
    /// Elect one active replica through a coordination.k8s.io Lease; the others wait.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "sitegrid-controller")]
    pub leader_elect_resource_name: String,
    /// How long a leader's lease lasts without renewal; a standby takes over after that.
    #[arg(long, default_value = "15s", value_parser = sitegrid_runtime::parse_positive_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long before the lease expires the leader renews it.
    #[arg(long, default_value = "5s", value_parser = sitegrid_runtime::parse_positive_duration)]
    pub leader_elect_renew_margin: Duration,
    /// This replica's identity in the Lease (default: $POD_NAME, else the host name, plus a random suffix).
    #[arg(long, env = "POD_NAME")]
    pub leader_elect_identity: Option<String>,
    /// How often every grid is reconciled when nothing changed (a resync writes nothing if nothing drifted).
    #[arg(long, default_value = "5m", value_parser = sitegrid_runtime::parse_positive_duration)]
    pub resync_period: Duration,
    /// Grids reconciled at the same time, per kind.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent_syncs: u16,
    /// Manage NodeUnits and NodeGroups (site.superedge.io/v1alpha2): label,
    /// annotate, taint and cordon their nodes and report their status.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub sites: bool,
    /// With --sites, keep the default NodeUnit `unit-node-all` (every node, type other).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub default_node_units: bool,
    /// Managed-cluster mode: the Secret clusternet's agent leaves with the
    /// control cluster's URL, CA, token and this cluster's dedicated namespace
    /// there (`namespace/name`; "" turns the mode off). Watched: the mode
    /// starts when it appears and follows its changes.
    #[arg(long, default_value = crate::fed::parent::DEFAULT_SECRET, value_parser = parse_secret_ref)]
    pub parent_secret: SecretRef,
    /// Managed-cluster mode: how often the heartbeat Lease in the control
    /// cluster is renewed (only while this cluster's API server answers).
    #[arg(long, default_value = "10s", value_parser = sitegrid_runtime::parse_positive_duration)]
    pub parent_heartbeat: Duration,
    /// Control-cluster mode: a managed cluster whose heartbeat has not moved
    /// for this long is shown unreachable in the grids' status.
    #[arg(long, default_value = "40s", value_parser = sitegrid_runtime::parse_positive_duration)]
    pub cluster_grace_period: Duration,
    /// Logging.
    #[command(flatten)]
    pub log: sitegrid_runtime::LogArgs,
}

/// A Secret named `namespace/name`, or none (`""`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef(pub Option<(String, String)>);

fn parse_secret_ref(value: &str) -> Result<SecretRef, String> {
    if value.is_empty() {
        return Ok(SecretRef(None));
    }
    match value.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(SecretRef(Some((ns.to_owned(), name.to_owned()))))
        }
        _ => Err(format!(
            "{value:?} is not namespace/name (or \"\" for none)"
        )),
    }
}

impl ControllerArgs {
    /// The lease identity: the flag / $POD_NAME, else the host name, with a random suffix
    /// so two replicas on one host never share it.
    pub fn identity(&self) -> String {
        self.leader_elect_identity.clone().unwrap_or_else(|| {
            format!(
                "{}_{:08x}",
                sitegrid_runtime::host_name(),
                fastrand::u32(..)
            )
        })
    }

    /// Checks flag combinations clap cannot express.
    pub fn validate(&self) -> Result<(), String> {
        if self.leader_elect && self.leader_elect_renew_margin >= self.leader_elect_lease_duration {
            return Err(format!(
                "--leader-elect-renew-margin ({}) must be shorter than --leader-elect-lease-duration ({})",
                humantime::format_duration(self.leader_elect_renew_margin),
                humantime::format_duration(self.leader_elect_lease_duration)
            ));
        }
        if self.parent_heartbeat >= self.cluster_grace_period {
            return Err(format!(
                "--parent-heartbeat ({}) must be shorter than --cluster-grace-period ({}): every cluster would look unreachable between two beats",
                humantime::format_duration(self.parent_heartbeat),
                humantime::format_duration(self.cluster_grace_period)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_go_durations() {
        let cli = Cli::try_parse_from(["sitegrid-controller"]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.controller.leader_elect);
        assert_eq!(cli.controller.resync_period, Duration::from_secs(300));
        let cli = Cli::try_parse_from([
            "sitegrid-controller",
            "--leader-elect=false",
            "--resync-period=1h30m",
            "--leader-elect-resource-namespace=sitegrid",
        ])
        .unwrap();
        assert!(!cli.controller.leader_elect);
        assert_eq!(cli.controller.resync_period, Duration::from_secs(5400));
        assert_eq!(cli.controller.leader_elect_resource_namespace, "sitegrid");
    }

    #[test]
    fn sites_are_on_by_default_and_turn_off() {
        let cli = Cli::try_parse_from(["sitegrid-controller"]).unwrap();
        assert!(cli.controller.sites && cli.controller.default_node_units);
        let cli = Cli::try_parse_from([
            "sitegrid-controller",
            "--sites=false",
            "--default-node-units=false",
        ])
        .unwrap();
        assert!(!cli.controller.sites && !cli.controller.default_node_units);
        assert!(Cli::try_parse_from(["sitegrid-controller", "--sites=maybe"]).is_err());
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Cli::try_parse_from(["sitegrid-controller", "--resync-period=soon"]).is_err());
        assert!(Cli::try_parse_from(["sitegrid-controller", "--resync-period=0s"]).is_err());
        assert!(Cli::try_parse_from(["sitegrid-controller", "--leader-elect=maybe"]).is_err());
        let cli = Cli::try_parse_from([
            "sitegrid-controller",
            "--leader-elect-lease-duration=5s",
            "--leader-elect-renew-margin=5s",
        ])
        .unwrap();
        assert!(cli.controller.validate().is_err());
    }

    #[test]
    fn multi_cluster_flags() {
        let cli = Cli::try_parse_from(["sitegrid-controller"]).unwrap();
        assert_eq!(
            cli.controller.parent_secret.0,
            Some(("clusternet-system".into(), "parent-cluster".into()))
        );
        assert_eq!(cli.controller.parent_heartbeat, Duration::from_secs(10));
        assert!(cli.controller.validate().is_ok());
        let off = Cli::try_parse_from(["sitegrid-controller", "--parent-secret="]).unwrap();
        assert_eq!(off.controller.parent_secret.0, None);
        for bad in ["parent-cluster", "a/b/c", "/x"] {
            let arg = format!("--parent-secret={bad}");
            assert!(
                Cli::try_parse_from(["sitegrid-controller", arg.as_str()]).is_err(),
                "{bad}"
            );
        }
        let slow = Cli::try_parse_from([
            "sitegrid-controller",
            "--parent-heartbeat=1m",
            "--cluster-grace-period=40s",
        ])
        .unwrap();
        let err = slow.controller.validate().unwrap_err();
        assert!(err.contains("--cluster-grace-period"), "{err}");
    }
}
