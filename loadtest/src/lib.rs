//! What the load tools share: running a `sitegrid-proxy` process against an
//! upstream, waiting for it, and reading its CPU time and RSS from `/proc`.

pub mod abuse;
pub mod affinity;
pub mod report;
pub mod scale;

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};

/// The sitegrid-proxy binary: `given`, else the one next to this program.
pub fn proxy_bin(given: Option<&Path>) -> Result<PathBuf, String> {
    let bin = match given {
        Some(p) => p.to_owned(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("sitegrid-proxy"),
    };
    if !bin.exists() {
        return Err(format!(
            "{} not found: build it (cargo build --profile dist -p sitegrid-proxy) or pass --proxy-bin",
            bin.display()
        ));
    }
    Ok(bin)
}

/// An HTTP/1.1 client with a large idle pool (many watchers per host).
pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// A client for the proxy and the upstream.
pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(512)
        .build_http()
}

/// The node the load-test proxies serve (site 0's first).
pub const PROXY_NODE: &str = "site-0-node-0";

/// That node's own Node, which the proxy serves from its cache (other nodes
/// pass through to the API server).
pub const PROXY_NODE_PATH: &str = "/api/v1/nodes/site-0-node-0";

/// Starts the proxy binary `bin` for node [`PROXY_NODE`] against `upstream`
/// on a free loopback port, with `extra` flags; its snapshot goes to a
/// directory of its own unless `extra` names a `--data-dir`.
pub fn spawn_proxy(
    bin: &Path,
    upstream: &str,
    extra: &[String],
) -> Result<(Child, SocketAddr), Box<dyn std::error::Error>> {
    spawn_proxy_as(bin, upstream, Some(PROXY_NODE), extra, None)
}

/// [`spawn_proxy`] for node `hostname`; `None` gives no `--hostname` (a
/// site proxy, whose `extra` flags carry `--site-selector`), on CPU `cpu`
/// alone if one is given.
pub fn spawn_proxy_as(
    bin: &Path,
    upstream: &str,
    hostname: Option<&str>,
    extra: &[String],
    cpu: Option<usize>,
) -> Result<(Child, SocketAddr), Box<dyn std::error::Error>> {
    let port = free_port()?;
    let dir = std::env::temp_dir().join(format!("sitegrid-bench-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {upstream}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {{}}\ncurrent-context: c\n"))?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--bind-address={addr}"))
        .arg("--log-level=warn")
        .args(extra)
        .stdout(Stdio::null());
    if let Some(node) = hostname {
        cmd.arg(format!("--hostname={node}"));
    }
    if !extra.iter().any(|a| a.starts_with("--data-dir")) {
        cmd.arg(format!("--data-dir={}", dir.join("data").display()));
    }
    let mut child = cmd.spawn()?;
    if let Some(cpu) = cpu {
        if let Err(e) = affinity::pin_process(child.id(), cpu) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("pinning the proxy to CPU {cpu}: {e}").into());
        }
    }
    Ok((child, addr))
}

/// A sitegrid-proxy process, killed (and reaped) when dropped.
#[derive(Debug)]
pub struct ProxyChild {
    child: Child,
    /// Where it serves.
    pub addr: SocketAddr,
}

impl ProxyChild {
    /// [`spawn_proxy_as`], the process kept.
    pub fn spawn(
        bin: &Path,
        upstream: SocketAddr,
        hostname: Option<&str>,
        extra: &[String],
        cpu: Option<usize>,
    ) -> Result<ProxyChild, String> {
        let upstream = format!("http://{upstream}");
        let (child, addr) = spawn_proxy_as(bin, &upstream, hostname, extra, cpu)
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        Ok(ProxyChild { child, addr })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An error if the process has exited.
    pub fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("the proxy on {} exited: {status}", self.addr)),
            _ => Ok(()),
        }
    }
}

impl Drop for ProxyChild {
    fn drop(&mut self) {
        // The process may have exited already; then there is nothing to kill.
        if self.child.kill().is_ok() {
            // Reaps it; its exit status says nothing a measurement needs.
            let _reaped = self.child.wait();
        }
    }
}

pub use sitegrid_fakeapi::testing::free_port;

/// Waits until the proxy at `addr` answers a LIST of `path` (its first
/// request for a kind also starts that kind's sync).
pub async fn wait_served(
    http: &HttpClient,
    addr: SocketAddr,
    path: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..6000 {
        if let Ok(resp) = http
            .get(format!("http://{addr}{path}?limit=1").parse()?)
            .await
        {
            let ok = resp.status() == 200;
            let _ = resp.into_body().collect().await;
            if ok {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("proxy on {addr} did not serve within 60 s").into())
}

/// CPU time (user + system) the process used so far, in ms.
pub fn cpu_ms(pid: u32) -> f64 {
    let (user, system) = cpu_split_ms(pid);
    user + system
}

/// The process's CPU time so far in user space and in the kernel, ms (0 when
/// unreadable): the kernel's own accounting, which a sampling profiler
/// cannot split (its timer lands on the way back from system calls).
pub fn cpu_split_ms(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // Clock ticks are 100 per second on Linux.
    let ms = |i: usize| f.get(i).copied().unwrap_or(0.0) * 10.0;
    (ms(11), ms(12))
}

/// The write system calls the process made so far (`syscw` of
/// `/proc/<pid>/io`: `write`, `writev` and their kin, to sockets and files
/// alike), None when unreadable (no I/O accounting, another user's
/// process). A watch server's writes to its watchers are
/// nearly all of them: each carries what was ready for one watcher at once,
/// so writes per change tell how well events are batched.
pub fn write_calls(pid: u32) -> Option<u64> {
    proc_figure(pid, "io", "syscw:")
}

/// The process's resident set, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The process's anonymous resident memory (its heap and stacks, without
/// the pages of its binary and libraries), in KiB.
pub fn rss_anon_kib(pid: u32) -> u64 {
    status_kib(pid, "RssAnon:")
}

/// A KiB figure of `/proc/<pid>/status` (0 when unreadable).
fn status_kib(pid: u32, field: &str) -> u64 {
    proc_figure(pid, "status", field).unwrap_or(0)
}

/// The figure after `field` (`name:`) in `/proc/<pid>/<file>`, if readable.
fn proc_figure(pid: u32, file: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The value of `series` (its full name with labels) in a Prometheus text exposition.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    /// Every write system call the process makes is counted, whatever the
    /// other threads do (they can only add to it).
    #[test]
    fn write_calls_count_each_write_the_process_makes() {
        let pid = std::process::id();
        let path = std::env::temp_dir().join(format!("sitegrid-write-calls-{pid}"));
        let mut file = std::fs::File::create(&path).unwrap();
        let before = super::write_calls(pid).expect("the process's writes are readable");
        for _ in 0..100 {
            // An unbuffered file: one `write` each.
            file.write_all(b"x").unwrap();
        }
        let after = super::write_calls(pid).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(after >= before + 100, "{before} → {after}");
    }
}
