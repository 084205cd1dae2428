//! Faults under churn: a slow watcher among fast ones, the upstream
//! compacting its history (every watch resumed from before gets 410), and
//! the upstream restarting. Each against the proxy and, where it says
//! something, directly.

use std::time::Duration;

use anyhow::{Context, Result};
use sitegrid_fakeapi::apiserver::FaultVerb;
use tokio::time::Instant;

use super::{
    churn::Churner,
    env::{Env, ProxyProcess, Scale, Upstream},
    model::{BurstRow, FaultRow, Lost, Percentiles, SlowReader, Target},
    probe::{Probe, ProbeConfig},
    scenarios::{merged, SLICES},
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
            let probe =
                Probe::start_synced(addr, watchers, churner.ledger(), Duration::from_secs(120))
                    .await?;
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

/// Bursts: `changes` changes written back to back (a rolling update's
/// worth at once) to `watchers` watchers, directly and through the proxy.
pub async fn bursts(
    env: &Env,
    scale: Scale,
    watchers: usize,
    changes: u64,
) -> Result<Vec<BurstRow>> {
    let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let proxy = ProxyProcess::spawn(env, up.addr(), "bursts")?;
    proxy.wait_served().await?;
    let mut churner = Churner::new(&up.api)?;
    let mut rows = Vec::new();
    for target in [Target::Direct, Target::Proxy] {
        let addr = match target {
            Target::Direct => up.addr(),
            Target::Proxy => proxy.addr,
        };
        env.progress
            .show(&format!("burst of {changes} changes: {}", target.name()));
        let probe =
            Probe::start_synced(addr, watchers, churner.ledger(), Duration::from_secs(120)).await?;
        let at = Instant::now();
        churner.burst(changes)?;
        probe.drain(RECOVERY_LIMIT).await;
        let delivered_in = probe.caught_up().then(|| at.elapsed());
        let results = probe.stop().await?;
        rows.push(BurstRow {
            target,
            changes,
            watchers: results.len(),
            latency: Percentiles::of(&merged(&results)),
            delivered_in,
            lost: Lost::of(&results),
        });
    }
    env.progress.done("bursts: done");
    Ok(rows)
}
