//! What a report run measured: plain values the Markdown, the charts and the
//! goals table are computed from.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::{machine::Machine, probe::WatcherResult};

/// Which server a figure is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The in-memory upstream, directly.
    Direct,
    /// sitegrid-proxy in front of the same upstream.
    Proxy,
}

impl Target {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Target::Direct => "direct",
            Target::Proxy => "proxy",
        }
    }
}

/// Events lost or wrong, summed over watchers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lost {
    /// Sequence numbers skipped or never received.
    pub missed: u64,
    /// Events received twice.
    pub duplicated: u64,
    /// Relists older than what the watcher had seen.
    pub stale_relists: u64,
    /// Relists after a 410.
    pub relists: u64,
    /// Changes every full-speed watcher skipped alike, summed over watchers:
    /// never sent (the server sent a later state of the object instead).
    pub coalesced: u64,
}

impl Lost {
    /// Sums `watchers`' counts. A skip in the stream that every full-speed
    /// watcher made alike (same object, from the same change to the same
    /// one) is counted as coalesced, not missed: the server never sent it.
    /// One that only some made is missed (a server that dropped an event for
    /// some of its watchers), as is everything not received at the end.
    pub fn of(watchers: &[WatcherResult]) -> Lost {
        let fast = watchers.iter().filter(|w| !w.slow).count();
        let mut alike: std::collections::HashMap<(usize, u64, u64), (usize, u64)> =
            std::collections::HashMap::new();
        for w in watchers.iter().filter(|w| !w.slow) {
            for &(id, last, got, skipped) in &w.skips {
                let e = alike.entry((id, last, got)).or_insert((0, skipped));
                e.0 += 1;
            }
        }
        let coalesced: u64 = alike
            .values()
            .filter(|&&(n, _)| fast > 1 && n == fast)
            .map(|&(n, skipped)| n as u64 * skipped)
            .sum();
        let l = watchers.iter().fold(Lost::default(), |l, w| Lost {
            missed: l.missed + w.missed,
            duplicated: l.duplicated + w.duplicated,
            stale_relists: l.stale_relists + w.stale_relists,
            relists: l.relists + u64::from(w.relists),
            coalesced: 0,
        });
        Lost {
            missed: l.missed - coalesced,
            coalesced,
            ..l
        }
    }

    /// Everything that is not a clean delivery.
    pub fn total(&self) -> u64 {
        self.missed + self.duplicated + self.stale_relists
    }
}

/// Latency percentiles, from a histogram in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    /// Samples.
    pub n: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// Largest.
    pub max: Duration,
}

impl Percentiles {
    /// Of a histogram in ns.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        let at = |q: f64| Duration::from_nanos(h.value_at_quantile(q));
        Percentiles {
            n: h.len(),
            p50: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
            max: Duration::from_nanos(h.max()),
        }
    }
}

/// Cold start: `clients` list-then-watch at once against a freshly started server.
#[derive(Debug, Clone)]
pub struct ColdRow {
    /// Clients started at once.
    pub clients: usize,
    /// Proxy or direct.
    pub target: Target,
    /// Time to synced (list done, watch open) over clients.
    pub synced: Percentiles,
    /// Clients that synced within the limit.
    pub synced_clients: usize,
    /// The proxy's peak RSS (VmHWM) in KiB; None for direct.
    pub peak_rss_kib: Option<u64>,
    /// Lost events (the cluster does not change: must be zero).
    pub lost: Lost,
}

/// Steady churn at one rate, against one target.
#[derive(Debug, Clone)]
pub struct ChurnRow {
    /// Changes per second asked for.
    pub rate: f64,
    /// Proxy or direct.
    pub target: Target,
    /// Watchers.
    pub watchers: usize,
    /// Changes written (slices and nodes).
    pub changes: u64,
    /// EndpointSlice changes (what each watcher should receive).
    pub slice_changes: u64,
    /// Events received by all watchers.
    pub events: u64,
    /// Send → arrival.
    pub latency: Percentiles,
    /// Worst lag of the writer behind its schedule.
    pub writer_behind: Duration,
    /// The proxy's CPU time during the phase, ms (for direct too: the proxy
    /// still follows the upstream, with no client of its own).
    pub proxy_cpu_ms: f64,
    /// Of it, the time in user space (the rest is the kernel's: on loopback
    /// it carries the watchers' receive path as well as the sending).
    pub proxy_user_ms: f64,
    /// The proxy's write system calls during the phase (to its watchers,
    /// nearly all: each carries what was ready for one watcher at once);
    /// None when they could not be read.
    pub proxy_writes: Option<u64>,
    /// The proxy's RSS at the end of the phase, KiB.
    pub proxy_rss_kib: u64,
    /// Lost events.
    pub lost: Lost,
}

