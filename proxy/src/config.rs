//! Command-line flags. Names follow SuperEdge's application-grid-wrapper
//! (`--kubeconfig`, `--hostname`, `--bind-address`) so manifests carry over;
//! durations are Go-style (`60s`, `5m`) like the controller's.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser};

use sitegrid_apimachinery::selector::LabelSelector;
use sitegrid_runtime::{parse_duration, parse_positive_duration, serve::ConnLimits};

use crate::{
    app::{KubeletOptions, ProxyOptions},
    gateway::Limits,
    handlers::{HandlerSettings, WatchSettings},
    http::tls::TlsFiles,
    passthrough::AnonymousPassthrough,
};
use sitegrid_cache::CacheConfig;

/// sitegrid-proxy: serves kube-proxy (and other informers) services,
/// endpoints, endpointslices and this node's Node from a cache filtered to
/// this node's site (or, with --site-selector, a whole site's), and passes
/// every other request to the API server.
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
    /// Serve a whole site instead of one node: the union of the views of
    /// every node this label selector matches (`location=beijing`). Such a
    /// site proxy is the upstream of the node proxies of its site, so the
    /// API server streams each change once per site (see proxy/README.md).
    #[arg(long, value_parser = parse_site_selector)]
    pub site_selector: Option<LabelSelector>,
    /// Address to serve on.
    #[arg(long, default_value = "127.0.0.1:51006")]
    pub bind_address: SocketAddr,
    /// Events kept per resource so watches can resume from a recent resourceVersion.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub event_log_size: u64,
    /// About how many bytes of memory those events may hold, per resource
    /// (the oldest go first; a watch resuming from before them gets 410 and relists).
    #[arg(long, default_value_t = 2 << 20, value_parser = clap::value_parser!(u64).range(4096..))]
    pub event_log_bytes: u64,
    /// List and watch Endpoints and EndpointSlices upstream only from the
    /// first request for them (kube-proxy reads one of the two); `false`:
    /// both from the start, and /readyz waits for both.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub on_demand: bool,
    /// Keep cached encodings LZ4-compressed against a dictionary per kind
    /// (`false`: kept as they are, which costs more memory and saves a
    /// little CPU per read; see docs/decisions).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub cache_compression: bool,
    /// Read Services, Endpoints and EndpointSlices from upstream in
    /// protobuf when it offers it, about half the bytes of JSON (`false`:
    /// JSON). A resource with fields this build does not know is read in
    /// JSON from the first such answer on.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub upstream_protobuf: bool,
    /// Serve objects without `metadata.managedFields`, which kube-proxy never
    /// reads and which are up to half of a small object's bytes: less memory,
    /// and fewer bytes to every client (across a WAN from a site proxy in the
    /// cloud, say). Clients then read the objects without them.
    #[arg(long)]
    pub drop_managed_fields: bool,
    /// Events a watcher may fall behind before it is ended with 410 Expired (the client relists).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub watcher_buffer: u64,
    /// Time between BOOKMARK events on watches that allow them (Go-style duration; a bare number is seconds).
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration)]
    pub bookmark_interval: Duration,
    /// What a passed-through request without credentials (no bearer token, no
    /// client certificate signed by --ca-file) may do with the proxy's
    /// identity: `kube-proxy` = discovery, /version, Events and reading this
    /// node's Node, 403 for anything else; `all` = whatever the proxy may.
    /// Requests with credentials always run as their caller.
    #[arg(long, value_enum, default_value_t = AnonymousPassthrough::KubeProxy)]
    pub anonymous_passthrough: AnonymousPassthrough,
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
    /// Serve only clients whose certificate (signed by --ca-file) names this
    /// group in its O; repeat for more. For a site proxy other sites' nodes
    /// reach (in the cloud): give each site's node proxies certificates in
    /// the site's group. Health and metrics stay open.
    #[arg(long = "client-group", requires = "ca_file", value_parser = parse_group)]
    pub client_groups: Vec<String>,
    /// Serve this node's kubelet on this address (HTTPS with --cert-file and
    /// --key-file, client certificates of --kubelet-client-ca-file): the node
    /// cache. Point the kubelet's kubeconfig here; what it reads is kept in
    /// --data-dir and answered while the API server is unreachable
    /// (docs/edge-autonomy.md).
    #[arg(long, requires_all = ["cert_file", "kubelet_client_ca_file"])]
    pub kubelet_bind_address: Option<SocketAddr>,
    /// CA (PEM) the kubelet's client certificate is signed by: the cluster's
    /// (kube-apiserver's --client-ca-file, /etc/kubernetes/pki/ca.crt on kubeadm nodes).
    #[arg(long, requires = "kubelet_bind_address")]
    pub kubelet_client_ca_file: Option<PathBuf>,
    /// The kubelet's client certificate (PEM), which the node cache sends its
    /// requests upstream with; re-read when the kubelet rotates it.
    #[arg(
        long,
        default_value = "/var/lib/kubelet/pki/kubelet-client-current.pem"
    )]
    pub kubelet_client_certificate: PathBuf,
    /// Its key (PEM; by default the same file, as the kubelet keeps them).
    #[arg(long)]
    pub kubelet_client_key: Option<PathBuf>,
    /// kubeconfig naming the API server the kubelet's requests go to, and
    /// which the node cache probes to tell whether it is reachable (default:
    /// --kubeconfig's). Behind a site proxy, name the API server itself: the
    /// kubelet then reads it as it would without the proxy, and a cut WAN
    /// makes the node cache answer (the site proxy would answer in its stead,
    /// without the kubelet's pods). Its credentials are not used: the
    /// kubelet's own certificate is.
    #[arg(long, requires = "kubelet_bind_address")]
    pub kubelet_kubeconfig: Option<PathBuf>,
    /// Seal the node cache's files with this key (32 bytes, raw or as 64
    /// hexadecimal digits): ChaCha20-Poly1305, so the kept Secrets and tokens
    /// are not readable from a copy of --data-dir without the key.
    #[arg(long, requires = "kubelet_bind_address")]
    pub node_cache_key_file: Option<PathBuf>,
    /// The file naming this boot of the node: the kernel's boot id. When it
    /// differs from the one the node cache last ran in, the node rebooted:
    /// its pods' endpoints are served not ready until the kubelet reports
    /// them again (docs/edge-autonomy.md). Name another file only where the
    /// node is not a machine of its own (a node simulated in a namespace or
    /// a container, which shares its host's kernel and boot id).
    #[arg(
        long,
        env = "SITEGRID_BOOT_ID_FILE",
        default_value = "/proc/sys/kernel/random/boot_id"
    )]
    pub boot_id_file: PathBuf,
    /// Also serve /debug/cache and /debug/pprof/{profile,heap}.
    #[arg(long)]
    pub debug: bool,
    /// Serve /healthz, /readyz, /metrics (and /debug/*) on this address instead of the serving port.
    #[arg(long)]
    pub metrics_bind_address: Option<SocketAddr>,
    /// Concurrent cached lists/gets, and concurrent non-watch passthrough requests; more are refused with 429.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Watches open at once, cached and passed through; more are refused
    /// with 429 (Retry-After: 1) until one ends. Each costs about
    /// 10 KiB besides what it has not read yet (see proxy/README.md).
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_watches: u64,
    /// Time a client gets to send a request's headers; an HTTP/1.1
    /// connection idle that long between requests is closed (Go-style duration).
    #[arg(long, default_value = "32s", value_parser = parse_positive_duration)]
    pub request_header_timeout: Duration,
    /// Time a client gets to finish the TLS handshake (Go-style duration).
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub tls_handshake_timeout: Duration,
    /// How long open requests get to finish after SIGTERM; watches end at once
    /// (Go-style duration; a bare number is seconds, as the old --shutdown-grace-seconds took).
    #[arg(long, alias = "shutdown-grace-seconds", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace_period: Duration,
    /// Keep a snapshot of what is served in this directory, and start from
    /// it: a proxy restarted while the API server is unreachable serves it
    /// (`--data-dir=""`: no snapshot).
    #[arg(long, default_value = "/var/lib/sitegrid-proxy", value_parser = clap::builder::OsStringValueParser::new())]
    pub data_dir: std::ffi::OsString,
    /// The least time between two snapshot writes; one is written only when
    /// something changed (Go-style duration).
    #[arg(long, default_value = "60s", value_parser = parse_positive_duration)]
    pub snapshot_interval: Duration,
    /// How long a proxy started with a snapshot waits for the API server
    /// before serving the snapshot (at once when the API server refuses).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub snapshot_wait: Duration,
    /// Logging.
    #[command(flatten)]
    pub log: sitegrid_runtime::LogArgs,
}

