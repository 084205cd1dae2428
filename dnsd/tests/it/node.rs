//! The processes of a node under test: `sitegrid-dnsd`, Debian's dnsmasq
//! reading its file, and `dig` asking dnsmasq.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{free_port, scratch, tool, wait_for, Cluster};

/// A process killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `sitegrid-dnsd` for one node, writing `dir/hosts`.
pub struct Dnsd {
    pub dir: PathBuf,
    pub port: u16,
    _process: Process,
}

impl Dnsd {
    pub fn start(cluster: &Cluster, node: &str) -> Dnsd {
        let dir = scratch(node);
        let port = free_port();
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_sitegrid-dnsd"))
            .args([
                "--kubeconfig",
                cluster.kubeconfig.to_str().unwrap(),
                "--hostname",
                node,
            ])
            .args(["--hosts-file", dir.join("hosts").to_str().unwrap()])
            .args([
                "--bind-address",
                &format!("127.0.0.1:{port}"),
                "--log-level",
                "debug",
            ])
            .env_remove("NODE_NAME")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let dnsd = Dnsd {
            dir,
            port,
            _process: Process(child),
        };
        wait_for("dnsd ready", || dnsd.get("/readyz").0, |code| *code == 200);
        dnsd
    }

    /// The hosts file.
    pub fn hosts(&self) -> String {
        std::fs::read_to_string(self.dir.join("hosts")).unwrap_or_default()
    }

    /// The `IP NAME` lines of the hosts file.
    pub fn records(&self) -> Vec<String> {
        self.hosts()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }

    /// `GET path` on the operator port: status code and body (0 if unreachable).
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.port, path)
    }

    /// A series of `/metrics` (first sample whose name and labels start with `series`).
    pub fn metric(&self, series: &str) -> f64 {
        let (_, body) = self.get("/metrics");
        body.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }
}

/// `GET path` on 127.0.0.1:port with HTTP/1.1: status code and body (0 if unreachable).
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    let code = resp
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// Debian's dnsmasq serving the hosts files of `dir` (re-read on change,
/// through inotify) on 127.0.0.1 and a free port: no upstream, no
/// /etc/hosts, no DHCP, no configuration file.
pub struct Dnsmasq {
    pub port: u16,
    _process: Process,
}

impl Dnsmasq {
    pub fn start(dir: &Path) -> Dnsmasq {
        let bin = tool("dnsmasq", "dnsmasq");
        let port = free_port();
        let child = Command::new(bin)
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--pid-file",
            ])
            .arg(format!("--hostsdir={}", dir.display()))
            .args([
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
                &format!("--port={port}"),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.with_extension("dnsmasq.log")).unwrap())
            .spawn()
            .unwrap();
        let dnsmasq = Dnsmasq {
            port,
            _process: Process(child),
        };
        // Up once it answers at all (REFUSED for an unknown name is an answer).
        wait_for(
            "dnsmasq answers",
            || dnsmasq.status("probe.invalid"),
            |s| !s.is_empty(),
        );
        dnsmasq
    }

    /// The sorted A/AAAA answers for `name` (empty when it has none).
    pub fn lookup(&self, name: &str) -> Vec<String> {
        let mut ips: Vec<String> = self
            .dig(&["+short", name, "A"])
            .lines()
            .chain(self.dig(&["+short", name, "AAAA"]).lines())
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect();
        ips.sort();
        ips
    }

    /// The response code for `name` (`NOERROR`, `REFUSED`, ...; empty if no answer).
    pub fn status(&self, name: &str) -> String {
        let out = self.dig(&[name]);
        out.split("status: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or("")
            .to_owned()
    }

    fn dig(&self, args: &[&str]) -> String {
        let out = Command::new(tool("dig", "dnsutils"))
            .args([
                "@127.0.0.1",
                "-p",
                &self.port.to_string(),
                "+time=1",
                "+tries=1",
            ])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
