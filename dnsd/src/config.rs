//! Command-line flags of `sitegrid-dnsd`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::domain::ClusterDomain;

/// sitegrid-dnsd: writes, for this node's site, the names
/// `{statefulsetgrid}-{i}.{service}.{namespace}.svc.{domain}` of StatefulSetGrid
/// pods (and the names of headless ServiceGrids) into a hosts file that
/// CoreDNS's `hosts` plugin serves, so each site reaches its own pods.
#[derive(Debug, Parser)]
#[command(name = "sitegrid-dnsd", version, about, long_about = None)]
pub struct Cli {
    /// kubeconfig naming the API server (or the node's sitegrid-proxy) and dnsd's
    /// credentials (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name; its labels say which site it is in (default: $NODE_NAME, then the host name).
    #[arg(long, env = "NODE_NAME")]
    pub hostname: Option<String>,
    /// The hosts file to write (dnsd owns it: it is replaced whole). Its directory must exist.
    #[arg(long, default_value = "/data/edge/hosts")]
    pub hosts_file: PathBuf,
    /// The cluster's DNS domain, as the kubelet's --cluster-domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: ClusterDomain,
    /// Address of /healthz, /livez, /readyz and /metrics (use 0.0.0.0:PORT for probes from the kubelet).
    #[arg(long, default_value = "127.0.0.1:51008")]
    pub bind_address: SocketAddr,
    /// Logging.
    #[command(flatten)]
    pub log: sitegrid_runtime::LogArgs,
}

impl Cli {
    /// This node's name: the flag, $NODE_NAME, else the host name.
    pub fn node_name(&self) -> String {
        self.hostname
            .clone()
            .unwrap_or_else(sitegrid_runtime::host_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        let cli = Cli::try_parse_from(["sitegrid-dnsd", "--hostname", "bj-1"]).unwrap();
        assert_eq!(cli.hosts_file, PathBuf::from("/data/edge/hosts"));
        assert_eq!(cli.cluster_domain.as_str(), "cluster.local");
        assert_eq!(cli.node_name(), "bj-1");
        let cli =
            Cli::try_parse_from(["sitegrid-dnsd", "--cluster-domain", "Edge.Local."]).unwrap();
        assert_eq!(cli.cluster_domain.as_str(), "edge.local");
    }

    #[test]
    fn bad_values_are_refused() {
        let err = Cli::try_parse_from(["sitegrid-dnsd", "--cluster-domain", "a..b"]).unwrap_err();
        assert!(err.to_string().contains("is not a DNS label"), "{err}");
        assert!(Cli::try_parse_from(["sitegrid-dnsd", "--bind-address", "nowhere"]).is_err());
    }
}
