//! Start-up and shutdown: the cache and its sync from the API server, the
//! gateway on the serving port, the operator endpoints (on that port or their
//! own), and TLS reloads; with `--kubelet-bind-address`, the node cache
//! ([`node_cache`]). One cancellation token stops everything; every
//! background task lives in one task set that ends with the proxy.

mod node_cache;

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use http::Request;
use hyper::body::Incoming;
use prometheus_client::registry::Registry;
use sitegrid_runtime::{
    ops::Operator,
    serve::{self, ConnLimits, Transport},
};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tracing::{info, warn};

use sitegrid_apimachinery::{duration::format_system_time, selector::LabelSelector};

use crate::{
    gateway::{self, stack::boxed_request, Gateway, GatewayConfig, Limits, RequestMetrics},
    handlers::HandlerSettings,
    http::tls::{ReloadingTls, TlsError, TlsFiles},
    ops::Ops,
    passthrough::{AnonymousPassthrough, Passthrough},
    site_reports::SiteReports,
    upstream::{
        health::{probe, Health, ProbeTimes, Reachability, Thresholds},
        upstream, upstream_without_credentials,
    },
};
use sitegrid_cache::{self as cache, persist, Cache, CacheConfig, Codec, Locality, ResourceKind};
use sitegrid_nodecache::NodeCache;

/// What a proxy is started with besides its upstream client.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The local node's name.
    pub node_name: String,
    /// Serve a whole site instead: the nodes this selector matches (a site
    /// proxy, the upstream of its nodes' proxies).
    pub site: Option<LabelSelector>,
    /// Where to listen.
    pub bind_address: SocketAddr,
    /// Buffer sizes.
    pub cache: CacheConfig,
    /// Handler settings.
    pub handlers: HandlerSettings,
    /// Largest passthrough request body.
    pub max_body: usize,
    /// What passthrough requests without credentials may do.
    pub anonymous_passthrough: AnonymousPassthrough,
    /// Only clients whose verified certificate names one of these groups may
    /// use the proxy (empty: anyone); see `gateway::ClientGroups`.
    pub client_groups: Vec<String>,
    /// How long open requests may finish after shutdown starts.
    pub grace: Duration,
    /// Concurrency bounds.
    pub limits: Limits,
    /// What one client connection may hold or take.
    pub conn: ConnLimits,
    /// Serve HTTPS with these files (None: plain HTTP).
    pub tls: Option<TlsFiles>,
    /// Serve /debug/cache and /debug/pprof.
    pub debug: bool,
    /// Serve the operator endpoints here instead of on the serving port.
    pub metrics_bind_address: Option<SocketAddr>,
    /// Keep a snapshot of the cache here, and start from it (None: no snapshot).
    pub data_dir: Option<PathBuf>,
    /// The least time between two snapshot writes.
    pub snapshot_interval: Duration,
    /// How long a restarted proxy waits for the API server before serving
    /// its snapshot (at once when the API server refuses).
    pub snapshot_wait: Duration,
    /// Serve this node's kubelet with a node cache (None: no node cache).
    pub kubelet: Option<KubeletOptions>,
}

/// The node cache: where the kubelet is served and with what.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// The kubelet port.
    pub bind: SocketAddr,
    /// The CA its client certificate is signed by (the cluster's).
    pub client_ca: PathBuf,
    /// The kubelet's client certificate, to act as the kubelet upstream.
    pub certificate: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The key the node cache's files are sealed with.
    pub seal_key: Option<PathBuf>,
    /// The file naming this boot of the node (`--boot-id-file`).
    pub boot_id_file: PathBuf,
    /// Where the kubelet's requests and the reachability probe go, when not
    /// to the proxy's own upstream (`--kubelet-kubeconfig`: behind a site
    /// proxy, the API server itself).
    pub upstream: Option<kube::Config>,
}

impl ProxyOptions {
    /// Defaults for `node_name` on `bind_address`.
    pub fn new(node_name: impl Into<String>, bind_address: SocketAddr) -> Self {
        ProxyOptions {
            node_name: node_name.into(),
            site: None,
            bind_address,
            cache: CacheConfig::default(),
            handlers: HandlerSettings::default(),
            max_body: 3 * 1024 * 1024,
            anonymous_passthrough: AnonymousPassthrough::default(),
            client_groups: Vec::new(),
            grace: Duration::from_secs(10),
            limits: Limits::default(),
            conn: ConnLimits::default(),
            tls: None,
            debug: false,
            metrics_bind_address: None,
            data_dir: None,
            snapshot_interval: Duration::from_secs(60),
            snapshot_wait: Duration::from_secs(3),
            kubelet: None,
        }
    }