impl ChurnRow {
    /// Proxy CPU ms per 1,000 events delivered.
    pub fn cpu_per_1000_events(&self) -> f64 {
        self.proxy_cpu_ms / self.events.max(1) as f64 * 1000.0
    }

    /// Upstream changes one core of the proxy would process a second at this
    /// phase's cost per change.
    pub fn changes_per_core_second(&self) -> f64 {
        self.changes_per_second_of(self.proxy_cpu_ms)
    }

    /// The same, counting the proxy's time in user space alone.
    pub fn user_changes_per_core_second(&self) -> f64 {
        self.changes_per_second_of(self.proxy_user_ms)
    }

    /// The proxy's write system calls per upstream change.
    pub fn writes_per_change(&self) -> Option<f64> {
        Some(self.proxy_writes? as f64 / self.changes.max(1) as f64)
    }

    /// Events delivered per write system call of the proxy.
    pub fn events_per_write(&self) -> Option<f64> {
        Some(self.events as f64 / self.proxy_writes?.max(1) as f64)
    }

    /// Its writes per change and all of its kernel time over them, as the
    /// report says it.
    pub fn write_cost(&self) -> String {
        match (self.writes_per_change(), self.kernel_us_per_write()) {
            (Some(per_change), Some(us)) => {
                format!("{per_change:.1} writes a change, {us:.1} µs of its kernel time per write")
            }
            _ => "its writes not read".into(),
        }
    }

    /// All of the proxy's time in the kernel (its reads and waits too) over
    /// its write system calls, µs each.
    pub fn kernel_us_per_write(&self) -> Option<f64> {
        Some((self.proxy_cpu_ms - self.proxy_user_ms) * 1000.0 / self.proxy_writes?.max(1) as f64)
    }

    /// The phase's changes over `cpu_ms` of CPU, per second of it.
    fn changes_per_second_of(&self, cpu_ms: f64) -> f64 {
        if cpu_ms <= 0.0 {
            return f64::INFINITY;
        }
        self.changes as f64 / (cpu_ms / 1000.0)
    }
}

/// A churn run with the proxy on one CPU alone and the load generator, the
/// in-memory API server and the watchers on the others: what the proxy costs
/// on one core, not shared with its load.
#[derive(Debug, Clone)]
pub struct OneCore {
    /// The proxy's CPU.
    pub cpu: usize,
    /// The load's CPUs.
    pub others: Vec<usize>,
    /// The run.
    pub row: ChurnRow,
}

/// The memory figures: each the median of [`Memory::starts`] proxy starts.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// Proxy starts per state.
    pub starts: usize,
    /// The proxy with one node and no Services, KiB.
    pub idle_kib: u64,
    /// With the scale's cluster loaded (kube-proxy's kinds), KiB.
    pub loaded_kib: u64,
    /// Its anonymous memory (RssAnon: heap and stacks), idle, KiB.
    pub idle_anon_kib: u64,
    /// Its anonymous memory loaded, KiB.
    pub loaded_anon_kib: u64,
    /// Endpoints in the loaded cluster.
    pub endpoints: usize,
    /// Idle watches opened.
    pub idle_watchers: usize,
    /// The RSS of the (last) loaded proxy the watches open on, before them, KiB.
    pub watched_from_kib: u64,
    /// Its RSS with them open, KiB.
    pub with_watchers_kib: u64,
}

impl Memory {
    /// KiB per 10,000 endpoints above idle.
    pub fn per_10k_endpoints_kib(&self) -> f64 {
        self.loaded_kib.saturating_sub(self.idle_kib) as f64 / (self.endpoints.max(1) as f64 / 1e4)
    }

    /// Anonymous KiB per 10,000 endpoints above idle (without the binary's
    /// pages, which move by a few hundred KiB from start to start).
    pub fn anon_per_10k_endpoints_kib(&self) -> f64 {
        self.loaded_anon_kib.saturating_sub(self.idle_anon_kib) as f64
            / (self.endpoints.max(1) as f64 / 1e4)
    }

    /// KiB per idle watcher.
    pub fn per_watcher_kib(&self) -> f64 {
        self.with_watchers_kib.saturating_sub(self.watched_from_kib) as f64
            / self.idle_watchers.max(1) as f64
    }
}

/// LIST latency of one collection at one scale.
#[derive(Debug, Clone)]
pub struct ListRow {
    /// The scale's name (S1, S2, ...).
    pub scale: String,
    /// The collection.
    pub path: String,
    /// Proxy or direct.
    pub target: Target,
    /// Body size.
    pub bytes: usize,
    /// Sequential LISTs, keep-alive, full body read.
    pub latency: Percentiles,
}

