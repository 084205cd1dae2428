//! The simulation's figures for the whole cluster, its Markdown report and
//! its chart.

use std::{fmt::Write as _, path::Path};

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::{ScaleConfig, Topology, TopologyRun};
use crate::report::machine::Machine;

/// One topology's figures for the whole cluster (the run multiplied by its
/// scale, node bytes spread over the kubelet's status period).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Whole {
    /// Node bytes per second the API server sends (status writes at the
    /// kubelet's period).
    pub node_bytes_per_s: f64,
    /// Node watch events per second.
    pub node_events_per_s: f64,
    /// Service and EndpointSlice bytes per second at the churn rate.
    pub endpoint_bytes_per_s: f64,
    /// Service and EndpointSlice watch events per second.
    pub endpoint_events_per_s: f64,
    /// Watches open at the API server.
    pub watches: f64,
    /// Bytes the API server sends when every client starts at once.
    pub cold_start_bytes: f64,
}

impl Whole {
    /// `run`'s figures for the whole cluster.
    pub fn of(run: &TopologyRun, config: &ScaleConfig) -> Whole {
        let period = config.kubelet_period.as_secs_f64();
        let window = config.window.as_secs_f64();
        let (nodes, endpoints) = (run.window.nodes(), run.window.endpoints());
        Whole {
            node_bytes_per_s: nodes.bytes as f64 * run.scale / period,
            node_events_per_s: nodes.events as f64 * run.scale / period,
            endpoint_bytes_per_s: endpoints.bytes as f64 * run.scale / window,
            endpoint_events_per_s: endpoints.events as f64 * run.scale / window,
            watches: run.window.watches() as f64 * run.scale,
            cold_start_bytes: run.sync.total_bytes as f64 * run.scale,
        }
    }

    /// Node and endpoint bytes per second.
    pub fn bytes_per_s(&self) -> f64 {
        self.node_bytes_per_s + self.endpoint_bytes_per_s
    }
}

/// `bytes` with a binary unit.
pub fn human_bytes(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", units[i])
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// `bytes` in decimal units, for a log axis whose ticks are powers of ten.
fn si_bytes(bytes: f64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1000.0 && i < units.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    let v = format!("{v:.1}");
    format!("{} {}", v.trim_end_matches(".0"), units[i])
}

/// `n` with thousands separators and `digits` decimals.
fn num(n: f64, digits: usize) -> String {
    let s = format!("{n:.digits$}");
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let (sign, int) = int.strip_prefix('-').map_or(("", int), |i| ("-", i));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if frac.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{frac}")
    }
}

/// `part / whole` as "1/23 (4.3 %)", or "—" without a whole.
fn ratio(part: f64, whole: f64) -> String {
    if whole <= 0.0 {
        return "—".into();
    }
    let r = part / whole;
    if r > 0.0 && r < 1.0 {
        format!("1/{} ({:.2} %)", num(1.0 / r, 0), r * 100.0)
    } else {
        format!("{r:.2}×")
    }
}

/// The mean and the largest of `xs`.
fn mean_max(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut n, mut sum, mut max) = (0.0, 0.0, 0.0_f64);
    for x in xs {
        n += 1.0;
        sum += x;
        max = max.max(x);
    }
    (if n > 0.0 { sum / n } else { 0.0 }, max)
}

