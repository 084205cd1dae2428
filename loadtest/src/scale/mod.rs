//! Issue 16's simulation (`sitegrid-scale`): what the API server sends to
//! keep the edge's kube-proxies current, at 5,000 nodes in 100 sites with
//! 10,000 Services, in three topologies:
//!
//! - **kube-proxy direct** (the baseline): every node's kube-proxy lists and
//!   watches Services and EndpointSlices from the API server
//!   ([`kubeproxy::ModelKubeProxy`]).
//! - **node proxies**: a sitegrid-proxy per node between its kube-proxy and
//!   the API server.
//! - **site proxies**: per site one sitegrid-proxy (`--site-selector`)
//!   between the API server and the site's node proxies.
//!
//! The upstream is the in-memory API server holding the whole cluster, every
//! Node a realistic kubelet-written object. The simulation runs a sample of
//! each topology's clients as real processes and multiplies: the direct
//! topologies' `clients` nodes stand for every node (each node's streams
//! are the same size, whatever the node), and the chained topology runs one
//! whole site, site proxy and every node proxy of it, which stands for every
//! site. What is multiplied is measured at the API server
//! ([`sitegrid_fakeapi::Egress`]), in a window during which every Node
//! writes its status exactly once (one kubelet status period compressed into
//! the window) while EndpointSlices change at a fixed rate; node bytes are
//! then spread over the real period, endpoint bytes over the window.

pub mod kubeproxy;
pub mod output;

use std::{collections::BTreeMap, net::SocketAddr, path::PathBuf, time::Duration};

use anyhow::{anyhow, Result};
use sitegrid_fakeapi::{sample::SyntheticSize, ApiServer, Egress};
use tokio::time::Instant;

use crate::{
    client, cpu_ms, metric,
    report::{churn::Churner, env::Progress, env::Upstream},
    rss_kib, wait_served, HttpClient, ProxyChild,
};
use kubeproxy::{ModelKubeProxy, Received};

/// What to simulate.
#[derive(Debug, Clone)]
pub struct ScaleConfig {
    /// The cluster.
    pub size: SyntheticSize,
    /// Nodes run in the two direct topologies (the first in name order).
    pub direct_clients: usize,
    /// The measured window; every Node writes its status once in it.
    pub window: Duration,
    /// How often a kubelet writes its Node's status (1.20: 5 min).
    pub kubelet_period: Duration,
    /// EndpointSlice changes per second during the window.
    pub churn_rate: f64,
    /// The sitegrid-proxy binary.
    pub proxy_bin: PathBuf,
    /// How long the clients of a topology may take to sync.
    pub sync_limit: Duration,
    /// Which topologies, in order.
    pub topologies: Vec<Topology>,
}

/// How the edge reads the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Topology {
    /// kube-proxy on every node talks to the API server.
    KubeProxyDirect,
    /// A sitegrid-proxy on every node talks to the API server.
    NodeProxies,
    /// Node proxies talk to their site's proxy, which talks to the API server.
    SiteProxies,
}

impl Topology {
    /// Every topology, baseline first.
    pub const ALL: [Topology; 3] = [
        Topology::KubeProxyDirect,
        Topology::NodeProxies,
        Topology::SiteProxies,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Topology::KubeProxyDirect => "kube-proxy direct",
            Topology::NodeProxies => "node proxies",
            Topology::SiteProxies => "site proxies + node proxies",
        }
    }
}

/// Bytes and watch events (bookmarks not counted) the API server sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flow {
    /// Body bytes of lists, gets and watches.
    pub bytes: u64,
    /// Watch events.
    pub events: u64,
}

impl std::ops::AddAssign for Flow {
    fn add_assign(&mut self, rhs: Flow) {
        self.bytes += rhs.bytes;
        self.events += rhs.events;
    }
}

