//! What the scenarios share: the proxy process they start, its RSS sampled
//! over time, the progress line, and the clusters they build.

use std::{io::IsTerminal, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::{anyhow, Context, Result};
use parking_lot::Mutex;
use sitegrid_fakeapi::{sample::SyntheticSize, ApiServer, ApiServerConfig, ServerHandle};
use tokio::{task::JoinHandle, time::Instant};

use super::model::RssSeries;
use crate::{client, rss_kib, wait_served, ProxyChild, PROXY_NODE};

/// A cluster size of the issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// 100 endpoints, 10 Services, 2 sites (tests and smoke runs).
    Tiny,
    /// 1k endpoints, 100 Services, 10 sites.
    S1,
    /// 10k endpoints, 1,000 Services, 100 sites.
    S2,
    /// 50k endpoints, 5,000 Services, 1,000 sites.
    S3,
}

impl Scale {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny",
            Scale::S1 => "S1",
            Scale::S2 => "S2",
            Scale::S3 => "S3",
        }
    }

    /// The synthetic cluster: 10 endpoints per Service (one EndpointSlice
    /// each), `nodes_per_site` nodes per site.
    pub fn size(self, nodes_per_site: usize) -> SyntheticSize {
        let (sites, services) = match self {
            Scale::Tiny => (2, 10),
            Scale::S1 => (10, 100),
            Scale::S2 => (100, 1_000),
            Scale::S3 => (1_000, 5_000),
        };
        SyntheticSize {
            sites,
            nodes_per_site,
            services,
            endpoints_per_service: 10,
        }
    }

    /// One line saying what it holds.
    pub fn describe(self, nodes_per_site: usize) -> String {
        let s = self.size(nodes_per_site);
        format!(
            "{}: {} endpoints in {} Services (one EndpointSlice each), {} sites × {} nodes",
            self.name(),
            s.endpoints(),
            s.services,
            s.sites,
            s.nodes_per_site
        )
    }
}

/// Watch events the upstream keeps for resume: 10 s at 2,000 changes/s
/// (the in-memory server's default of 1,000 would send lagging direct
/// watchers 410s at the highest rate; kube-apiserver's watch cache keeps
/// minutes).
const HISTORY: usize = 20_000;

/// The in-memory upstream holding a cluster, served on loopback.
pub struct Upstream {
    /// The server, to change objects.
    pub api: ApiServer,
    /// Its socket (dropping it stops serving).
    handle: Option<ServerHandle>,
    addr: SocketAddr,
}