/// The slow-reader fault.
#[derive(Debug, Clone)]
pub struct SlowReader {
    /// Bytes a second the slow watcher reads.
    pub rate: u64,
    /// Full-speed watchers next to it.
    pub others: usize,
    /// Their latency with the slow one.
    pub others_latency: Percentiles,
    /// Their latency at the same churn without it (the baseline).
    pub baseline: Percentiles,
    /// The slow one was ended with 410.
    pub slow_got_410: bool,
    /// Lost by the full-speed watchers.
    pub lost: Lost,
}

/// A fault and what the watchers saw through it.
#[derive(Debug, Clone)]
pub struct FaultRow {
    /// What was done.
    pub fault: String,
    /// Proxy or direct.
    pub target: Target,
    /// Watchers that relisted.
    pub relisted: usize,
    /// Watchers in all.
    pub watchers: usize,
    /// From the fault to every watcher being up to date again.
    pub recovered_in: Option<Duration>,
    /// Lost events.
    pub lost: Lost,
}

/// A burst: many changes at once, a rolling update, or a huge object changing.
#[derive(Debug, Clone)]
pub struct BurstRow {
    /// What was written: "1000 changes at once", a rolling update, the 1 MB Endpoints.
    pub what: String,
    /// Proxy or direct.
    pub target: Target,
    /// Changes written.
    pub changes: u64,
    /// Watchers.
    pub watchers: usize,
    /// Send → arrival over all events.
    pub latency: Percentiles,
    /// From the first write to every watcher knowing every change.
    pub delivered_in: Option<Duration>,
    /// Lost events.
    pub lost: Lost,
}

/// A load tool's (k6, wrk) result, or why it was skipped.
#[derive(Debug, Clone)]
pub struct ExternalRow {
    /// Tool and script.
    pub what: String,
    /// Proxy or direct.
    pub target: Option<Target>,
    /// Its summary line, or "skipped: ...".
    pub result: String,
}

/// RSS samples of one proxy process.
#[derive(Debug, Clone)]
pub struct RssSeries {
    /// The scenario the proxy ran.
    pub label: String,
    /// (seconds since the report started, MiB).
    pub points: Vec<(f64, f64)>,
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// Which CPUs the proxy and the rest ran on, if they were pinned.
    pub placement: Option<String>,
    /// How the proxies read the in-memory upstream and the watchers their events, in sentences.
    pub upstream: String,
    /// UTC start, RFC 3339.
    pub started: String,
    /// The command line.
    pub command: String,
    /// The churn's cluster, described.
    pub churn_cluster: String,
    /// Cold starts.
    pub cold: Vec<ColdRow>,
    /// Steady churn.
    pub churn: Vec<ChurnRow>,
    /// One more churn run at the highest rate with a proxy on a CPU of its
    /// own, when the rows of `churn` shared the CPUs with their load.
    pub one_core: Option<OneCore>,
    /// The proxy's CPU profile at the highest churn rate.
    pub profile: Option<super::profile::ProfileSummary>,
    /// Memory.
    pub memory: Option<Memory>,
    /// LISTs.
    pub lists: Vec<ListRow>,
    /// Bursts.
    pub bursts: Vec<BurstRow>,
    /// Slow reader.
    pub slow: Option<SlowReader>,
    /// Faults.
    pub faults: Vec<FaultRow>,
    /// k6 and wrk.
    pub external: Vec<ExternalRow>,
    /// RSS over time.
    pub rss: Vec<RssSeries>,
    /// Scenarios that failed, with why.
    pub failures: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::{Lost, WatcherResult};

    fn watcher(slow: bool, skips: &[(usize, u64, u64, u64)], behind: u64) -> WatcherResult {
        let mut w = WatcherResult::new(slow);
        w.skips = skips.to_vec();
        w.missed = skips.iter().map(|s| s.3).sum::<u64>() + behind;
        w
    }

    #[test]
    fn skips_every_watcher_made_alike_are_coalesced_the_rest_missed() {
        let relisted = (0, 5, 9, 3);
        let watchers = [
            watcher(false, &[relisted], 0),
            watcher(false, &[relisted, (1, 2, 4, 1)], 0),
            watcher(false, &[relisted], 2),
            // The slow reader's own skips decide nothing.
            watcher(true, &[(2, 1, 8, 6)], 0),
        ];
        let lost = Lost::of(&watchers);
        assert_eq!(
            lost.coalesced, 9,
            "three watchers skipped the same 3 changes"
        );
        assert_eq!(
            lost.missed,
            1 + 2 + 6,
            "one watcher's own skip, 2 never received, the slow one's"
        );
        assert_eq!(lost.total(), 9);
        // A lone watcher's skip is never taken for coalescing.
        assert_eq!(Lost::of(&[watcher(false, &[relisted], 0)]).missed, 3);
    }
}