/// What the API server sent between two [`Egress`] snapshots, by resource
/// id and form (`full`, `metadata`, `table`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    /// Per (resource, form).
    pub flows: BTreeMap<(String, &'static str), Flow>,
    /// Watches open at the later snapshot, per (resource, form).
    pub open_watches: BTreeMap<(String, &'static str), u64>,
    /// Every body byte, other responses included.
    pub total_bytes: u64,
}

impl Sent {
    /// The difference `later − earlier`.
    pub fn between(earlier: &Egress, later: &Egress) -> Sent {
        let mut out = Sent {
            total_bytes: later.total_bytes.saturating_sub(earlier.total_bytes),
            ..Sent::default()
        };
        for (id, r) in &later.resources {
            let before = earlier.resources.get(id).cloned().unwrap_or_default();
            for (form, now, was) in [
                ("full", &r.full, &before.full),
                ("metadata", &r.metadata, &before.metadata),
                ("table", &r.table, &before.table),
            ] {
                let flow = Flow {
                    bytes: now.bytes().saturating_sub(was.bytes()),
                    events: now.watch_events.saturating_sub(was.watch_events),
                };
                if flow != Flow::default() {
                    out.flows.insert((id.clone(), form), flow);
                }
                if now.open_watches > 0 {
                    out.open_watches
                        .insert((id.clone(), form), now.open_watches);
                }
            }
        }
        out
    }

    /// The flows of the resources `pick` chooses, summed.
    pub fn of(&self, pick: impl Fn(&str, &str) -> bool) -> Flow {
        let mut sum = Flow::default();
        for ((id, form), f) in &self.flows {
            if pick(id, form) {
                sum += *f;
            }
        }
        sum
    }

    /// Nodes, in every form.
    pub fn nodes(&self) -> Flow {
        self.of(|id, _| id == "nodes")
    }

    /// Services and EndpointSlices (what kube-proxy reads of endpoint changes).
    pub fn endpoints(&self) -> Flow {
        self.of(|id, _| id == "services" || id == "endpointslices")
    }

    /// Watches open, in every resource and form.
    pub fn watches(&self) -> u64 {
        self.open_watches.values().sum()
    }
}

/// CPU and memory of one proxy process over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcFigures {
    /// CPU time used during the window (and its grace), ms.
    pub cpu_ms: f64,
    /// Resident set at the window's end, KiB.
    pub rss_kib: u64,
}

/// One topology's run.
#[derive(Debug, Clone)]
pub struct TopologyRun {
    /// Which.
    pub topology: Topology,
    /// Nodes run.
    pub nodes: usize,
    /// What the run stands for: the whole cluster is `scale` times it.
    pub scale: f64,
    /// What the API server sent from the clients' start until all synced.
    pub sync: Sent,
    /// How long that took.
    pub sync_time: Duration,
    /// What it sent in the window.
    pub window: Sent,
    /// The window's length including the grace for delivery.
    pub measured_for: Duration,
    /// Node status writes in the window.
    pub heartbeats: u64,
    /// EndpointSlice changes in the window.
    pub slice_changes: u64,
    /// The node proxies (none for the baseline).
    pub node_proxies: Vec<ProcFigures>,
    /// The site proxy (site topology only).
    pub site_proxy: Option<ProcFigures>,
    /// Node watch events the site proxy sent its node proxies in the window.
    pub site_proxy_node_events: Option<u64>,
    /// What the kube-proxies received in the window, summed.
    pub kube_proxies: Received,
}

/// CPU and RSS of `p` now, its CPU counted from `cpu_before`.
fn figures(p: &ProxyChild, cpu_before: f64) -> ProcFigures {
    ProcFigures {
        cpu_ms: cpu_ms(p.pid()) - cpu_before,
        rss_kib: rss_kib(p.pid()),
    }
}

/// The value of `series` in the proxy's /metrics, 0 when absent or unreachable.
async fn proxy_metric(http: &HttpClient, addr: SocketAddr, series: &str) -> f64 {
    use http_body_util::BodyExt;
    let Ok(uri) = format!("http://{addr}/metrics").parse() else {
        return 0.0;
    };
    let Ok(resp) = http.get(uri).await else {
        return 0.0;
    };
    let Ok(body) = resp.into_body().collect().await else {
        return 0.0;
    };
    metric(&String::from_utf8_lossy(&body.to_bytes()), series).unwrap_or(0.0)
}

