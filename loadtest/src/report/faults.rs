//! Faults under churn: a slow watcher among fast ones, the upstream
//! compacting its history (every watch resumed from before gets 410), and
//! the upstream restarting. Each against the proxy and, where it says
//! something, directly.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value};
use sitegrid_fakeapi::apiserver::FaultVerb;
use sitegrid_fakeapi::sample::SyntheticSize;
use tokio::time::Instant;

use super::{
    churn::{pod_ip, Churner},
    env::{Env, ProxyProcess, Scale, Upstream},
    ledger::Ledger,
    model::{BurstRow, FaultRow, Lost, Percentiles, SlowReader, Target},
    probe::SLICES,
    probe::{Probe, ProbeConfig},
    scenarios::merged,
    stamp::{stamp, unix_ns},
};

/// How long recovery may take before it is reported as not recovered.
const RECOVERY_LIMIT: Duration = Duration::from_secs(30);

/// One slow watcher reading at `bytes_per_s` among `others` fast ones on
/// the proxy, under churn at `rate` for `duration`; and the same churn
/// without it, the baseline.
pub async fn slow_reader(
    env: &Env,
    scale: Scale,
    others: usize,
    bytes_per_s: u64,
    rate: f64,
    duration: Duration,
) -> Result<SlowReader> {
    let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let proxy = ProxyProcess::spawn(env, up.addr(), "slow watcher")?;
    proxy.wait_served().await?;
    let mut churner = Churner::new(&up.api)?;
    let mut runs = Vec::new();
    for slow in [None, Some((1, bytes_per_s))] {
        let label = if slow.is_some() {
            "with"
        } else {
            "baseline, without"
        };
        let probe = Probe::start(
            ProbeConfig {
                addr: proxy.addr,
                path: SLICES.into(),
                watchers: others,
                slow,
                protobuf: env.watch_protobuf,
            },
            churner.ledger(),
        );
        probe.wait_synced(Duration::from_secs(120)).await?;
        churner
            .run(rate, duration, |sent| {
                env.progress.show(&format!(
                    "slow watcher ({label} it): {sent} changes, {} events",
                    probe.received()
                ));
            })
            .await?;
        probe.drain(Duration::from_secs(15)).await;
        runs.push(probe.stop().await?);
    }
    env.progress.done("slow watcher: done");
    let (baseline, with) = (&runs[0], &runs[1]);
    let fast: Vec<_> = with.iter().filter(|r| !r.slow).cloned().collect();
    Ok(SlowReader {
        rate: bytes_per_s,
        others,
        others_latency: Percentiles::of(&merged(&fast)),
        baseline: Percentiles::of(&merged(baseline)),
        slow_got_410: with.iter().any(|r| r.slow && r.got_410),
        lost: Lost::of(&fast),
    })
}

/// A fault played halfway through a churn.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// History compacted and watches dropped: every resume gets 410.
    Expired,
    /// The upstream stops serving for 2 s and comes back (same objects).
    Restart,
}

impl Fault {
    fn describe(self) -> &'static str {
        match self {
            Fault::Expired => "upstream 410: history compacted, watches dropped, resumes refused",
            Fault::Restart => "upstream restart (2 s down, same objects)",
        }
    }
}

/// The upstream faults, each under churn at `rate` for `duration`, with
/// `watchers` watchers on each target.
pub async fn upstream_faults(
    env: &Env,
    scale: Scale,
    watchers: usize,
    rate: f64,
    duration: Duration,
) -> Result<Vec<FaultRow>> {
    let mut up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let proxy = ProxyProcess::spawn(env, up.addr(), "upstream faults")?;
    proxy.wait_served().await?;
    let mut churner = Churner::new(&up.api)?;
    let mut rows = Vec::new();
    for fault in [Fault::Expired, Fault::Restart] {
        for target in [Target::Direct, Target::Proxy] {
            let addr = match target {
                Target::Direct => up.addr(),
                Target::Proxy => proxy.addr,
            };
            env.progress
                .show(&format!("{}: {}", fault.describe(), target.name()));
            let probe = synced_probe(env, addr, watchers, &churner).await?;
            let churn = churner.run(rate, duration, |_| {});
            let play = async {
                tokio::time::sleep(duration / 2).await;
                let at = Instant::now();
                match fault {
                    Fault::Expired => {
                        // What etcd compaction does to a client that reconnects:
                        // its resume is refused with 410. The next watches of
                        // EndpointSlices (each direct watcher's and the proxy's
                        // own) are answered 410, then every watch is dropped.
                        let reconnecting = match target {
                            Target::Direct => watchers + 1,
                            Target::Proxy => 1,
                        };
                        up.api.compact();
                        up.api.faults().fail(
                            "endpointslices",
                            FaultVerb::Watch,
                            410,
                            None,
                            reconnecting,
                        );
                        up.api.disconnect_watches();
                    }
                    Fault::Restart => up.restart(Duration::from_secs(2)).await?,
                }
                // Recovered: every watcher knows every change written, once more.
                tokio::time::sleep(Duration::from_millis(10)).await;
                let until = at + RECOVERY_LIMIT;
                while !probe.caught_up() && Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                up.api.faults().clear();
                anyhow::Ok(probe.caught_up().then(|| at.elapsed()))
            };
            let (churned, recovered) = tokio::join!(churn, play);
            churned.with_context(|| fault.describe())?;
            let recovered_in = recovered?;
            probe.drain(Duration::from_secs(15)).await;
            let results = probe.stop().await?;
            rows.push(FaultRow {
                fault: fault.describe().into(),
                target,
                relisted: results.iter().filter(|r| r.relists > 0).count(),
                watchers: results.len(),
                recovered_in,
                lost: Lost::of(&results),
            });
        }
    }
    env.progress.done("upstream faults: done");
    Ok(rows)
}

