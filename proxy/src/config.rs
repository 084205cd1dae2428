//! Command-line flags. Names follow SuperEdge's application-grid-wrapper
//! (`--kubeconfig`, `--hostname`, `--bind-address`) so manifests carry over.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser};

use crate::{
    cache::CacheConfig,
    serve::{ServeSettings, WatchSettings},
};

/// sitegrid-proxy: serves kube-proxy (and other informers) services,
/// endpoints, endpointslices and nodes from a cache filtered to this node's
/// site, and passes every other request to the API server.
#[derive(Debug, Parser)]
#[command(name = "sitegrid-proxy", version, about, long_about = None)]
pub struct Cli {
    /// Proxy flags.
    #[command(flatten)]
    pub proxy: ProxyArgs,
}

/// Flags of the proxy.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// kubeconfig naming the API server and the proxy's credentials (default:
    /// $KUBECONFIG, then ~/.kube/config, then the in-cluster service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name; its labels decide which endpoints are local (default: $NODE_NAME, then the host name).
    #[arg(long, env = "NODE_NAME")]
    pub hostname: Option<String>,
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:51006")]
    pub bind_address: SocketAddr,
    /// Events kept per resource so watches can resume from a recent resourceVersion.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub event_log_size: u64,
    /// Events a watcher may fall behind before it is ended with 410 Expired (the client relists).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub watcher_buffer: u64,
    /// Seconds between BOOKMARK events on watches that allow them.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub bookmark_interval: u64,
    /// Largest request body passed through, in bytes (larger: 413).
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Serving certificate (PEM); with --key-file the proxy serves HTTPS (HTTP/2 through ALPN). Re-read when it changes.
    #[arg(long, requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// Serving private key (PEM: PKCS#8, PKCS#1 or SEC1). Re-read when it changes.
    #[arg(long, requires = "cert_file")]
    pub key_file: Option<PathBuf>,
    /// CA (PEM) that client certificates must be signed by; clients without such a certificate are refused.
    #[arg(long, requires = "cert_file")]
    pub ca_file: Option<PathBuf>,
    /// Also serve /debug/cache and /debug/pprof/{profile,heap}.
    #[arg(long)]
    pub debug: bool,
    /// Serve /healthz, /readyz, /metrics (and /debug/*) on this address instead of the serving port.
    #[arg(long)]
    pub metrics_bind_address: Option<SocketAddr>,
    /// Concurrent cached lists/gets, and concurrent non-watch passthrough requests; more are refused with 429.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Seconds open requests get to finish after SIGTERM (watches end at once).
    #[arg(long, default_value_t = 10)]
    pub shutdown_grace_seconds: u64,
    /// Logging.
    #[command(flatten)]
    pub log: sitegrid_runtime::LogArgs,
}

impl ProxyArgs {
    /// The local node name: the flag, $NODE_NAME, else the host name.
    pub fn node_name(&self) -> String {
        self.hostname.clone().unwrap_or_else(host_name)
    }

    /// Cache sizes from the flags.
    pub fn cache_config(&self) -> CacheConfig {
        CacheConfig {
            log_capacity: self.event_log_size as usize,
            watcher_buffer: self.watcher_buffer as usize,
        }
    }

    /// The serving TLS files, when --cert-file and --key-file are given.
    pub fn tls_files(&self) -> Option<crate::tls::TlsFiles> {
        Some(crate::tls::TlsFiles {
            cert: self.cert_file.clone()?,
            key: self.key_file.clone()?,
            client_ca: self.ca_file.clone(),
        })
    }

    /// Handler settings from the flags.
    pub fn serve_settings(&self) -> ServeSettings {
        ServeSettings {
            watch: WatchSettings {
                bookmark_interval: Duration::from_secs(self.bookmark_interval),
            },
            ..ServeSettings::default()
        }
    }
}

/// The kernel's host name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superedge_style_flags_parse() {
        let cli = Cli::try_parse_from([
            "sitegrid-proxy",
            "--kubeconfig=/etc/kubernetes/proxy.kubeconfig",
            "--hostname=bj-1",
            "--bind-address=127.0.0.1:51006",
        ])
        .unwrap();
        assert_eq!(cli.proxy.node_name(), "bj-1");
        assert_eq!(
            cli.proxy.kubeconfig.unwrap().to_str(),
            Some("/etc/kubernetes/proxy.kubeconfig")
        );
    }

    #[test]
    fn unknown_flag_is_an_error() {
        let err = Cli::try_parse_from(["sitegrid-proxy", "--no-such-flag"]).unwrap_err();
        assert!(err.to_string().contains("--no-such-flag"));
    }
}