/// The series of the site proxy's node watch events sent.
const NODE_EVENTS_OUT: &str = "sitegrid_proxy_watch_events_out_total{resource=\"nodes\"}";

/// The names of the cluster's nodes, in name order.
fn node_names(api: &ApiServer) -> Vec<String> {
    let mut names: Vec<String> = api
        .list("nodes")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// Runs the simulation: the cluster is loaded once, then each topology in
/// turn, its processes stopped before the next.
pub async fn run(config: &ScaleConfig, progress: &Progress) -> Result<Vec<TopologyRun>> {
    let size = &config.size;
    if size.sites == 0 || size.nodes_per_site == 0 || size.services == 0 {
        return Err(anyhow!("the cluster needs sites, nodes and Services"));
    }
    progress.show(&format!(
        "loading {} nodes in {} sites and {} Services",
        size.sites * size.nodes_per_site,
        size.sites,
        size.services
    ));
    let upstream = Upstream::start(size).await?;
    let names = node_names(&upstream.api);
    let mut churner = Churner::new(&upstream.api)?.endpoints_only();
    let mut runs = Vec::new();
    for &topology in &config.topologies {
        let run = run_topology(config, topology, &upstream, &names, &mut churner, progress).await?;
        progress.done(&format!(
            "{}: {} nodes synced in {:.1?}; in the window the API server sent {} bytes ({} node, {} endpoint)",
            topology.name(),
            run.nodes,
            run.sync_time,
            run.window.total_bytes,
            run.window.nodes().bytes,
            run.window.endpoints().bytes
        ));
        runs.push(run);
        // Let the closed watches leave the upstream's books.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(runs)
}

/// The processes and model kube-proxies of one topology (dropped in this
/// order: the site proxy last, so no node proxy loses its upstream).
struct Fleet {
    kube_proxies: Vec<ModelKubeProxy>,
    node_proxies: Vec<ProxyChild>,
    site_proxy: Option<ProxyChild>,
}

impl Fleet {
    fn received(&self) -> Received {
        self.kube_proxies
            .iter()
            .map(ModelKubeProxy::received)
            .fold(Received::default(), |a, b| a + b)
    }

    fn alive(&mut self) -> Result<()> {
        for p in self.site_proxy.iter_mut().chain(&mut self.node_proxies) {
            p.alive().map_err(|e| anyhow!(e))?;
        }
        Ok(())
    }
}

/// Starts `topology`'s clients for `nodes`; the site proxy serves before
/// its node proxies start.
async fn start_fleet(
    config: &ScaleConfig,
    topology: Topology,
    api: SocketAddr,
    nodes: &[String],
    http: &HttpClient,
) -> Result<Fleet> {
    let mut fleet = Fleet {
        site_proxy: None,
        node_proxies: Vec::new(),
        kube_proxies: Vec::new(),
    };
    let bin = &config.proxy_bin;
    // JSON from the API server, as the direct kube-proxies here read it: the
    // topologies are compared on the same encoding (a real kube-proxy and
    // the proxies' default read protobuf, about half the bytes, alike).
    let json = "--upstream-protobuf=false".to_owned();
    let node_upstream = match topology {
        Topology::KubeProxyDirect => {
            for n in nodes {
                fleet.kube_proxies.push(ModelKubeProxy::start(http, api, n));
            }
            return Ok(fleet);
        }
        Topology::NodeProxies => api,
        Topology::SiteProxies => {
            let site = ProxyChild::spawn(
                bin,
                api,
                None,
                &[
                    format!("--site-selector=location={}", site_of(&nodes[0])),
                    "--anonymous-passthrough=all".into(),
                    json.clone(),
                ],
                None,
            )
            .map_err(|e| anyhow!(e))?;
            let addr = site.addr;
            fleet.site_proxy = Some(site);
            wait_served(http, addr, "/api/v1/services")
                .await
                .map_err(|e| anyhow!("the site proxy: {e}"))?;
            addr
        }
    };
    for n in nodes {
        let p = ProxyChild::spawn(
            bin,
            node_upstream,
            Some(n),
            std::slice::from_ref(&json),
            None,
        )
        .map_err(|e| anyhow!(e))?;
        fleet
            .kube_proxies
            .push(ModelKubeProxy::start(http, p.addr, n));
        fleet.node_proxies.push(p);
    }
    Ok(fleet)
}

/// `site-3` of `site-3-node-7`.
fn site_of(node: &str) -> &str {
    node.rsplit_once("-node-").map_or(node, |(site, _)| site)
}

async fn run_topology(
    config: &ScaleConfig,
    topology: Topology,
    upstream: &Upstream,
    names: &[String],
    churner: &mut Churner,
    progress: &Progress,
) -> Result<TopologyRun> {
    let size = &config.size;
    let total_nodes = names.len();
    // The direct topologies run the first nodes; the chained one the whole first site.
    let (nodes, scale): (Vec<String>, f64) = match topology {
        Topology::SiteProxies => {
            let site = site_of(&names[0]).to_owned();
            let nodes: Vec<String> = names
                .iter()
                .filter(|n| site_of(n) == site)
                .cloned()
                .collect();
            (nodes, size.sites as f64)
        }
        _ => {
            let k = config.direct_clients.clamp(1, total_nodes);
            (names[..k].to_vec(), total_nodes as f64 / k as f64)
        }
    };
    let http = client();
    let api = &upstream.api;
    let before = api.egress();
    let started = Instant::now();
    let mut fleet = start_fleet(config, topology, upstream.addr(), &nodes, &http).await?;
    loop {
        fleet.alive()?;
        let synced = fleet.kube_proxies.iter().filter(|k| k.synced()).count();
        progress.show(&format!(
            "{}: {synced}/{} kube-proxies synced, {:.0?}",
            topology.name(),
            nodes.len(),
            started.elapsed()
        ));
        if synced == nodes.len() {
            break;
        }
        if started.elapsed() > config.sync_limit {
            return Err(anyhow!(
                "{}: {synced} of {} kube-proxies synced within {:?}",
                topology.name(),
                nodes.len(),
                config.sync_limit
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sync_time = started.elapsed();
    // Settle: the proxies' own first bookmarks and lists behind them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let at_start = api.egress();
    let cpu0: Vec<f64> = fleet.node_proxies.iter().map(|p| cpu_ms(p.pid())).collect();
    let site_cpu0 = fleet.site_proxy.as_ref().map(|p| cpu_ms(p.pid()));
    let site_events0 = match &fleet.site_proxy {
        Some(p) => Some(proxy_metric(&http, p.addr, NODE_EVENTS_OUT).await),
        None => None,
    };
    let received0 = fleet.received();
    let window_start = Instant::now();
    let shown = progress;
    let (heartbeats, churn) = tokio::join!(
        api.status_period(config.window),
        churner.run(config.churn_rate, config.window, |sent| {
            shown.show(&format!(
                "{}: window {:.0?}/{:.0?}, {sent} EndpointSlice changes",
                topology.name(),
                window_start.elapsed(),
                config.window
            ));
        })
    );
    let churn = churn?;
    // Grace for the last changes to reach everyone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    fleet.alive()?;
    let measured_for = window_start.elapsed();
    let at_end = api.egress();
    let site_proxy_node_events = match (&fleet.site_proxy, site_events0) {
        (Some(p), Some(e0)) => {
            Some((proxy_metric(&http, p.addr, NODE_EVENTS_OUT).await - e0).max(0.0) as u64)
        }
        _ => None,
    };
    let run = TopologyRun {
        topology,
        nodes: nodes.len(),
        scale,
        sync: Sent::between(&before, &at_start),
        sync_time,
        window: Sent::between(&at_start, &at_end),
        measured_for,
        heartbeats,
        slice_changes: churn.slice_changes,
        node_proxies: fleet
            .node_proxies
            .iter()
            .zip(&cpu0)
            .map(|(p, c)| figures(p, *c))
            .collect(),
        site_proxy: fleet
            .site_proxy
            .as_ref()
            .zip(site_cpu0)
            .map(|(p, c)| figures(p, c)),
        site_proxy_node_events,
        kube_proxies: fleet.received() - received0,
    };
    drop(fleet);
    Ok(run)
}
