//! The report as Markdown: the machine, one table per scenario, the charts,
//! and the goals table last.

use std::fmt::Write;
use std::time::Duration;

use super::{
    goals::{goals, Verdict},
    model::{ChurnRow, Lost, Report, Target},
};

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// A churn row's writes per change, and events per write; none for a
/// direct row (its watchers are not the proxy's) or when they could not be
/// read.
fn writes(c: &ChurnRow) -> String {
    match (c.target, c.writes_per_change(), c.events_per_write()) {
        (Target::Proxy, Some(per_change), Some(events)) => {
            format!("{per_change:.1} ({events:.1} events a write)")
        }
        _ => "–".into(),
    }
}

fn lost(l: &Lost) -> String {
    let mut s = format!("{} / {} / {}", l.missed, l.duplicated, l.stale_relists);
    if l.relists > 0 {
        let _ = write!(s, " ({} relists)", l.relists);
    }
    if l.coalesced > 0 {
        let _ = write!(s, " ({} coalesced)", l.coalesced);
    }
    s
}

/// Renders `r`; `charts` are the PNG file names (latency, RSS), relative to
/// the Markdown file.
pub fn render(r: &Report, charts: Option<&(String, String)>) -> String {
    let mut o = String::new();
    // Writing to a String cannot fail; the results are ignored with `let _`.
    let _ = writeln!(o, "# sitegrid-proxy benchmark report\n");
    let _ = writeln!(
        o,
        "Started {} with:\n\n```sh\n{}\n```\n",
        r.started, r.command
    );
    let m = &r.machine;
    let _ = writeln!(o, "| machine | |\n|---|---|");
    let _ = writeln!(o, "| CPU | {} |", m.cpu);
    let _ = writeln!(o, "| cores | {} |", m.cores);
    let _ = writeln!(
        o,
        "| memory | {:.1} GiB |",
        m.memory_kib as f64 / 1024.0 / 1024.0
    );
    let _ = writeln!(o, "| kernel | {} |\n", m.kernel);
    let _ = writeln!(
        o,
        "The proxy is a release `sitegrid-proxy` process for node `site-0-node-0` (site 0); \
         \"direct\" is the same request to the in-memory upstream. Both run on this host, \
         with the load generator and the watchers. Latency is from the time a change was \
         written (stamped in the object) to the arrival of its watch event. \
         Lost = missed / duplicated / stale relists; *coalesced* counts changes that every \
         watcher skipped alike, summed over watchers: the server never sent them, it sent a \
         later state of the object (a proxy relisting after its upstream watch failed does \
         that, as a relist would for a client of the API server).\n"
    );
    let _ = writeln!(o, "{}\n", r.upstream);
    if let Some(placement) = &r.placement {
        let _ = writeln!(o, "{placement}\n");
    }
    if !r.failures.is_empty() {
        let _ = writeln!(o, "## Scenarios that failed\n");
        for f in &r.failures {
            let _ = writeln!(o, "- {f}");
        }
        let _ = writeln!(o);
    }
    if !r.cold.is_empty() {
        let _ = writeln!(o, "## Cold start\n\nN clients list then watch EndpointSlices at once, against a server that has just started (the proxy syncs first).\n");
        let _ = writeln!(o, "| clients | target | synced | time to synced p50 | max | proxy peak RSS | lost |\n|---|---|---|---|---|---|---|");
        for c in &r.cold {
            let _ = writeln!(
                o,
                "| {} | {} | {}/{} | {} | {} | {} | {} |",
                c.clients,
                c.target.name(),
                c.synced_clients,
                c.clients,
                ms(c.synced.p50),
                ms(c.synced.max),
                c.peak_rss_kib.map_or("–".into(), mib),
                lost(&c.lost)
            );
        }
        let _ = writeln!(o);
    }
    if !r.churn.is_empty() {
        let _ = writeln!(o, "## Steady churn\n\n{}\n", r.churn_cluster);
        let _ = writeln!(o, "| changes/s | target | watchers | changes | events | p50 | p99 | p99.9 | max | writer behind | proxy CPU per 1,000 events | proxy writes per change | proxy RSS | lost |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for c in &r.churn {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} ms | {} | {} | {} |",
                c.rate,
                c.target.name(),
                c.watchers,
                c.changes,
                c.events,
                ms(c.latency.p50),
                ms(c.latency.p99),
                ms(c.latency.p999),
                ms(c.latency.max),
                ms(c.writer_behind),
                c.cpu_per_1000_events(),
                writes(c),
                mib(c.proxy_rss_kib),
                lost(&c.lost)
            );
        }
        let _ = writeln!(o, "\nThe proxy's CPU in a direct row is what following the upstream costs it with no watcher of its own. \
            A proxy row's writes per change are its write system calls over the changes: each carries what was \
            ready for one watcher at once (events a write), so they follow how the upstream's events bunch in \
            time as much as the proxy, and on loopback each costs the kernel the watcher's receive as well.\n");
        if let Some(one) = &r.one_core {
            let c = &one.row;
            let _ = writeln!(
                o,
                "**On one core.** The rows above share this host's CPUs between the proxy and its load. \
                 One more run at {} changes/s with a proxy of its own on CPU {} alone (warmed first by \
                 following one run at that rate, as the proxy of the rows above was by the direct row's), \
                 and the load generator, the in-memory API server and the watchers on CPU{} {}: {} changes, {} events, {:.0} ms of \
                 proxy CPU, **{:.0} changes per CPU-second**; p50 {}, p99 {}; {} lost. The goal of changes \
                 per CPU-second on one core is judged from this run. Of the proxy's CPU, {:.0} ms were in user \
                 space ({:.0} changes per user-space CPU-second) and {:.0} ms in the kernel, which on loopback \
                 carries the watchers' receive path as well as the sending.{}\n",
                c.rate,
                one.cpu,
                if one.others.len() > 1 { "s" } else { "" },
                one.others.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                c.changes,
                c.events,
                c.proxy_cpu_ms,
                c.changes_per_core_second(),
                ms(c.latency.p50),
                ms(c.latency.p99),
                lost(&c.lost),
                c.proxy_user_ms,
                c.user_changes_per_core_second(),
                c.proxy_cpu_ms - c.proxy_user_ms,
                match (c.proxy_writes, c.events_per_write()) {
                    (Some(n), Some(events)) => format!(
                        " It made {n} write system calls: {} ({events:.1} events a write; its kernel \
                         time counts its reads and waits too).",
                        c.write_cost()
                    ),
                    _ => " Its write system calls could not be read.".into(),
                },
            );
        }
        for c in r
            .churn
            .iter()
            .filter(|c| c.writer_behind > Duration::from_millis(100))
        {
            let _ = writeln!(
                o,
                "**At {} changes/s ({}) the writer fell behind its schedule by up to {}**: this host \
                 (load generator, watchers and proxy together) was saturated, so the figures of that \
                 row measure the host as much as the target.\n",
                c.rate,
                c.target.name(),
                ms(c.writer_behind)
            );
        }
    }
    if let Some((latency, rss)) = charts {
        let _ = writeln!(
            o,
            "![latency percentiles, proxy vs direct, per churn rate]({latency})\n"
        );
        let _ = writeln!(o, "![proxy RSS over the run]({rss})\n");
    }
    if let Some(p) = &r.profile {
        profile_section(&mut o, p, r.one_core.as_ref().map(|one| one.cpu));
    }
    if let Some(mem) = &r.memory {
        let _ = writeln!(
            o,
            "## Memory\n\nMedians of {} proxy starts per state. VmRSS is what the goals judge; RssAnon is its heap and stacks, without the pages of the binary and libraries, which move by a few hundred KiB from start to start.\n\n| state | VmRSS | RssAnon |\n|---|---|---|",
            mem.starts
        );
        let _ = writeln!(
            o,
            "| idle (1 node, no Services) | {} | {} |",
            mib(mem.idle_kib),
            mib(mem.idle_anon_kib)
        );
        let _ = writeln!(
            o,
            "| {} endpoints loaded (EndpointSlices, Services, Nodes) | {} | {} |",
            mem.endpoints,
            mib(mem.loaded_kib),
            mib(mem.loaded_anon_kib)
        );
        let _ = writeln!(
            o,
            "| with {} idle watches | {} | – |",
            mem.idle_watchers,
            mib(mem.with_watchers_kib)
        );
        let _ = writeln!(
            o,
            "| per 10k endpoints | {:.2} MiB | {:.2} MiB |",
            mem.per_10k_endpoints_kib() / 1024.0,
            mem.anon_per_10k_endpoints_kib() / 1024.0
        );
        let _ = writeln!(
            o,
            "| per idle watch | {:.1} KiB | – |\n",
            mem.per_watcher_kib()
        );
    }
    if !r.lists.is_empty() {
        let _ = writeln!(o, "## LIST (sequential, keep-alive, full body read)\n\n| scale | path | target | bytes | n | p50 | p99 |\n|---|---|---|---|---|---|---|");
        for l in &r.lists {
            let _ = writeln!(
                o,
                "| {} | `{}` | {} | {} | {} | {} | {} |",
                l.scale,
                l.path,
                l.target.name(),
                l.bytes,
                l.latency.n,
                ms(l.latency.p50),
                ms(l.latency.p99)
            );
        }
        let _ = writeln!(o);
    }
    if !r.bursts.is_empty() {
        let _ = writeln!(o, "## Bursts\n\n| burst | changes | target | watchers | p50 | p99 | max | all delivered in | lost |\n|---|---|---|---|---|---|---|---|---|");
        for b in &r.bursts {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                b.what,
                b.changes,
                b.target.name(),
                b.watchers,
                ms(b.latency.p50),
                ms(b.latency.p99),
                ms(b.latency.max),
                b.delivered_in.map_or("not within the limit".into(), ms),
                lost(&b.lost)
            );
        }
        let _ = writeln!(o);
    }
    if let Some(s) = &r.slow {
        let _ = writeln!(
            o,
            "## Slow watcher\n\nOne watcher reads at {} B/s among {} reading at full speed.\n",
            s.rate, s.others
        );
        let _ = writeln!(o, "| | p50 | p99 | p99.9 |\n|---|---|---|---|");
        let _ = writeln!(
            o,
            "| others, baseline (no slow watcher) | {} | {} | {} |",
            ms(s.baseline.p50),
            ms(s.baseline.p99),
            ms(s.baseline.p999)
        );
        let _ = writeln!(
            o,
            "| others, with the slow watcher | {} | {} | {} |",
            ms(s.others_latency.p50),
            ms(s.others_latency.p99),
            ms(s.others_latency.p999)
        );
        let base = s.baseline.p99.as_secs_f64();
        let within = base > 0.0 && s.others_latency.p99.as_secs_f64() <= base * 1.1;
        let _ = writeln!(
            o,
            "\nOthers' p99 within 10 % of baseline: {}. The slow watcher was ended with 410: {}. Others lost: {}.\n",
            if within { "yes" } else { "no" },
            if s.slow_got_410 { "yes" } else { "no" },
            lost(&s.lost)
        );
    }
    if !r.faults.is_empty() {
        let _ = writeln!(o, "## Faults\n\n| fault | target | watchers relisted | recovered in | lost |\n|---|---|---|---|---|");
        for f in &r.faults {
            let _ = writeln!(
                o,
                "| {} | {} | {}/{} | {} | {} |",
                f.fault,
                f.target.name(),
                f.relisted,
                f.watchers,
                f.recovered_in.map_or("not within the limit".into(), ms),
                lost(&f.lost)
            );
        }
        let _ = writeln!(o);
    }
    if !r.external.is_empty() {
        let _ = writeln!(
            o,
            "## k6 and wrk\n\n| tool | target | result |\n|---|---|---|"
        );
        for e in &r.external {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                e.what,
                e.target.map_or("–", |t| t.name()),
                e.result
            );
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "## Goals\n\n| goal | measured | proxy / direct | verdict |\n|---|---|---|---|"
    );
    for g in goals(r) {
        let verdict = match &g.verdict {
            Verdict::Met => "**met**".to_owned(),
            v => format!("**{v}**"),
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            g.goal,
            g.measured,
            g.ratio.map_or("–".into(), |x| format!("{x:.2}×")),
            verdict
        );
    }
    o
}

