//! The standard process metrics every Prometheus client library exports
//! (`process_resident_memory_bytes`, `process_cpu_seconds_total`, ...), under
//! their standard names and help texts, read from `/proc/self` at scrape time.
//!
//! The collector is written here rather than taken from a crate:
//! prometheus-client has none, and the one crate that provides one for it
//! (kubert-prometheus-process) is built against an older prometheus-client
//! whose `Collector` trait is a different type from the one our registries
//! take. The `/proc` files themselves are read with the procfs crate.

use procfs::process::{LimitValue, Process};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Reads this process's figures from `/proc/self` at each scrape.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

impl ProcessCollector {
    /// A registry without a prefix holding the collector: the names are the
    /// standard ones, not the binary's (`process_…`, not `sitegrid_proxy_process_…`).
    pub(crate) fn registry() -> Registry {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        registry
    }
}

/// One scrape's figures; `None` where `/proc` could not be read.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct ProcessSample {
    /// User and system CPU time, in seconds.
    pub(crate) cpu_seconds: Option<f64>,
    /// Resident set size, in bytes.
    pub(crate) resident_bytes: Option<u64>,
    /// Virtual memory size, in bytes.
    pub(crate) virtual_bytes: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub(crate) start_time_seconds: Option<f64>,
    /// Open file descriptors.
    pub(crate) open_fds: Option<u64>,
    /// The soft limit on open file descriptors (`None` also when unlimited).
    pub(crate) max_fds: Option<u64>,
}

impl ProcessSample {
    /// Reads `/proc/self`; what cannot be read is left out (and logged at debug level).
    pub(crate) fn read() -> ProcessSample {
        let mut sample = ProcessSample::default();
        let me = match Process::myself() {
            Ok(me) => me,
            Err(err) => {
                tracing::debug!(%err, "process metrics: /proc/self");
                return sample;
            }
        };
        match me.stat() {
            Ok(stat) => {
                let ticks = procfs::ticks_per_second() as f64;
                sample.cpu_seconds = Some((stat.utime + stat.stime) as f64 / ticks);
                sample.resident_bytes = Some(stat.rss.saturating_mul(procfs::page_size()));
                sample.virtual_bytes = Some(stat.vsize);
                match procfs::boot_time_secs() {
                    Ok(boot) => {
                        sample.start_time_seconds =
                            Some(boot as f64 + stat.starttime as f64 / ticks);
                    }
                    Err(err) => tracing::debug!(%err, "process metrics: /proc/stat"),
                }
            }
            Err(err) => tracing::debug!(%err, "process metrics: /proc/self/stat"),
        }
        match me.fd_count() {
            Ok(n) => sample.open_fds = Some(n as u64),
            Err(err) => tracing::debug!(%err, "process metrics: /proc/self/fd"),
        }
        match me.limits() {
            Ok(limits) => {
                if let LimitValue::Value(n) = limits.max_open_files.soft_limit {
                    sample.max_fds = Some(n);
                }
            }
            Err(err) => tracing::debug!(%err, "process metrics: /proc/self/limits"),
        }
        sample
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = ProcessSample::read();
        if let Some(v) = s.cpu_seconds {
            ConstCounter::new(v).encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                MetricType::Counter,
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                s.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                s.virtual_bytes.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                s.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                s.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                s.max_fds.map(|v| v as f64),
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                ConstGauge::new(v).encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    MetricType::Gauge,
                )?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    fn exposition() -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &ProcessCollector::registry())
            .unwrap();
        text
    }

    fn value(text: &str, name: &str) -> f64 {
        let line = text
            .lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }

    #[test]
    fn the_standard_names_types_and_plausible_values() {
        let text = exposition();
        for (name, kind) in [
            ("process_cpu_seconds", "counter"),
            ("process_resident_memory_bytes", "gauge"),
            ("process_virtual_memory_bytes", "gauge"),
            ("process_start_time_seconds", "gauge"),
            ("process_open_fds", "gauge"),
            ("process_max_fds", "gauge"),
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name} as a {kind}:\n{text}"
            );
        }
        let rss = value(&text, "process_resident_memory_bytes");
        assert!(rss > 0.0, "{text}");
        assert!(
            value(&text, "process_virtual_memory_bytes") >= rss,
            "{text}"
        );
        let open = value(&text, "process_open_fds");
        assert!(open >= 3.0, "stdin, stdout, stderr at least: {text}");
        assert!(open <= value(&text, "process_max_fds"));
        // The soft limit as getrlimit(2) reports it (read again if another
        // test of this binary changed it meanwhile).
        let soft = || rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let (max_fds, limit) = loop {
            let (before, sample, after) = (soft(), ProcessSample::read(), soft());
            if before == after {
                break (sample.max_fds, before);
            }
        };
        assert_eq!(max_fds, limit);
        // Started before now, and not before the Unix epoch's first day.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value(&text, "process_start_time_seconds");
        assert!(
            started > 86_400.0 && started <= now + 1.0,
            "{started} vs now {now}"
        );
    }

    #[test]
    fn resident_memory_grows_with_touched_memory_and_cpu_time_with_work() {
        let before = ProcessSample::read();
        let mut block = vec![0u8; 64 << 20];
        // Touch every page so that it is resident, not just reserved.
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        let after = ProcessSample::read();
        std::hint::black_box(&block);
        let grown = after.resident_bytes.unwrap() as i64 - before.resident_bytes.unwrap() as i64;
        assert!(
            grown >= 48 << 20,
            "RSS grew by {grown} bytes for 64 MiB touched"
        );
        drop(block);

        // CPU time is counted in clock ticks: work until it moves (bounded).
        let start = ProcessSample::read().cpu_seconds.unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            if i % 1_000_000 == 0 && ProcessSample::read().cpu_seconds.unwrap() > start {
                break;
            }
        }
        std::hint::black_box(x);
        assert!(ProcessSample::read().cpu_seconds.unwrap() > start);
    }
}