/// What the bursts scenario writes.
#[derive(Debug, Clone)]
pub struct BurstConfig {
    /// Changes written back to back.
    pub changes: u64,
    /// Rolling update: pods replaced (two changes each)...
    pub rolling_pods: u64,
    /// ...over this long.
    pub rolling_duration: Duration,
    /// The huge Endpoints: addresses in it (about 170 bytes each as JSON)...
    pub big_addresses: usize,
    /// ...changes made to it...
    pub big_changes: u64,
    /// ...at this rate a second...
    pub big_rate: f64,
    /// ...to this many watchers of Endpoints.
    pub big_watchers: usize,
}

/// Bursts, each directly and through the proxy, every change checked by
/// the probe: `changes` changes written back to back (a rolling update's
/// worth at once) to `watchers` watchers; a rolling update of
/// `rolling_pods` pods at an even pace over `rolling_duration`, in
/// EndpointSlices of 100 endpoints; and one Endpoints object of
/// `big_addresses` addresses (about 1 MB with 6,000) changed `big_changes`
/// times, its Service without topology, so the proxy serves it whole.
pub async fn bursts(
    env: &Env,
    scale: Scale,
    watchers: usize,
    config: &BurstConfig,
) -> Result<Vec<BurstRow>> {
    let mut rows = Vec::new();
    let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let proxy = ProxyProcess::spawn(env, up.addr(), "bursts")?;
    proxy.wait_served().await?;
    let mut churner = Churner::new(&up.api)?;
    let changes = config.changes;
    for target in [Target::Direct, Target::Proxy] {
        let addr = target_addr(target, &up, &proxy);
        env.progress
            .show(&format!("burst of {changes} changes: {}", target.name()));
        let probe = synced_probe(env, addr, watchers, &churner).await?;
        let at = Instant::now();
        churner.burst(changes)?;
        rows.push(
            burst_row(
                format!("{changes} changes at once"),
                target,
                changes,
                probe,
                at,
            )
            .await?,
        );
    }
    drop(proxy);

    // A rolling update: 10 Services of 100 pods, one slice each.
    let pods = config.rolling_pods;
    let size = SyntheticSize {
        sites: 10,
        nodes_per_site: env.nodes_per_site,
        services: 10,
        endpoints_per_service: 100,
    };
    let up = Upstream::start(&size).await?;
    let proxy = ProxyProcess::spawn(env, up.addr(), "rolling update")?;
    proxy.wait_served().await?;
    let mut churner = Churner::new(&up.api)?;
    let what = format!(
        "rolling update: {pods} pods in {} (slices of 100)",
        humantime::format_duration(config.rolling_duration)
    );
    for target in [Target::Direct, Target::Proxy] {
        let addr = target_addr(target, &up, &proxy);
        let probe = synced_probe(env, addr, watchers, &churner).await?;
        let at = Instant::now();
        let out = churner
            .rolling_update(pods, config.rolling_duration, |sent| {
                env.progress
                    .show(&format!("{what}: {}: {sent} changes", target.name()));
            })
            .await?;
        rows.push(burst_row(what.clone(), target, out.slice_changes, probe, at).await?);
    }
    drop(proxy);

    // One huge Endpoints object.
    let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let nodes: Vec<String> = up
        .api
        .list("nodes")
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let (service, mut endpoints) = big_endpoints(config.big_addresses, &nodes);
    up.api
        .try_apply(service)
        .map_err(|s| anyhow!("creating the huge Endpoints' Service: {s}"))?;
    let size = serde_json::to_vec(&endpoints)?.len();
    let proxy = ProxyProcess::spawn(env, up.addr(), "huge Endpoints")?;
    proxy.wait_served().await?;
    let ledger = Arc::new(Ledger::new(vec![format!("default/{BIG}")]));
    let mut seq = 0;
    let what = format!(
        "one Endpoints of {:.1} MB ({} addresses) changed at {}/s",
        size as f64 / 1e6,
        config.big_addresses,
        config.big_rate
    );
    for target in [Target::Direct, Target::Proxy] {
        let addr = target_addr(target, &up, &proxy);
        let probe = Probe::start(
            ProbeConfig {
                addr,
                path: ENDPOINTS.into(),
                watchers: config.big_watchers,
                slow: None,
                protobuf: env.watch_protobuf,
            },
            Arc::clone(&ledger),
        );
        probe.wait_synced(Duration::from_secs(120)).await?;
        let at = Instant::now();
        for i in 0..config.big_changes {
            let due = at + Duration::from_secs_f64(i as f64 / config.big_rate.max(1e-3));
            tokio::time::sleep_until(due).await;
            seq += 1;
            replace_address(&mut endpoints, seq);
            stamp(&mut endpoints, seq, unix_ns());
            ledger.record(0, seq);
            endpoints = up
                .api
                .try_apply(endpoints.clone())
                .map_err(|s| anyhow!("changing the huge Endpoints: {s}"))?;
            env.progress
                .show(&format!("{what}: {}: {} changes", target.name(), i + 1));
        }
        rows.push(burst_row(what.clone(), target, config.big_changes, probe, at).await?);
    }
    env.progress.done("bursts: done");
    Ok(rows)
}

