//! Small helpers the workspace's tests share: label maps, free ports, and
//! running a binary the way an operator would, with a clean environment.

use std::{collections::BTreeMap, net::TcpListener, path::Path, process::Command};

/// A label map from `(key, value)` pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A free port on 127.0.0.1 (bound, then released for the process under test).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `binary` as an operator would start it on a fresh machine: no
/// `KUBECONFIG` nor any of `unset`, and a home directory of its own (so no
/// `~/.kube/config` of the machine running the tests is read).
pub fn command(binary: &str, unset: &[&str]) -> Command {
    let name = Path::new(binary)
        .file_name()
        .map_or_else(|| "binary".into(), |n| n.to_string_lossy().into_owned());
    let mut cmd = Command::new(binary);
    cmd.env_remove("KUBECONFIG").env(
        "HOME",
        std::env::temp_dir().join(format!("{name}-test-home")),
    );
    for var in unset {
        cmd.env_remove(var);
    }
    cmd
}

/// What a finished run printed and how it ended.
#[derive(Debug)]
pub struct Ran {
    /// The exit code (-1: killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ran {
    /// Runs `cmd` with `args` to the end.
    pub fn of(mut cmd: Command, args: &[&str]) -> Ran {
        match cmd.args(args).output() {
            Ok(out) => Ran {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            },
            Err(e) => Ran {
                code: -1,
                stdout: String::new(),
                stderr: format!("cannot run {cmd:?}: {e}"),
            },
        }
    }
}

/// The lines of `stderr` that are `binary`'s own one-line errors (`<binary>: …`).
pub fn error_lines<'a>(stderr: &'a str, binary: &str) -> Vec<&'a str> {
    let prefix = format!("{binary}: ");
    stderr.lines().filter(|l| l.starts_with(&prefix)).collect()
}

/// The two-site world served on loopback from a runtime of its own, for
/// tests that drive a binary from synchronous code. The server answers as
/// long as the runtime lives.
pub fn serve_two_sites_on_own_runtime() -> (
    tokio::runtime::Runtime,
    crate::ApiServer,
    crate::ServerHandle,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a test runtime");
    let server = crate::ApiServer::new(crate::ApiServerConfig::default());
    server.load(crate::sample::two_sites("v1"));
    let handle = runtime
        .block_on(server.serve("127.0.0.1:0".parse().expect("a loopback address")))
        .expect("serving on loopback");
    (runtime, server, handle)
}