/// The report, in Markdown; `chart` is the chart's file name beside it.
pub fn markdown(
    config: &ScaleConfig,
    runs: &[TopologyRun],
    command: &str,
    date: &str,
    chart: &str,
) -> String {
    let size = &config.size;
    let nodes = size.sites * size.nodes_per_site;
    let m = Machine::read();
    let mut s = String::new();
    let period = humantime::format_duration(config.kubelet_period);
    let window = humantime::format_duration(config.window);
    let _ = writeln!(
        s,
        "# Scale simulation: {} nodes in {} sites, {} Services ({date})\n",
        num(nodes as f64, 0),
        num(size.sites as f64, 0),
        num(size.services as f64, 0)
    );
    let _ = writeln!(
        s,
        "Command: `{command}`  \nMachine: {} ({} cores, {:.1} GiB), Linux {}\n",
        m.cpu,
        m.cores,
        m.memory_kib as f64 / 1024.0 / 1024.0,
        m.kernel
    );
    let _ = writeln!(
        s,
        "What the API server sends to keep every node's kube-proxy current: the \
         in-memory API server (`sitegrid-fakeapi`) holds the whole cluster — {} \
         kubelet-written Nodes (about 7 KB of JSON each, labelled `location=site-<i>`), \
         {} Services with `topologyKeys: [\"location\"]`, each with an EndpointSlice of {} \
         endpoints — and serves real sitegrid-proxy processes and model kube-proxies \
         (kube-proxy 1.20's reads with its defaults: its Node once, then list and watch of \
         Services and EndpointSlices with its label selector). During a {window} window \
         every Node writes its status once (one kubelet period of {period}, compressed) \
         while EndpointSlices change at {} a second (endpoint added, pod IP changed, \
         endpoint removed, readiness flipped). The API server counts every byte it sends \
         (`GET /debug/egress`).\n",
        num(nodes as f64, 0),
        num(size.services as f64, 0),
        size.endpoints_per_service,
        config.churn_rate
    );
    let _ = writeln!(
        s,
        "**How the whole cluster is extrapolated.** 5,000 proxy processes do not fit on \
         this machine, so each topology runs a sample and multiplies what the API server \
         sent it: *kube-proxy direct* and *node proxies* run {} nodes, each standing for \
         {} (every node's streams from the API server have the same size: the same \
         Services and EndpointSlices, its own Node, its own site's nodes); *site proxies* \
         run one whole site — its site proxy and all {} of its node proxies — standing \
         for each of the {} sites. Node bytes are spread over the kubelet's {period}, \
         endpoint bytes over the window. The API server here answers in JSON, as the \
         proxies ask it to; a real kube-apiserver sends kube-proxy protobuf, smaller by \
         a factor the three topologies share for endpoint data.\n",
        config.direct_clients.min(nodes),
        num(
            nodes as f64 / config.direct_clients.clamp(1, nodes) as f64,
            0
        ),
        size.nodes_per_site,
        size.sites
    );
    let _ = writeln!(s, "![API server egress per topology]({chart})\n");
    let base = runs
        .iter()
        .find(|r| r.topology == Topology::KubeProxyDirect)
        .map(|r| Whole::of(r, config));
    let _ = writeln!(s, "## API server egress, whole cluster\n");
    let _ = writeln!(
        s,
        "| topology | node status writes | endpoint changes | total | vs kube-proxy direct | watches at the API server | every client starting at once |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for r in runs {
        let w = Whole::of(r, config);
        let _ = writeln!(
            s,
            "| {} | {}/s ({} events/s) | {}/s ({} events/s) | {}/s | {} | {} | {} |",
            r.topology.name(),
            human_bytes(w.node_bytes_per_s),
            num(w.node_events_per_s, 1),
            human_bytes(w.endpoint_bytes_per_s),
            num(w.endpoint_events_per_s, 0),
            human_bytes(w.bytes_per_s()),
            base.map_or("—".into(), |b| ratio(w.bytes_per_s(), b.bytes_per_s())),
            num(w.watches, 0),
            human_bytes(w.cold_start_bytes)
        );
    }
    let _ = writeln!(s, "\n## Measured (the sample, before multiplying)\n");
    let _ = writeln!(
        s,
        "| topology | nodes run | × | synced in | node status writes | node bytes (full / metadata) | node events | endpoint bytes | endpoint events | kube-proxy events per node |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let full = r.window.of(|id, f| id == "nodes" && f == "full");
        let meta = r.window.of(|id, f| id == "nodes" && f == "metadata");
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} s | {} | {} / {} | {} | {} | {} | {} |",
            r.topology.name(),
            r.nodes,
            num(r.scale, 0),
            r.sync_time.as_secs_f64(),
            num(r.heartbeats as f64, 0),
            human_bytes(full.bytes as f64),
            human_bytes(meta.bytes as f64),
            num((full.events + meta.events) as f64, 0),
            human_bytes(r.window.endpoints().bytes as f64),
            num(r.window.endpoints().events as f64, 0),
            num(r.kube_proxies.events as f64 / r.nodes.max(1) as f64, 0)
        );
    }
    let _ = writeln!(
        s,
        "\nWindow: {window} plus 2 s for delivery; {} EndpointSlice changes in it in every topology.\n",
        runs.first().map_or(0, |r| r.slice_changes)
    );
    let _ = writeln!(s, "## The proxies\n");
    let _ = writeln!(
        s,
        "CPU is over the window, where Node status writes come {}× as often as at the \
         kubelet's period.\n",
        num(
            config.kubelet_period.as_secs_f64() / config.window.as_secs_f64(),
            0
        )
    );
    let _ = writeln!(
        s,
        "| topology | process | count | CPU, % of a core (mean / max) | RSS, MiB (mean / max) |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    let secs = |r: &TopologyRun| r.measured_for.as_secs_f64().max(1e-9);
    for r in runs {
        if let Some(p) = r.site_proxy {
            let _ = writeln!(
                s,
                "| {} | site proxy | 1 | {:.2} | {:.1} |",
                r.topology.name(),
                p.cpu_ms / 10.0 / secs(r),
                p.rss_kib as f64 / 1024.0
            );
        }
        if !r.node_proxies.is_empty() {
            let (cpu, cpu_max) = mean_max(r.node_proxies.iter().map(|p| p.cpu_ms / 10.0 / secs(r)));
            let (rss, rss_max) = mean_max(r.node_proxies.iter().map(|p| p.rss_kib as f64 / 1024.0));
            let _ = writeln!(
                s,
                "| {} | node proxy | {} | {cpu:.2} / {cpu_max:.2} | {rss:.1} / {rss_max:.1} |",
                r.topology.name(),
                r.node_proxies.len()
            );
        }
    }
    let _ = writeln!(s, "\n## Against the issue's goals\n");
    for line in goals(config, runs) {
        let _ = writeln!(s, "- {line}");
    }
    let _ = writeln!(s, "\n## Notes\n");
    for line in notes(config, runs) {
        let _ = writeln!(s, "- {line}");
    }
    s
}