    /// Whose view the proxy serves: the site's when `site` is set, else the node's.
    pub fn locality(&self) -> Locality {
        match &self.site {
            Some(selector) => Locality::Site(selector.clone()),
            None => Locality::Node(self.node_name.clone()),
        }
    }
}

/// A started proxy.
pub struct RunningProxy {
    /// The address it listens on.
    pub local_addr: SocketAddr,
    /// Its cache (for inspection).
    pub cache: Cache,
    /// The kubelet port and the node cache, when served.
    pub node_cache: Option<(SocketAddr, NodeCache)>,
    shutdown: CancellationToken,
    /// The serving loop: it ends after the grace period once `shutdown` is cancelled.
    server: JoinHandle<()>,
    /// Everything else (TLS reloads, the operator port): aborted when the proxy ends.
    tasks: JoinSet<()>,
    /// The upstream sync, on its own thread: stopped when the proxy ends.
    sync: Option<crate::upstream::sync::SyncThread>,
}

/// How long the sync may take to stop (its last snapshot write included).
const SYNC_STOP: Duration = Duration::from_secs(10);

impl RunningProxy {
    /// Ends open watches, stops accepting, lets other requests finish
    /// within the grace period, then stops the background tasks.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        // An error is a panicked or aborted server task: either way it is over.
        let _ = (&mut self.server).await;
        self.tasks.shutdown().await;
        if let Some((_, cache)) = self.node_cache.take() {
            // What changed since the last write is not lost with the process.
            let _ = tokio::task::spawn_blocking(move || cache.flush()).await;
        }
        if let Some(sync) = self.sync.take() {
            sync.stop(SYNC_STOP).await;
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        // `tasks` aborts its own on drop; the server is a plain handle.
        self.server.abort();
    }
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listener could not be bound.
    #[error(transparent)]
    Listen(#[from] std::io::Error),
    /// The kubeconfig does not make a usable client (bad certificate, token, ...).
    #[error("invalid upstream configuration: {0}")]
    Upstream(#[from] kube::Error),
    /// The serving certificate, key or client CA is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The kubelet's client certificate is another identity's, or unusable.
    #[error("--kubelet-client-certificate")]
    Kubelet(#[from] crate::upstream::kubelet::CredentialsError),
    /// The node cache's directory or key file is unusable.
    #[error(transparent)]
    NodeCacheStorage(#[from] sitegrid_nodecache::StorageError),
    /// A kubelet port without a serving certificate.
    #[error("--kubelet-bind-address needs --cert-file and --key-file (the kubelet speaks HTTPS)")]
    NodeCacheWithoutTls,
}

/// How often the serving certificate files (and the kubelet's) are checked for changes.
const TLS_RELOAD_PERIOD: Duration = Duration::from_secs(10);

/// Starts serving at once and syncs in the background: `/healthz` answers and
/// `/readyz` says what is missing while the API server is still unreachable;
/// cached kinds wait for their sync (up to `sync_wait`, then 503).
pub async fn start(config: kube::Config, opts: ProxyOptions) -> Result<RunningProxy, StartError> {
    let tls = opts
        .tls
        .clone()
        .map(ReloadingTls::load)
        .transpose()?
        .map(Arc::new);
    let mut passthrough = Passthrough::new(
        upstream(&config)?,
        upstream_without_credentials(&config)?,
        opts.anonymous_passthrough,
        opts.max_body,
    )
    .with_body_idle_timeout(opts.conn.header_read_timeout);
    // The kubelet's own path to the API server: the proxy's upstream unless
    // --kubelet-kubeconfig names another (behind a site proxy, the API
    // server itself, so that a cut WAN makes the node cache answer).
    let kubelet_config = opts
        .kubelet
        .as_ref()
        .and_then(|k| k.upstream.clone())
        .unwrap_or_else(|| config.clone());
    let node_cache = match &opts.kubelet {
        Some(k) => Some(node_cache::NodeCacheParts::load(
            &kubelet_config,
            &opts.node_name,
            k,
            opts.tls.as_ref(),
            opts.data_dir.as_deref(),
        )?),
        None => None,
    };
    if let Some(nc) = &node_cache {
        passthrough = passthrough.with_kubelet(nc.credentials.clone());
    }
    let listener = serve::bind(opts.bind_address).await?;
    let local_addr = listener.local_addr()?;
    let locality = opts.locality();
    info!(serving = %locality, %local_addr, "sitegrid-proxy starting");

    let shutdown = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let opened = match &opts.data_dir {
        Some(dir) => persist::open(
            dir,
            &locality.owner(),
            opts.snapshot_interval,
            Arc::new(Codec::new(opts.cache.compress)),
        ),
        None => persist::Opened::default(),
    };
    let (cache, writer) = cache::open(opts.cache, opened);
    // Whose offline reports the served endpoints follow: this node's kubelet
    // (a node cache), or the site's nodes' (a site proxy, which then probes
    // the API server as a node cache does: `crate::site_reports`).
    let mut site_reports = None;
    let local = match (&node_cache, &locality) {
        (Some(nc), _) => Some(nc.local_reports(&mut tasks)),
        (None, Locality::Site(_)) => {
            let health = Health::new(Thresholds::default());
            tasks.spawn(probe(
                config.clone(),
                health.clone(),
                ProbeTimes::default(),
                shutdown.clone(),
            ));
            let (reports, rx) = SiteReports::new(health);
            tasks.spawn(reports.clone().let_go_when_online());
            site_reports = Some(reports);
            Some(rx)
        }
        (None, Locality::Node(_)) => None,
    };
    if let (Some(nc), Some(_)) = (
        &node_cache,
        opts.kubelet.as_ref().and_then(|k| k.upstream.as_ref()),
    ) {
        // The kubelet reads the API server directly: this proxy's upstream
        // is a site proxy, which serves the node's reports to the site.
        nc.report_to_site(&config, &mut tasks, shutdown.clone())?;
    }
    let sync =
        crate::upstream::sync::SyncThread::start(config.clone(), writer, locality.clone(), local)?;
    if cache.readiness().restored_from().is_some() {
        tasks.spawn(serve_snapshot_when_offline(
            cache.clone(),
            opts.snapshot_wait,
            node_cache.as_ref().map(|nc| nc.health.clone()),
        ));
    }
    if let Some(tls) = &tls {
        tasks.spawn(tls.reloader(TLS_RELOAD_PERIOD));
    }

    let mut registry = Registry::with_prefix("sitegrid_proxy");
    cache.register_metrics(&mut registry);
    let metrics = RequestMetrics::register(&mut registry);
    if let Some(nc) = &node_cache {
        nc.cache.register_metrics(&mut registry);
        nc.health.register_metrics(&mut registry);
    }
    if let Some(reports) = &site_reports {
        reports.health().register_metrics(&mut registry);
    }
    let health = match (&node_cache, &site_reports) {
        (Some(nc), _) => Some((
            nc.health.clone(),
            "the kubelet is answered from the node cache",
        )),
        (None, Some(reports)) => Some((
            reports.health().clone(),
            "the site's nodes' offline reports of their pods are served",
        )),
        (None, None) => None,
    };
    let ops = Ops {
        operator: Operator::new(registry, ready_check(cache.clone(), health)),
        cache: cache.clone(),
        debug: opts.debug,
    };
    let ops_here = match opts.metrics_bind_address {
        Some(addr) => {
            tasks.spawn(serve_ops(serve::bind(addr).await?, ops, shutdown.clone())?);
            None
        }
        None => Some(ops),
    };

    let gateway = gateway::build(GatewayConfig {
        cache: cache.clone(),
        settings: opts.handlers,
        passthrough: Some(passthrough.clone()),
        ops: ops_here,
        limits: opts.limits,
        metrics,
        // Open watches end first when shutdown starts, so their clients reconnect elsewhere or later.
        closing: shutdown.clone(),
        // The cache holds this node whole, other nodes' labels only.
        nodes: match &locality {
            Locality::Node(name) => gateway::CachedNodes::Only(name.as_str().into()),
            Locality::Site(_) => gateway::CachedNodes::Labels(cache.clone()),
        },
        clients: gateway::ClientGroups::new(opts.client_groups.clone()),
        kubelet: node_cache.as_ref().map(|nc| {
            nc.branch(
                passthrough.clone(),
                cache.clone(),
                opts.handlers.watch.bookmark_interval,
                shutdown.clone(),
            )
        }),
        reports: site_reports,
    });
    // Each connection holds a handle on the stack, each request its own copy
    // while it is dispatched (an open watch: only the handle).
    let gateway = std::sync::Arc::new(gateway);
    let node_cache = match node_cache {
        Some(nc) => {
            let kept = nc.cache.clone();
            let addr = nc
                .run(
                    kubelet_config,
                    gateway.clone(),
                    opts.conn,
                    opts.grace,
                    &mut tasks,
                    shutdown.clone(),
                )
                .await?;
            Some((addr, kept))
        }
        None => None,
    };
    let server = tokio::spawn(serve::serve(
        listener,
        move |req| dispatch(&gateway, req),
        transport(tls),
        opts.conn,
        shutdown.clone(),
        opts.grace,
    ));
    Ok(RunningProxy {
        local_addr,
        cache,
        node_cache,
        shutdown,
        server,
        tasks,
        sync: Some(sync),
    })
}

/// Serves the restored snapshot once the API server has refused or failed
/// to answer (or the node cache's probe found it unreachable), or `wait`
/// passed without a first sync.
async fn serve_snapshot_when_offline(cache: Cache, wait: Duration, health: Option<Health>) {
    let offline = async {
        match &health {
            Some(h) => h.offline().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = cache.readiness().unreachable() => {}
        // Known to be unreachable (the node cache's probe): no need to wait.
        () = offline => {}
    }
    let kinds = cache.readiness().serve_restored();
    if let (false, Some(taken)) = (kinds.is_empty(), cache.readiness().restored_from()) {
        let names: Vec<&str> = kinds.iter().map(|k| k.plural()).collect();
        warn!(snapshot = %format_system_time(taken), resources = %names.join(","), "the API server has not answered; serving the snapshot until it does");
    }
}

/// The operator endpoints on a port of their own (`--metrics-bind-address`).
fn serve_ops(
    listener: tokio::net::TcpListener,
    ops: Ops,
    shutdown: CancellationToken,
) -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    info!(address = %listener.local_addr()?, "operator endpoints listening");
    let respond = move |req: Request<Incoming>| {
        let ops = ops.clone();
        async move { Ok::<_, std::convert::Infallible>(ops.respond(req).await) }
    };
    Ok(serve::serve(
        listener,
        respond,
        Transport::Plain,
        ConnLimits::default(),
        shutdown,
        Duration::ZERO,
    ))
}

/// Plain HTTP, or TLS with the certificate in force when a connection
/// arrives (it is reloaded on change).
fn transport(tls: Option<Arc<ReloadingTls>>) -> Transport {
    match tls {
        Some(tls) => Transport::Tls(Arc::new(move || tls.acceptor())),
        None => Transport::Plain,
    }
}

/// Hands one request to the stack.
fn dispatch(
    gateway: &Gateway,
    req: Request<Incoming>,
) -> tower::util::Oneshot<Gateway, Request<crate::http::Body>> {
    gateway.clone().oneshot(boxed_request(req))
}

/// `/readyz`: ready once every wanted kind is served (Services and Nodes,
/// and the endpoint kinds clients asked for); degraded while some of them
/// are still the snapshot's.
fn ready_check(
    cache: Cache,
    health: Option<(Health, &'static str)>,
) -> sitegrid_runtime::ops::ReadyCheck {
    Arc::new(move || {
        let offline = match health.as_ref().map(|(h, what)| (h.state(), what)) {
            Some((Reachability::Offline(since), what)) => Some(format!(
                "the API server has not answered since {}; {what}",
                format_system_time(since)
            )),
            _ => None,
        };
        let pending = cache.readiness().pending();
        if pending.is_empty() {
            let snapshot = cache.readiness().degraded().map(|taken| {
                format!(
                    "serving a snapshot from {}; the API server has not been reached since the start",
                    format_system_time(taken)
                )
            });
            return Ok(match (snapshot, offline) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            });
        }
        let names: Vec<&str> = pending.iter().map(|k: &ResourceKind| k.plural()).collect();
        let waiting = format!("waiting for the first sync of {}", names.join(", "));
        Err(match offline {
            Some(offline) => format!("{waiting}; {offline}"),
            None => waiting,
        })
    })
}