/// The Endpoints path the huge-object burst watches.
const ENDPOINTS: &str = "/api/v1/endpoints";

/// The huge Endpoints' name (namespace `default`).
const BIG: &str = "big-endpoints";

/// Where `target` is served.
fn target_addr(target: Target, up: &Upstream, proxy: &ProxyProcess) -> std::net::SocketAddr {
    match target {
        Target::Direct => up.addr(),
        Target::Proxy => proxy.addr,
    }
}

/// Waits for `probe` to have every change (at most [`RECOVERY_LIMIT`]
/// after the last), stops it and makes the row.
async fn burst_row(
    what: String,
    target: Target,
    changes: u64,
    probe: Probe,
    at: Instant,
) -> Result<BurstRow> {
    probe.drain(RECOVERY_LIMIT).await;
    let delivered_in = probe.caught_up().then(|| at.elapsed());
    let results = probe.stop().await?;
    Ok(BurstRow {
        what,
        target,
        changes,
        watchers: results.len(),
        latency: Percentiles::of(&merged(&results)),
        delivered_in,
        lost: Lost::of(&results),
    })
}

/// A Service without topology and its Endpoints of `addresses` ready
/// addresses, each with its node (round-robin over `nodes`) and pod, as the
/// endpoints controller of Kubernetes 1.20 writes them (no cap on
/// addresses before 1.22).
fn big_endpoints(addresses: usize, nodes: &[String]) -> (Value, Value) {
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": BIG, "namespace": "default"},
        "spec": {"selector": {"app": BIG}, "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
                 "clusterIP": "10.96.250.250", "type": "ClusterIP"}
    });
    let addrs: Vec<Value> = (0..addresses)
        .map(|i| {
            let mut a = json!({
                "ip": format!("10.{}.{}.{}", 100 + i / 65_536, (i / 256) % 256, i % 256),
                "targetRef": {"kind": "Pod", "namespace": "default",
                              "name": format!("{BIG}-{i:05}"),
                              "uid": format!("00000000-0000-4000-8000-{i:012}")}
            });
            if let Some(n) = nodes.get(i % nodes.len().max(1)) {
                a["nodeName"] = json!(n);
            }
            a
        })
        .collect();
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": BIG, "namespace": "default"},
        "subsets": [{"addresses": addrs, "ports": [{"port": 8080, "protocol": "TCP"}]}]
    });
    (service, endpoints)
}

/// Change `seq` to the huge Endpoints: one pod replaced by one at a new address.
fn replace_address(endpoints: &mut Value, seq: u64) {
    if let Some(addrs) = endpoints["subsets"][0]["addresses"].as_array_mut() {
        if !addrs.is_empty() {
            let at = (seq as usize) % addrs.len();
            addrs[at]["ip"] = json!(pod_ip(seq));
        }
    }
}

/// `watchers` full-speed watchers of the EndpointSlices on `addr`, reading
/// the report's watch format, once every one has its watch open.
async fn synced_probe(
    env: &Env,
    addr: SocketAddr,
    watchers: usize,
    churner: &Churner,
) -> Result<Probe> {
    Probe::start_synced(
        addr,
        watchers,
        env.watch_protobuf,
        churner.ledger(),
        Duration::from_secs(120),
    )
    .await
}