impl ProxyArgs {
    /// The local node name: the flag, $NODE_NAME, else the host name.
    pub fn node_name(&self) -> String {
        self.hostname
            .clone()
            .unwrap_or_else(sitegrid_runtime::host_name)
    }

    /// What the proxy is started with.
    pub fn options(&self) -> ProxyOptions {
        let mut opts = ProxyOptions::new(self.node_name(), self.bind_address);
        opts.site = self.site_selector.clone();
        opts.cache = CacheConfig {
            log_capacity: self.event_log_size as usize,
            log_bytes: usize::try_from(self.event_log_bytes).unwrap_or(usize::MAX),
            watcher_buffer: self.watcher_buffer as usize,
            on_demand: self.on_demand,
            compress: self.cache_compression,
            upstream_protobuf: self.upstream_protobuf,
            drop_managed_fields: self.drop_managed_fields,
            ..CacheConfig::default()
        };
        opts.handlers = HandlerSettings {
            watch: WatchSettings {
                bookmark_interval: self.bookmark_interval,
            },
            ..HandlerSettings::default()
        };
        opts.max_body = self.max_body_bytes;
        opts.anonymous_passthrough = self.anonymous_passthrough;
        opts.client_groups = self.client_groups.clone();
        opts.grace = self.shutdown_grace_period;
        opts.tls = self.tls_files();
        opts.debug = self.debug;
        opts.metrics_bind_address = self.metrics_bind_address;
        opts.data_dir = (!self.data_dir.is_empty()).then(|| PathBuf::from(&self.data_dir));
        opts.snapshot_interval = self.snapshot_interval;
        opts.snapshot_wait = self.snapshot_wait;
        opts.kubelet = self.kubelet_bind_address.map(|bind| KubeletOptions {
            bind,
            client_ca: self.kubelet_client_ca_file.clone().unwrap_or_default(),
            certificate: self.kubelet_client_certificate.clone(),
            key: self
                .kubelet_client_key
                .clone()
                .unwrap_or_else(|| self.kubelet_client_certificate.clone()),
            seal_key: self.node_cache_key_file.clone(),
            boot_id_file: self.boot_id_file.clone(),
            // Read by `main` (a kubeconfig is read asynchronously).
            upstream: None,
        });
        opts.limits = Limits {
            cached_inflight: self.max_requests_inflight,
            passthrough_inflight: self.max_requests_inflight,
            watches: usize::try_from(self.max_watches).unwrap_or(usize::MAX),
        };
        opts.conn = ConnLimits {
            header_read_timeout: self.request_header_timeout,
            tls_handshake_timeout: self.tls_handshake_timeout,
            ..ConnLimits::default()
        };
        opts
    }

