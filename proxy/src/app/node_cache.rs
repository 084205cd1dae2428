//! Starting the node cache: the kubelet's credentials, the kept answers
//! read back from `--data-dir`, the API server's reachability, the kubelet
//! port, and the tasks that follow the credentials and write the kept
//! answers to disk.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use http::Request;
use hyper::body::Incoming;
use sitegrid_cache::{Cache, LocalPod, ResourceKind};
use sitegrid_nodecache::{NodeCache, SealingKey, Storage};
use sitegrid_runtime::serve::{self, ConnLimits};
use tokio::{sync::watch, task::JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{transport, KubeletOptions, StartError, TLS_RELOAD_PERIOD};
use crate::{
    gateway::Gateway,
    http::{
        tls::{ReloadingTls, TlsFiles},
        KubeletPort,
    },
    kubelet::KubeletBranch,
    passthrough::Passthrough,
    upstream::{
        health::{self, Health, ProbeTimes, Thresholds},
        kubelet::KubeletCredentials,
    },
};

/// How long after a change the node cache's files are written: changes
/// that come together (a pod and its Secrets) are written together, and a
/// power cut loses at most this much.
const WRITE_DELAY: Duration = Duration::from_secs(1);

/// The node cache, started.
pub struct NodeCacheParts {
    /// What is kept.
    pub cache: NodeCache,
    /// The kubelet's credentials.
    pub credentials: Arc<KubeletCredentials>,
    /// The API server's reachability.
    pub health: Health,
    opts: KubeletOptions,
    tls: Arc<ReloadingTls>,
    node: Arc<str>,
}

impl NodeCacheParts {
    /// Loads what the node cache of `node` needs; `data_dir` is
    /// `--data-dir` (the kept answers go in its `node-cache/`).
    pub fn load(
        config: &kube::Config,
        node: &str,
        opts: &KubeletOptions,
        serving: Option<&TlsFiles>,
        data_dir: Option<&Path>,
    ) -> Result<NodeCacheParts, StartError> {
        let credentials = KubeletCredentials::new(config, node, &opts.certificate, &opts.key)?;
        let serving = serving.ok_or(StartError::NodeCacheWithoutTls)?;
        let tls = Arc::new(ReloadingTls::load(TlsFiles {
            cert: serving.cert.clone(),
            key: serving.key.clone(),
            client_ca: Some(opts.client_ca.clone()),
        })?);
        let key = opts.seal_key.as_deref().map(SealingKey::read).transpose()?;
        let storage = match data_dir {
            Some(dir) => Some(Storage::new(&dir.join("node-cache"), key)?),
            None => {
                warn!("no --data-dir: the node cache is kept in memory only, and a restart offline starts with nothing");
                None
            }
        };
        let cache = NodeCache::open(node, storage);
        match std::fs::read_to_string(&opts.boot_id_file) {
            Ok(boot) if !boot.trim().is_empty() => {
                cache.booted(boot.trim());
            }
            Ok(_) => {
                warn!(file = %opts.boot_id_file.display(), "the node's boot id file is empty: a reboot is not told from a restart")
            }
            Err(e) => {
                warn!(file = %opts.boot_id_file.display(), error = %e, "the node's boot id unreadable: a reboot is not told from a restart")
            }
        }
        Ok(NodeCacheParts {
            cache,
            credentials,
            health: Health::new(Thresholds::default()),
            opts: opts.clone(),
            tls,
            node: node.into(),
        })
    }

    /// The gateway's branch for the kubelet.
    pub fn branch(
        &self,
        passthrough: Passthrough,
        served: Cache,
        bookmark_interval: Duration,
        closing: CancellationToken,
    ) -> KubeletBranch {
        let node = self.node.clone();
        KubeletBranch {
            cache: self.cache.clone(),
            passthrough,
            health: self.health.clone(),
            node_known: Arc::new(move || served.store(ResourceKind::Nodes).get(&node).is_some()),
            bookmark_interval,
            closing,
            node_read: crate::kubelet::NodeRead::default(),
        }
    }

    /// What the kubelet reports of its pods while the API server is
    /// unreachable, for the served-state cache's writer (its endpoints
    /// follow the pods' new addresses: `cache/src/writer/local.rs`). The
    /// reports are let go as soon as the API server is reachable again: its
    /// view wins.
    pub fn local_reports(&self, tasks: &mut JoinSet<()>) -> watch::Receiver<Vec<LocalPod>> {
        let convert = |pods: &[sitegrid_nodecache::LocalPod]| -> Vec<LocalPod> {
            pods.iter()
                .map(|p| LocalPod {
                    uid: p.uid.clone(),
                    node: p.node.clone(),
                    ips: p.ips.clone(),
                    ready: p.ready,
                    running: p.running,
                })
                .collect()
        };
        let mut reports = self.cache.local_pods();
        let (tx, rx) = watch::channel(convert(&reports.borrow_and_update()));
        tasks.spawn(async move {
            while reports.changed().await.is_ok() {
                let pods = convert(&reports.borrow_and_update());
                if tx.send(pods).is_err() {
                    return;
                }
            }
        });
        let (cache, health) = (self.cache.clone(), self.health.clone());
        tasks.spawn(async move {
            loop {
                health.online().await;
                cache.clear_local();
                health.offline().await;
            }
        });
        rx
    }

    /// Sends the node's offline reports to the site proxy `site` names
    /// (the proxy's upstream, when the kubelet's is the API server itself),
    /// as the kubelet: see `crate::site_reports`.
    pub fn report_to_site(
        &self,
        site: &kube::Config,
        tasks: &mut JoinSet<()>,
        shutdown: CancellationToken,
    ) -> Result<(), StartError> {
        let to_site =
            KubeletCredentials::new(site, &self.node, &self.opts.certificate, &self.opts.key)?;
        tasks.spawn(to_site.reloader(TLS_RELOAD_PERIOD));
        tasks.spawn(crate::site_reports::send_reports(
            self.cache.clone(),
            to_site,
            self.node.clone(),
            shutdown,
        ));
        Ok(())
    }

    /// Starts the prober, the reloaders, the writer and the kubelet port.
    pub async fn run(
        self,
        config: kube::Config,
        gateway: Arc<Gateway>,
        limits: ConnLimits,
        grace: Duration,
        tasks: &mut JoinSet<()>,
        shutdown: CancellationToken,
    ) -> Result<SocketAddr, StartError> {
        tasks.spawn(health::probe(
            config,
            self.health.clone(),
            ProbeTimes::default(),
            shutdown.clone(),
        ));
        tasks.spawn(self.credentials.reloader(TLS_RELOAD_PERIOD));
        tasks.spawn(self.tls.reloader(TLS_RELOAD_PERIOD));
        tasks.spawn(write_behind(self.cache.clone(), shutdown.clone()));
        let listener = serve::bind(self.opts.bind).await?;
        let addr = listener.local_addr()?;
        info!(address = %addr, node = %self.node, "serving the kubelet (node cache)");
        let port = KubeletPort {
            node: self.node.clone(),
        };
        tasks.spawn(serve::serve(
            listener,
            move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(port.clone());
                super::dispatch(&gateway, req)
            },
            transport(Some(self.tls)),
            limits,
            shutdown,
            grace,
        ));
        Ok(addr)
    }
}

/// Writes the node cache's files behind its changes, at most once per
/// [`WRITE_DELAY`], off the async threads; once more when the proxy stops.
async fn write_behind(cache: NodeCache, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = cache.changed() => {}
            () = shutdown.cancelled() => break,
        }
        tokio::select! {
            () = tokio::time::sleep(WRITE_DELAY) => {}
            () = shutdown.cancelled() => {}
        }
        let c = cache.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || c.flush()).await {
            warn!(error = %e, "node cache write task failed");
        }
    }
    let c = cache.clone();
    let _ = tokio::task::spawn_blocking(move || c.flush()).await;
}
