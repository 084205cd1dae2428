//! The scenarios: each builds its cluster, starts its proxy, runs its load
//! and returns plain figures ([`super::model`]).

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context, Result};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use tokio::time::Instant;

use super::{
    churn::Churner,
    env::{peak_rss_kib, Env, ProxyProcess, Scale, Upstream},
    model::{ChurnRow, ColdRow, ListRow, Lost, Memory, OneCore, Percentiles, Target},
    probe::{histogram, Probe, ProbeConfig, WatcherResult, SLICES},
};
use crate::{client, cpu_split_ms, rss_anon_kib, rss_kib, write_calls};

/// How long watchers may take to list and open their watch.
const SYNC_LIMIT: Duration = Duration::from_secs(120);

/// Latencies of all watchers, merged.
pub fn merged(results: &[WatcherResult]) -> Histogram<u64> {
    let mut h = histogram();
    for r in results {
        // Same bounds on both sides (histogram()): adding cannot fail.
        h.add(&r.latency).unwrap_or_else(|_| unreachable!());
    }
    h
}

/// Cold start: for each count, that many clients list then watch at once
/// against the upstream (direct) and against a proxy started with them.
pub async fn cold_start(env: &Env, scale: Scale, clients: &[usize]) -> Result<Vec<ColdRow>> {
    let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let ledger = Churner::new(&up.api)?.ledger();
    let mut rows = Vec::new();
    for &n in clients {
        for target in [Target::Direct, Target::Proxy] {
            env.progress
                .show(&format!("cold start: {n} clients, {}", target.name()));
            let proxy = match target {
                Target::Proxy => Some(ProxyProcess::spawn(
                    env,
                    up.addr(),
                    &format!("cold start, {n} clients"),
                )?),
                Target::Direct => None,
            };
            let addr = proxy.as_ref().map_or(up.addr(), |p| p.addr);
            let probe = Probe::start(
                ProbeConfig {
                    addr,
                    path: SLICES.into(),
                    watchers: n,
                    slow: None,
                    protobuf: env.watch_protobuf,
                },
                ledger.clone(),
            );
            // A client that does not sync in time is reported as such, not as a failure.
            let _in_time = probe.wait_synced(SYNC_LIMIT).await.is_ok();
            let peak = proxy.as_ref().map(|p| peak_rss_kib(p.pid()));
            let results = probe.stop().await?;
            let mut synced = histogram();
            for r in &results {
                if let Some(d) = r.synced_after {
                    synced
                        .saturating_record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1));
                }
            }
            rows.push(ColdRow {
                clients: n,
                target,
                synced: Percentiles::of(&synced),
                synced_clients: results.iter().filter(|r| r.synced_after.is_some()).count(),
                peak_rss_kib: peak,
                lost: Lost::of(&results),
            });
        }
    }
    env.progress
        .done(&format!("cold start: {} runs done", rows.len()));
    Ok(rows)
}

/// What [`churn`] measured.
#[derive(Debug, Default)]
pub struct ChurnOutcome {
    /// Each rate, direct and through the proxy.
    pub rows: Vec<ChurnRow>,
    /// The highest rate once more with the proxy on a CPU of its own, when
    /// the run's proxies share the CPUs with their load.
    pub one_core: Option<OneCore>,
    /// The proxy's CPU profile at the highest rate.
    pub profile: Option<Profiled>,
}

