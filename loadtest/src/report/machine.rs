//! The machine a report ran on, from `/proc` (Linux only; "unknown" elsewhere).

use std::fs;

/// CPU, memory and kernel of this host.
#[derive(Debug, Clone)]
pub struct Machine {
    /// `model name` of the first CPU.
    pub cpu: String,
    /// The host's CPUs (not this process's: the report pins itself to
    /// some when it gives the proxy a CPU of its own).
    pub cores: usize,
    /// `MemTotal`, in KiB.
    pub memory_kib: u64,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
}

impl Machine {
    /// Reads this host's.
    pub fn read() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            cpu: field(&cpuinfo, "model name").unwrap_or_else(|| "unknown".into()),
            cores: match processors(&cpuinfo) {
                0 => std::thread::available_parallelism().map_or(0, |n| n.get()),
                n => n,
            },
            memory_kib: field(&meminfo, "MemTotal")
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "unknown".into(), |s| s.trim().to_owned()),
        }
    }
}

/// The CPUs `/proc/cpuinfo` lists.
fn processors(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter(|l| {
            l.split_once(':')
                .is_some_and(|(k, _)| k.trim() == "processor")
        })
        .count()
}

/// The value of `name: value` in a `/proc` text file.
fn field(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_fields() {
        let text = "processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\n";
        assert_eq!(
            field(text, "model name").as_deref(),
            Some("Some CPU @ 2.0GHz")
        );
        assert_eq!(field(text, "flags"), None);
        assert_eq!(processors(text), 1);
        assert_eq!(
            processors(&format!("{text}\n{}", text.replace('0', "1"))),
            2
        );
    }
}