/// What a reader needs to weigh the figures.
fn notes(config: &ScaleConfig, runs: &[TopologyRun]) -> Vec<String> {
    let mut out = Vec::new();
    let nodes = (config.size.sites * config.size.nodes_per_site) as f64;
    let period = config.kubelet_period.as_secs_f64();
    // The size of a whole Node as sent: the node proxies' own-Node events.
    let own = runs
        .iter()
        .map(|r| r.window.of(|id, f| id == "nodes" && f == "full"))
        .find(|f| f.events > 0);
    if let Some(own) = own {
        let node_bytes = own.bytes as f64 / own.events as f64;
        out.push(format!(
            "Before issue 16 every sitegrid-proxy watched all Nodes whole: each status write \
             ({} as sent here) went to every proxy, {} × {} writes per {} — {}/s from the \
             API server for node heartbeats alone (computed from the measured Node size, \
             not run).",
            human_bytes(node_bytes),
            num(nodes, 0),
            num(nodes, 0),
            humantime::format_duration(config.kubelet_period),
            human_bytes(nodes * nodes * node_bytes / period)
        ));
    }
    out.push(
        "kube-proxy 1.20 with its defaults does not watch Nodes (only with the ServiceTopology \
         gate does it watch its own, by name), hence no node bytes in the baseline. A node \
         proxy watches its own Node whole (kube-proxy's GET of it is answered from the cache); \
         behind a site proxy that watch passes through to the API server, one watch per node, \
         one event per status write."
            .to_owned(),
    );
    out.push(
        "Metadata-only Node events carry the whole ObjectMeta, managedFields included, as \
         kube-apiserver sends them (about 3.7 KB for these Nodes, against about 7 KB whole)."
            .to_owned(),
    );
    // What a kube-proxy hears of the window's changes: all of them from the
    // API server; behind a proxy only those its site's view shows (a change
    // elsewhere moves only the slice's generation there: no event).
    let heard: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.topology.name(),
                num(r.kube_proxies.events as f64 / r.nodes.max(1) as f64, 0)
            )
        })
        .collect();
    out.push(format!(
        "Of the window's {} EndpointSlice changes, spread over all {} sites, each kube-proxy \
         received: {}. Behind a proxy a change in another site moves only the slice's \
         metadata.generation in this site's view, which sends no event \
         (cache/src/meaning.rs).",
        runs.first().map_or(0, |r| r.slice_changes),
        config.size.sites,
        heard.join(", ")
    ));
    if let Some(site) = runs.iter().find(|r| r.topology == Topology::SiteProxies) {
        out.push(format!(
            "Sync times are for {} proxy processes sharing this machine's cores, each node \
             proxy listing every Service and EndpointSlice; requests waiting more than 30 s \
             for a proxy's first sync are answered 503 and retried. On real nodes each \
             proxy has its own CPU.",
            site.node_proxies.len() + 1
        ));
    }
    out
}