impl Upstream {
    /// `size`'s cluster, served.
    pub async fn start(size: &SyntheticSize) -> Result<Upstream> {
        let api = ApiServer::new(ApiServerConfig {
            history: HISTORY,
            ..ApiServerConfig::default()
        });
        for obj in size.objects("v1") {
            api.try_apply(obj)
                .map_err(|s| anyhow!("loading the synthetic cluster: {s}"))?;
        }
        let handle = api.serve("127.0.0.1:0".parse()?).await?;
        let addr = handle.local_addr();
        Ok(Upstream {
            api,
            handle: Some(handle),
            addr,
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving (every connection closed, watches included) for
    /// `down`, then serves the same objects on the same address again, as
    /// kube-apiserver restarting in front of its etcd.
    pub async fn restart(&mut self, down: Duration) -> Result<()> {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
        tokio::time::sleep(down).await;
        let handle = self
            .api
            .serve(self.addr)
            .await
            .with_context(|| format!("serving again on {}", self.addr))?;
        self.handle = Some(handle);
        Ok(())
    }
}

/// The progress line on stderr: rewritten in place on a terminal, a line
/// every 5 s otherwise (a CI log).
#[derive(Debug)]
pub struct Progress {
    quiet: bool,
    terminal: bool,
    last: Mutex<Option<Instant>>,
}

impl Progress {
    /// A progress line; `quiet` prints nothing (tests).
    pub fn new(quiet: bool) -> Self {
        Progress {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            last: Mutex::new(None),
        }
    }

    /// Replaces the line.
    pub fn show(&self, msg: &str) {
        if self.quiet {
            return;
        }
        if self.terminal {
            eprint!("\r\x1b[2K{msg}");
            return;
        }
        let mut last = self.last.lock();
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
            *last = Some(Instant::now());
            eprintln!("{msg}");
        }
    }

    /// Replaces the line and keeps it.
    pub fn done(&self, msg: &str) {
        if self.quiet {
            return;
        }
        if self.terminal {
            eprintln!("\r\x1b[2K{msg}");
        } else {
            eprintln!("{msg}");
        }
    }
}

/// What every scenario gets.
pub struct Env {
    /// The sitegrid-proxy binary.
    pub proxy_bin: PathBuf,
    /// Flags added to every proxy.
    pub proxy_flags: Vec<String>,
    /// The CPU every proxy runs on alone (the report itself then runs on the others).
    pub proxy_cpu: Option<usize>,
    /// Nodes per site in the clusters.
    pub nodes_per_site: usize,
    /// The watchers ask for protobuf, as kube-proxy does (else JSON).
    pub watch_protobuf: bool,
    /// The progress line.
    pub progress: Progress,
    /// RSS series of the proxies started so far.
    pub rss: Arc<Mutex<Vec<RssSeries>>>,
    /// The run's start, the x axis of the RSS chart.
    pub started: Instant,
}

/// A proxy process: killed and its RSS sampling stopped when dropped.
pub struct ProxyProcess {
    child: ProxyChild,
    /// Where it serves.
    pub addr: SocketAddr,
    sampler: JoinHandle<()>,
}

impl ProxyProcess {
    /// Starts the proxy against `upstream`; its RSS is sampled every 100 ms
    /// into a series named `label`. Does not wait for it to serve.
    pub fn spawn(env: &Env, upstream: SocketAddr, label: &str) -> Result<ProxyProcess> {
        Self::spawn_with(env, upstream, label, &[])
    }

    /// [`ProxyProcess::spawn`] with `extra` flags after the run's own.
    pub fn spawn_with(
        env: &Env,
        upstream: SocketAddr,
        label: &str,
        extra: &[&str],
    ) -> Result<ProxyProcess> {
        Self::spawn_on(env, upstream, label, extra, env.proxy_cpu)
    }

    /// [`ProxyProcess::spawn_with`] on `cpu` alone (`None`: wherever the
    /// scheduler puts it) rather than the run's placement.
    pub fn spawn_on(
        env: &Env,
        upstream: SocketAddr,
        label: &str,
        extra: &[&str],
        cpu: Option<usize>,
    ) -> Result<ProxyProcess> {
        let mut flags = env.proxy_flags.clone();
        flags.extend(extra.iter().map(|f| (*f).to_owned()));
        let child = ProxyChild::spawn(&env.proxy_bin, upstream, Some(PROXY_NODE), &flags, cpu)
            .map_err(|e| anyhow!(e))?;
        let (pid, addr) = (child.pid(), child.addr);
        let series = {
            let mut all = env.rss.lock();
            all.push(RssSeries {
                label: label.to_owned(),
                points: Vec::new(),
            });
            all.len() - 1
        };
        let rss = Arc::clone(&env.rss);
        let started = env.started;
        let sampler = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let kib = rss_kib(pid);
                if kib == 0 {
                    continue;
                }
                let point = (started.elapsed().as_secs_f64(), kib as f64 / 1024.0);
                if let Some(s) = rss.lock().get_mut(series) {
                    s.points.push(point);
                }
            }
        });
        Ok(ProxyProcess {
            child,
            addr,
            sampler,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Waits until it serves what kube-proxy reads (EndpointSlices,
    /// Services, Nodes).
    pub async fn wait_served(&self) -> Result<()> {
        let http = client();
        for path in [
            "/apis/discovery.k8s.io/v1/endpointslices",
            "/api/v1/services",
            crate::PROXY_NODE_PATH,
        ] {
            wait_served(&http, self.addr, path)
                .await
                .map_err(|e| anyhow!("{e}"))?;
        }
        Ok(())
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        // The process itself is killed by its ProxyChild.
        self.sampler.abort();
    }
}

/// The process's peak resident set (VmHWM), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