/// Steady churn: for each rate, `watchers` watchers on the upstream, then on
/// the proxy, each for `duration` of changes at that rate. Then, when the
/// proxies are not pinned already ([`Env::proxy_cpu`]) and there are two
/// CPUs, the highest rate once more (after one unmeasured run to warm it)
/// with a proxy on one CPU alone and everything else on the others, which is
/// what the goal of changes per
/// CPU-second on one core is judged from. Last, the proxy's CPU profile over
/// one more run at the highest rate, on the proxy that goal is judged from.
pub async fn churn(
    env: &Env,
    scale: Scale,
    rates: &[f64],
    watchers: usize,
    duration: Duration,
) -> Result<ChurnOutcome> {
    let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
    let mut proxy = ProxyProcess::spawn(env, up.addr(), "steady churn")?;
    proxy.wait_served().await?;
    let mut churner = Churner::new(&up.api)?;
    let mut out = ChurnOutcome::default();
    let Some(highest) = rates.iter().copied().reduce(f64::max) else {
        return Ok(out);
    };
    for &rate in rates {
        let pair = direct_then_proxy(env, &mut churner, &up, &proxy, rate, watchers, duration);
        out.rows.extend(pair.await?);
    }
    let spare = match env.proxy_cpu {
        Some(_) => None,
        None => crate::affinity::spare_cpu()?,
    };
    // Kept until the profile is taken: the profiled proxy runs alone too.
    let mut left = None;
    if let Some(cpu) = spare {
        // The unpinned proxy would follow the upstream meanwhile, on the
        // load's CPUs.
        drop(proxy);
        let guard = crate::affinity::leave_cpu_for_now(cpu)
            .with_context(|| format!("moving the load off CPU {cpu}"))?;
        proxy = ProxyProcess::spawn_on(env, up.addr(), "steady churn, one core", &[], Some(cpu))?;
        proxy.wait_served().await?;
        // Measured warm, as every proxy row above is: the same rate's direct
        // phase runs first, the proxy following the upstream meanwhile. A
        // fresh proxy's first changes also grow its resume log to its bound
        // and its heap to its working size, which costs more CPU per change
        // than the steady state a long-running proxy is in
        // (loadtest/results/2026-11-27-cpu-noise.md).
        let pair = direct_then_proxy(env, &mut churner, &up, &proxy, highest, watchers, duration);
        let [_warming, row] = pair
            .await
            .with_context(|| format!("the proxy on CPU {cpu} alone"))?;
        out.one_core = Some(OneCore {
            cpu,
            others: guard.others.clone(),
            row,
        });
        left = Some(guard);
    }
    // In a run of its own after the measured ones: sampling, and
    // symbolising the samples with the binary's debug info, cost CPU and
    // memory the rows above must not include.
    let seconds = duration.as_secs().max(1);
    let task = tokio::spawn(super::profile::fetch(proxy.addr, seconds));
    churn_phase(
        env,
        &mut churner,
        &proxy,
        proxy.addr,
        Target::Proxy,
        highest,
        watchers,
        duration,
    )
    .await
    .with_context(|| format!("churn at {highest}/s for the CPU profile"))?;
    drop(left);
    out.profile = match task.await {
        Ok(Ok(raw)) => Some(Profiled {
            rate: highest,
            seconds,
            raw,
        }),
        Ok(Err(e)) => {
            env.progress
                .done(&format!("the proxy's CPU profile: {e:#}"));
            None
        }
        Err(e) => {
            env.progress.done(&format!("the proxy's CPU profile: {e}"));
            None
        }
    };
    env.progress.done(&format!(
        "steady churn: {} runs done",
        out.rows.len() + usize::from(out.one_core.is_some())
    ));
    Ok(out)
}

/// [`churn_phase`] at `rate` with the watchers on the upstream, then on the
/// proxy (which follows the upstream meanwhile).
async fn direct_then_proxy(
    env: &Env,
    churner: &mut Churner,
    up: &Upstream,
    proxy: &ProxyProcess,
    rate: f64,
    watchers: usize,
    duration: Duration,
) -> Result<[ChurnRow; 2]> {
    let mut rows = Vec::with_capacity(2);
    for (target, addr) in [(Target::Direct, up.addr()), (Target::Proxy, proxy.addr)] {
        rows.push(
            churn_phase(env, churner, proxy, addr, target, rate, watchers, duration)
                .await
                .with_context(|| format!("churn at {rate}/s, {}", target.name()))?,
        );
    }
    rows.try_into()
        .map_err(|_| anyhow::anyhow!("two phases ran, two rows"))
}