/// Where the proxy's CPU went at the highest churn rate.
fn profile_section(o: &mut String, p: &super::profile::ProfileSummary, cpu: Option<usize>) {
    let _ = writeln!(
        o,
        "## Where the proxy's CPU goes at {}/s\n\nIts `/debug/pprof/profile` over {} s of one more run at that rate after the measured ones{} (the profiler's own CPU and memory are in no row above): {} samples ({:.2} CPU-seconds).",
        p.rate,
        p.seconds,
        cpu.map_or(String::new(), |c| format!(", on the proxy on CPU {c} alone")),
        p.samples,
        p.samples as f64 / 100.0
    );
    if let Some(file) = &p.file {
        let _ = writeln!(
            o,
            "The profile itself: [{file}]({file}) (`go tool pprof -top {file}`, or -http)."
        );
    }
    let short = |f: &str| {
        let f = f.replace('|', "\\|");
        if f.chars().count() > 110 {
            format!("{}…", f.chars().take(110).collect::<String>())
        } else {
            f
        }
    };
    let _ = writeln!(
        o,
        "\n| on the CPU itself | % | sitegrid's code on the stack | % |\n|---|---|---|---|"
    );
    let rows = p.top_self.len().max(p.top_cumulative.len());
    for i in 0..rows {
        let cell = |v: &[super::profile::Share]| {
            v.get(i).map_or((String::new(), String::new()), |s| {
                // The file's last two parts say where (`cache/sync.rs`).
                let mut parts: Vec<&str> = s.file.rsplit('/').take(2).collect();
                parts.reverse();
                (
                    format!("`{}` ({})", short(&s.function), parts.join("/")),
                    format!("{:.1}", s.percent),
                )
            })
        };
        let (a, ap) = cell(&p.top_self);
        let (b, bp) = cell(&p.top_cumulative);
        let _ = writeln!(o, "| {a} | {ap} | {b} | {bp} |");
    }
    let _ = writeln!(o);
}
