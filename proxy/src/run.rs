//! Assembling the proxy: upstream discovery, projector, reflectors, listener.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    sync::{mpsc, oneshot},
    task::JoinHandle,
};
use tracing::{info, warn};

use crate::{
    cache::{Cache, CacheConfig, Projector},
    reflector,
    resource::ApiVersion,
    serve::ServeSettings,
    server::{self, App},
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

/// Discovers the upstream, starts the projector and reflectors, and listens.
/// Retries discovery until the upstream answers (the proxy may start first).
pub async fn start(client: kube::Client, opts: ProxyOptions) -> std::io::Result<RunningProxy> {
    let listener = server::bind(opts.bind_address).await?;
    let local_addr = listener.local_addr()?;
    let slice_version = discover_with_retry(&client).await;
    info!(node = %opts.node_name, %local_addr, endpointslices = slice_version.as_str(), "sitegrid-proxy starting");
    let cache = Arc::new(Cache::new(opts.cache, slice_version));
    let (tx, rx) = mpsc::channel(1024);
    let mut background = vec![tokio::spawn(
        Projector::new(cache.clone(), opts.node_name.clone()).run(rx),
    )];
    background.extend(reflector::spawn_all(&client, slice_version, tx));
    let app = Arc::new(App {
        cache: cache.clone(),
        settings: opts.serve,
        upstream: Some(client),
        max_body: opts.max_body,
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(
        listener,
        app,
        async move {
            let _ = stopped.await;
        },
        opts.grace,
    ));
    Ok(RunningProxy {
        local_addr,
        cache,
        stop: Some(stop),
        server,
        background,
    })
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