    /// The serving TLS files, when --cert-file and --key-file are given.
    fn tls_files(&self) -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: self.cert_file.clone()?,
            key: self.key_file.clone()?,
            client_ca: self.ca_file.clone(),
        })
    }
}

/// A group name as a certificate's O can hold it.
fn parse_group(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("a group must not be empty".into());
    }
    Ok(s.to_owned())
}

/// A non-empty label selector (an empty one would make the whole cluster one site).
fn parse_site_selector(s: &str) -> Result<LabelSelector, String> {
    let selector = LabelSelector::parse(s).map_err(|e| e.to_string())?;
    if selector.is_empty() {
        return Err("an empty selector would make the whole cluster one site".into());
    }
    Ok(selector)
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
    fn a_site_selector_makes_a_site_proxy_and_an_empty_or_bad_one_is_refused() {
        let cli =
            Cli::try_parse_from(["sitegrid-proxy", "--site-selector=location=beijing"]).unwrap();
        let locality = cli.proxy.options().locality();
        assert_eq!(locality.to_string(), "site location=beijing");
        assert!(locality.node().is_none());
        let by_default = Cli::try_parse_from(["sitegrid-proxy", "--hostname=bj-1"]).unwrap();
        assert_eq!(by_default.proxy.options().locality().node(), Some("bj-1"));
        for bad in ["--site-selector=", "--site-selector=location in (beijing"] {
            let err = Cli::try_parse_from(["sitegrid-proxy", bad])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--site-selector"), "{bad}: {err}");
        }
        let err = Cli::try_parse_from(["sitegrid-proxy", "--site-selector="])
            .unwrap_err()
            .to_string();
        assert!(err.contains("whole cluster one site"), "{err}");
    }

    #[test]
    fn durations_are_go_style_and_old_seconds_still_work() {
        let cli = Cli::try_parse_from([
            "sitegrid-proxy",
            "--bookmark-interval=1m30s",
            "--shutdown-grace-seconds=3",
        ])
        .unwrap();
        let opts = cli.proxy.options();
        assert_eq!(
            opts.handlers.watch.bookmark_interval,
            Duration::from_secs(90)
        );
        assert_eq!(opts.grace, Duration::from_secs(3));
        let cli = Cli::try_parse_from(["sitegrid-proxy", "--shutdown-grace-period=0s"]).unwrap();
        assert_eq!(cli.proxy.options().grace, Duration::ZERO);
        assert!(Cli::try_parse_from(["sitegrid-proxy", "--bookmark-interval=0s"]).is_err());
        assert!(Cli::try_parse_from(["sitegrid-proxy", "--bookmark-interval=soon"]).is_err());
    }

    #[test]
    fn the_snapshot_is_kept_by_default_and_can_be_turned_off() {
        let cli = Cli::try_parse_from(["sitegrid-proxy"]).unwrap();
        let opts = cli.proxy.options();
        assert_eq!(
            opts.data_dir,
            Some(PathBuf::from("/var/lib/sitegrid-proxy"))
        );
        assert_eq!(opts.snapshot_interval, Duration::from_secs(60));
        let cli = Cli::try_parse_from([
            "sitegrid-proxy",
            "--data-dir=",
            "--snapshot-interval=5s",
            "--snapshot-wait=0s",
        ])
        .unwrap();
        let opts = cli.proxy.options();
        assert_eq!(opts.data_dir, None);
        assert_eq!(opts.snapshot_interval, Duration::from_secs(5));
        assert_eq!(opts.snapshot_wait, Duration::ZERO);
        assert!(Cli::try_parse_from(["sitegrid-proxy", "--snapshot-interval=0s"]).is_err());
    }

    #[test]
    fn connection_bounds_have_kube_apiservers_defaults_and_can_be_set() {
        let opts = Cli::try_parse_from(["sitegrid-proxy"])
            .unwrap()
            .proxy
            .options();
        assert_eq!(opts.limits.watches, 1_000);
        assert_eq!(opts.conn.header_read_timeout, Duration::from_secs(32));
        assert_eq!(opts.conn.tls_handshake_timeout, Duration::from_secs(10));
        let opts = Cli::try_parse_from([
            "sitegrid-proxy",
            "--max-watches=20000",
            "--request-header-timeout=5s",
            "--tls-handshake-timeout=2s",
        ])
        .unwrap()
        .proxy
        .options();
        assert_eq!(opts.limits.watches, 20_000);
        assert_eq!(opts.conn.header_read_timeout, Duration::from_secs(5));
        assert_eq!(opts.conn.tls_handshake_timeout, Duration::from_secs(2));
        assert!(Cli::try_parse_from(["sitegrid-proxy", "--max-watches=0"]).is_err());
        assert!(Cli::try_parse_from(["sitegrid-proxy", "--request-header-timeout=0s"]).is_err());
    }

    #[test]
    fn the_node_cache_needs_its_port_tls_and_the_clusters_ca() {
        let opts = Cli::try_parse_from([
            "sitegrid-proxy",
            "--cert-file=/tls/tls.crt",
            "--key-file=/tls/tls.key",
            "--kubelet-bind-address=127.0.0.1:51010",
            "--kubelet-client-ca-file=/etc/kubernetes/pki/ca.crt",
        ])
        .unwrap()
        .proxy
        .options();
        let kubelet = opts.kubelet.unwrap();
        assert_eq!(kubelet.bind, "127.0.0.1:51010".parse().unwrap());
        assert_eq!(
            kubelet.certificate,
            PathBuf::from("/var/lib/kubelet/pki/kubelet-client-current.pem")
        );
        assert_eq!(
            kubelet.key, kubelet.certificate,
            "the kubelet keeps both in one file"
        );
        assert!(Cli::try_parse_from(["sitegrid-proxy"])
            .unwrap()
            .proxy
            .options()
            .kubelet
            .is_none());
        for missing in [
            vec!["sitegrid-proxy", "--kubelet-bind-address=127.0.0.1:51010"],
            vec![
                "sitegrid-proxy",
                "--cert-file=/a",
                "--key-file=/b",
                "--kubelet-bind-address=127.0.0.1:51010",
            ],
            vec!["sitegrid-proxy", "--node-cache-key-file=/k"],
        ] {
            assert!(Cli::try_parse_from(&missing).is_err(), "{missing:?}");
        }
    }

    #[test]
    fn unknown_flag_is_an_error() {
        let err = Cli::try_parse_from(["sitegrid-proxy", "--no-such-flag"]).unwrap_err();
        assert!(err.to_string().contains("--no-such-flag"));
    }
}