/// The proxy's CPU profile as it answered (gzip'd pprof protobuf).
#[derive(Debug, Clone)]
pub struct Profiled {
    /// The churn rate meanwhile.
    pub rate: f64,
    /// Its length.
    pub seconds: u64,
    /// The body.
    pub raw: Vec<u8>,
}

/// One phase of [`churn`].
#[allow(clippy::too_many_arguments)]
async fn churn_phase(
    env: &Env,
    churner: &mut Churner,
    proxy: &ProxyProcess,
    addr: SocketAddr,
    target: Target,
    rate: f64,
    watchers: usize,
    duration: Duration,
) -> Result<ChurnRow> {
    let label = format!("churn {rate}/s, {}", target.name());
    env.progress
        .show(&format!("{label}: {watchers} watchers listing"));
    let probe = Probe::start_synced(
        addr,
        watchers,
        env.watch_protobuf,
        churner.ledger(),
        SYNC_LIMIT,
    )
    .await?;
    let (user_before, system_before) = cpu_split_ms(proxy.pid());
    let writes_before = write_calls(proxy.pid());
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let outcome = churner
        .run(rate, duration, |sent| {
            env.progress.show(&format!(
                "{label}: {sent}/{total} changes, {} events, proxy RSS {:.1} MiB",
                probe.received(),
                rss_kib(proxy.pid()) as f64 / 1024.0
            ));
        })
        .await?;
    probe.drain(Duration::from_secs(15)).await;
    let (user, system) = cpu_split_ms(proxy.pid());
    let proxy_user_ms = user - user_before;
    let proxy_cpu_ms = proxy_user_ms + system - system_before;
    let proxy_writes = write_calls(proxy.pid())
        .zip(writes_before)
        .map(|(after, before)| after.saturating_sub(before));
    let results = probe.stop().await?;
    let latency = merged(&results);
    Ok(ChurnRow {
        rate,
        target,
        watchers,
        changes: outcome.sent,
        slice_changes: outcome.slice_changes,
        events: results.iter().map(|r| r.events).sum(),
        latency: Percentiles::of(&latency),
        writer_behind: outcome.max_behind,
        proxy_cpu_ms,
        proxy_user_ms,
        proxy_writes,
        proxy_rss_kib: rss_kib(proxy.pid()),
        lost: Lost::of(&results),
    })
}

/// Proxy starts per memory state: a start's RSS moves by a few hundred KiB
/// (which pages of the binary it touched), so each figure is a median.
const MEMORY_STARTS: usize = 3;