/// The goals, each as measured.
pub fn goals(config: &ScaleConfig, runs: &[TopologyRun]) -> Vec<String> {
    let mut out = Vec::new();
    let find = |t: Topology| runs.iter().find(|r| r.topology == t);
    if let Some(site) = find(Topology::SiteProxies) {
        let events = site.site_proxy_node_events.unwrap_or(0);
        let own = site.window.of(|id, f| id == "nodes" && f == "full");
        out.push(format!(
            "Node heartbeats reach no node proxy but their own node's: in the window each of the \
             site's {} nodes wrote its status once; the site proxy sent its node proxies {events} \
             node events from its cache (another node's heartbeat would show here) — **{}**. Each \
             node proxy's watch of its own Node passes through to the API server and carried \
             {} events ({}), one per node and status write, as kube-proxy's own reads of its \
             Node would.",
            site.nodes,
            if events == 0 { "met" } else { "missed" },
            own.events,
            human_bytes(own.bytes as f64)
        ));
    }
    if let Some(node) = find(Topology::NodeProxies) {
        let meta = node.window.of(|id, f| id == "nodes" && f == "metadata");
        out.push(format!(
            "Without site proxies each node proxy receives its own site's status writes as \
             metadata and drops them: {} per node proxy per kubelet period ({} events).",
            human_bytes(meta.bytes as f64 / node.nodes.max(1) as f64),
            num(meta.events as f64 / node.nodes.max(1) as f64, 1)
        ));
    }
    if let (Some(node), Some(site)) = (find(Topology::NodeProxies), find(Topology::SiteProxies)) {
        let (n, s) = (Whole::of(node, config), Whole::of(site, config));
        let goal = 1.0 / config.size.nodes_per_site as f64;
        let got = if n.endpoint_bytes_per_s > 0.0 {
            s.endpoint_bytes_per_s / n.endpoint_bytes_per_s
        } else {
            0.0
        };
        out.push(format!(
            "Endpoint egress divided by the nodes per site ({}): site proxies send {}/s against \
             {}/s with node proxies alone, {} — **{}**.",
            config.size.nodes_per_site,
            human_bytes(s.endpoint_bytes_per_s),
            human_bytes(n.endpoint_bytes_per_s),
            ratio(s.endpoint_bytes_per_s, n.endpoint_bytes_per_s),
            if got <= goal * 1.05 { "met" } else { "missed" }
        ));
    }
    if let (Some(base), Some(site)) = (find(Topology::KubeProxyDirect), find(Topology::SiteProxies))
    {
        let (b, s) = (Whole::of(base, config), Whole::of(site, config));
        out.push(format!(
            "Against kube-proxy talking to the API server directly, site proxies cut the API \
             server's egress from {}/s to {}/s ({}) and its watches from {} to {}.",
            human_bytes(b.bytes_per_s()),
            human_bytes(s.bytes_per_s()),
            ratio(s.bytes_per_s(), b.bytes_per_s()),
            num(b.watches, 0),
            num(s.watches, 0)
        ));
    }
    out
}

/// Draws the API server's egress per topology (node status and endpoint
/// bytes per second, log scale) into `path`.
pub fn chart(path: &Path, config: &ScaleConfig, runs: &[TopologyRun]) -> Result<()> {
    draw(path, config, runs).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

/// One series of bars: label, colour, value, offset in its category.
type Bars = (&'static str, RGBColor, fn(&Whole) -> f64, f64);

fn draw(
    path: &Path,
    config: &ScaleConfig,
    runs: &[TopologyRun],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let wholes: Vec<Whole> = runs.iter().map(|r| Whole::of(r, config)).collect();
    let values = wholes
        .iter()
        .flat_map(|w| [w.node_bytes_per_s, w.endpoint_bytes_per_s]);
    let hi = values.clone().fold(1.0, f64::max);
    let lo = values
        .filter(|v| *v > 0.0)
        .fold(hi, f64::min)
        .min(hi / 10.0);
    let n = runs.len().max(1);
    let names: Vec<&str> = runs.iter().map(|r| r.topology.name()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "API server egress, {} nodes in {} sites (log scale)",
                config.size.sites * config.size.nodes_per_site,
                config.size.sites
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..n as f64, (lo / 2.0..hi * 3.0).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 {
                names.get(i).map_or(String::new(), |s| (*s).to_owned())
            } else {
                String::new()
            }
        })
        .y_desc("API server egress")
        .y_label_formatter(&|v| format!("{}/s", si_bytes(*v)))
        .label_style(("sans-serif", 14))
        .draw()?;
    let series: [Bars; 2] = [
        (
            "node status writes",
            RGBColor(230, 140, 60),
            |w| w.node_bytes_per_s,
            0.12,
        ),
        (
            "endpoint changes",
            RGBColor(50, 110, 200),
            |w| w.endpoint_bytes_per_s,
            0.52,
        ),
    ];
    for (label, color, pick, offset) in series {
        let bars: Vec<Rectangle<(f64, f64)>> = wholes
            .iter()
            .enumerate()
            .filter(|(_, w)| pick(w) > 0.0)
            .map(|(i, w)| {
                let x = i as f64 + offset;
                Rectangle::new([(x, lo / 2.0), (x + 0.36, pick(w))], color.filled())
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(num(1234567.0, 0), "1,234,567");
        assert_eq!(num(999.0, 1), "999.0");
        assert_eq!(num(-1500.25, 2), "-1,500.25");
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
        assert_eq!(ratio(1.0, 50.0), "1/50 (2.00 %)");
        assert_eq!(ratio(2.0, 1.0), "2.00×");
        assert_eq!(ratio(1.0, 0.0), "—");
        assert_eq!(si_bytes(1e9), "1 GB");
        assert_eq!(si_bytes(2.5e5), "250 kB");
        assert_eq!(si_bytes(10.0), "10 B");
    }
}
