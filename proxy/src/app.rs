//! Assembling the proxy: upstream discovery, projector, reflectors, listener.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
};
use tracing::{info, warn};

use crate::{
    cache::{Cache, CacheConfig, Projector},
    ops::{Metrics, Ops, WatcherRegistry},
    reflector,
    resource::ApiVersion,
    serve::ServeSettings,
    serve::WatchContext,
    server::{self, Shared},
    stack::{gateway, Limits},
    tls::{ReloadingTls, TlsError, TlsFiles},
    upstream::upstream,
};

/// What a proxy needs besides its upstream client.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The local node's name.
    pub node_name: String,
    /// Where to listen.
    pub bind_address: SocketAddr,
    /// Buffer sizes.
    pub cache: CacheConfig,
    /// Handler settings.
    pub serve: ServeSettings,
    /// Largest passthrough request body.
    pub max_body: usize,
    /// How long open requests may finish after shutdown starts.
    pub grace: Duration,
    /// Concurrency bounds.
    pub limits: Limits,
    /// Serve HTTPS with these files (None: plain HTTP).
    pub tls: Option<TlsFiles>,
    /// Serve /debug/cache and /debug/pprof.
    pub debug: bool,
    /// Serve the operator endpoints here instead of on the serving port.
    pub metrics_bind_address: Option<SocketAddr>,
}

impl ProxyOptions {
    /// Defaults for `node_name` on `bind_address`.
    pub fn new(node_name: impl Into<String>, bind_address: SocketAddr) -> Self {
        ProxyOptions {
            node_name: node_name.into(),
            bind_address,
            cache: CacheConfig::default(),
            serve: ServeSettings::default(),
            max_body: 3 * 1024 * 1024,
            grace: Duration::from_secs(10),
            limits: Limits::default(),
            tls: None,
            debug: false,
            metrics_bind_address: None,
        }
    }
}

/// A started proxy.
pub struct RunningProxy {
    /// The address it listens on.
    pub local_addr: SocketAddr,
    /// Its cache (for inspection).
    pub cache: Arc<Cache>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
    background: Vec<JoinHandle<()>>,
}

impl RunningProxy {
    /// Stops accepting, lets requests finish within the grace period, stops the reflectors.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.server).await;
        for task in &self.background {
            task.abort();
        }
    }

    /// Waits until the server ends (after `shutdown` was triggered elsewhere, or forever).
    pub async fn wait(mut self) {
        let _ = (&mut self.server).await;
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        self.server.abort();
        for task in &self.background {
            task.abort();
        }
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
}

/// How often the serving certificate files are checked for changes.
const TLS_RELOAD_PERIOD: Duration = Duration::from_secs(10);

/// Discovers the upstream, starts the projector and reflectors, and listens.
/// Retries discovery until the upstream answers (the proxy may start first).
pub async fn start(config: kube::Config, opts: ProxyOptions) -> Result<RunningProxy, StartError> {
    let tls = opts
        .tls
        .clone()
        .map(ReloadingTls::load)
        .transpose()?
        .map(Arc::new);
    let client = kube::Client::try_from(config.clone())?;
    let passthrough = upstream(&config)?;
    let listener = server::bind(opts.bind_address).await?;
    let local_addr = listener.local_addr()?;
    info!(node = %opts.node_name, %local_addr, "sitegrid-proxy starting");
    // Serve at once: /healthz answers and /readyz says what is missing while
    // the API server is still unreachable; cached kinds wait for their sync.
    let cache = Arc::new(Cache::new(opts.cache, ApiVersion::V1));
    let metrics = Arc::new(Metrics::new());
    let mut background = vec![tokio::spawn(sync_from_upstream(
        client,
        cache.clone(),
        opts.node_name.clone(),
        metrics.clone(),
    ))];
    if let Some(tls) = &tls {
        background.push(tls.spawn_reloader(TLS_RELOAD_PERIOD));
    }
    let (closing_tx, closing) = watch::channel(false);
    let watchers = WatcherRegistry::new();
    let ops = Arc::new(Ops {
        cache: cache.clone(),
        metrics: metrics.clone(),
        debug: opts.debug,
        watchers: watchers.clone(),
    });
    // Operator endpoints on their own port, or on the serving port.
    let ops_here = match opts.metrics_bind_address {
        Some(addr) => {
            let listener = server::bind(addr).await?;
            info!(address = %listener.local_addr()?, "operator endpoints listening");
            background.push(tokio::spawn(server::serve_ops(listener, ops.clone())));
            None
        }
        None => Some(ops),
    };
    let shared = Arc::new(Shared {
        cache: cache.clone(),
        settings: opts.serve,
        upstream: Some(passthrough),
        max_body: opts.max_body,
        watch: WatchContext {
            closing,
            metrics: metrics.clone(),
            watchers: watchers.clone(),
        },
        ops: ops_here.clone(),
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        listener,
        gateway(shared, opts.limits),
        async move {
            let _ = stopped.await;
            // End open watches first so their clients reconnect elsewhere or later.
            closing_tx.send_replace(true);
        },
        opts.grace,
        tls,
    ));
    Ok(RunningProxy {
        local_addr,
        cache,
        stop: Some(stop),
        server,
        background,
    })
}

/// Discovers the upstream, then runs the projector and one reflector per kind
/// until aborted (which also aborts them).
async fn sync_from_upstream(
    client: kube::Client,
    cache: Arc<Cache>,
    node: String,
    metrics: Arc<Metrics>,
) {
    let slice_version = discover_with_retry(&client).await;
    cache.set_slice_version(slice_version);
    info!(
        endpointslices = slice_version.as_str(),
        "upstream discovered; syncing"
    );
    let (tx, rx) = mpsc::channel(1024);
    let mut tasks = vec![tokio::spawn(
        Projector::new(cache, node)
            .with_metrics(metrics.clone())
            .run(rx),
    )];
    tasks.extend(reflector::spawn_all(&client, slice_version, tx, metrics));
    let _abort_with_me = AbortOnDrop(tasks);
    std::future::pending::<()>().await;
}

/// Aborts the tasks when dropped (when the task holding it is aborted).
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

async fn discover_with_retry(client: &kube::Client) -> ApiVersion {
    let mut delay = Duration::from_millis(200);
    loop {
        match reflector::discover_slice_version(client).await {
            Ok(v) => return v,
            Err(err) => {
                warn!(error = %err, retry_in = ?delay, "cannot reach the API server for discovery");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
}