/// Memory: the proxy idle (one node, nothing else), with `scale`'s cluster
/// loaded, and with `idle_watchers` watches open that nothing matches; the
/// idle and loaded figures are medians of [`MEMORY_STARTS`] starts each.
pub async fn memory(env: &Env, scale: Scale, idle_watchers: usize) -> Result<Memory> {
    env.progress.show("memory: idle proxy");
    let idle = Upstream::start(&sitegrid_fakeapi::sample::SyntheticSize {
        sites: 1,
        nodes_per_site: 1,
        services: 0,
        endpoints_per_service: 0,
    })
    .await?;
    let (mut idle_rss, mut idle_anon) = (Vec::new(), Vec::new());
    for start in 1..=MEMORY_STARTS {
        let p = ProxyProcess::spawn(env, idle.addr(), &format!("memory, idle {start}"))?;
        p.wait_served().await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        idle_rss.push(rss_kib(p.pid()));
        idle_anon.push(rss_anon_kib(p.pid()));
    }
    env.progress
        .show(&format!("memory: {} loaded", scale.name()));
    let size = scale.size(env.nodes_per_site);
    let up = Upstream::start(&size).await?;
    let (mut loaded_rss, mut loaded_anon) = (Vec::new(), Vec::new());
    let mut last: Option<ProxyProcess> = None;
    for start in 1..=MEMORY_STARTS {
        // The previous start's proxy ends first: one at a time on the host.
        drop(last.take());
        let p = ProxyProcess::spawn(
            env,
            up.addr(),
            &format!("memory, {} loaded {start}", scale.name()),
        )?;
        p.wait_served().await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        loaded_rss.push(rss_kib(p.pid()));
        loaded_anon.push(rss_anon_kib(p.pid()));
        last = Some(p);
    }
    let p = last.context("no loaded proxy")?;
    let watched_from_kib = rss_kib(p.pid());
    env.progress
        .show(&format!("memory: {idle_watchers} idle watches"));
    let http = client();
    let mut open = Vec::with_capacity(idle_watchers);
    for _ in 0..idle_watchers {
        let req = hyper::Request::get(format!(
            "http://{}/api/v1/services?watch=1&labelSelector=loadtest%3Didle&allowWatchBookmarks=true",
            p.addr
        ))
        .body(Empty::<Bytes>::new())?;
        open.push(http.request(req).await.context("opening an idle watch")?);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let with_watchers_kib = rss_kib(p.pid());
    drop(open);
    env.progress.done("memory: done");
    Ok(Memory {
        starts: MEMORY_STARTS,
        idle_kib: median(&mut idle_rss),
        loaded_kib: median(&mut loaded_rss),
        idle_anon_kib: median(&mut idle_anon),
        loaded_anon_kib: median(&mut loaded_anon),
        endpoints: size.endpoints(),
        idle_watchers,
        watched_from_kib,
        with_watchers_kib,
    })
}

/// The median of `values` (the upper one of an even count; 0 when empty).
fn median(values: &mut [u64]) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// A label selector every EndpointSlice matches, different for each `i`:
/// each LIST asks a question the proxy has not answered at this version, so
/// it is made for it rather than sent as another LIST made it.
fn new_question(i: usize) -> String {
    format!("{SLICES}?labelSelector=sitegrid-loadtest-question%21%3D{i}")
}

/// LIST latency of EndpointSlices at each scale, `n` sequential requests
/// per row after 10 unmeasured ones: direct, through the proxy, and through
/// the proxy with each LIST a question of its own ([`new_question`]: what
/// the first LIST after a change costs).
pub async fn lists(env: &Env, scales: &[Scale], n: usize) -> Result<Vec<ListRow>> {
    let mut rows = Vec::new();
    for &scale in scales {
        env.progress
            .show(&format!("LIST {}: loading", scale.name()));
        let up = Upstream::start(&scale.size(env.nodes_per_site)).await?;
        let p = ProxyProcess::spawn(env, up.addr(), &format!("LIST {}", scale.name()))?;
        p.wait_served().await?;
        let http = client();
        // Each row: the target, and whether each LIST asks a new question.
        let asked = [
            (Target::Direct, up.addr(), false),
            (Target::Proxy, p.addr, false),
            (Target::Proxy, p.addr, true),
        ];
        for (target, addr, new) in asked {
            let shown = if new {
                "…?labelSelector=sitegrid-loadtest-question!=N (a new one each time)"
            } else {
                SLICES
            };
            env.progress.show(&format!(
                "LIST {}: {} × {} {shown}",
                scale.name(),
                n,
                target.name()
            ));
            let mut h = histogram();
            let mut bytes = 0;
            for i in 0..n + 10 {
                let t = Instant::now();
                let path = if new {
                    new_question(i)
                } else {
                    SLICES.to_owned()
                };
                let req = hyper::Request::get(format!("http://{addr}{path}"))
                    .body(Empty::<Bytes>::new())?;
                let resp = http.request(req).await?;
                let status = resp.status();
                let body = resp.into_body().collect().await?.to_bytes();
                if status != 200 {
                    anyhow::bail!("LIST {path} on {}: {status}", target.name());
                }
                bytes = body.len();
                if i >= 10 {
                    h.saturating_record(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
                }
            }
            rows.push(ListRow {
                scale: scale.name().into(),
                path: shown.into(),
                target,
                bytes,
                latency: Percentiles::of(&h),
            });
        }
    }
    env.progress.done("LIST: done");
    Ok(rows)
}
