//! The binary's command line: help, bad flags and unusable paths exit with
//! one clear line; an unreachable API server keeps it up and not ready.

use std::process::{Command, Stdio};

use crate::common::{free_port, scratch, wait_for};
use crate::node::{http_get, Process};
use sitegrid_fakeapi::testing::{command, Ran};

fn bin() -> Command {
    command(env!("CARGO_BIN_EXE_sitegrid-dnsd"), &["NODE_NAME"])
}

fn run(args: &[&str]) -> Ran {
    Ran::of(bin(), args)
}

#[test]
fn help_lists_the_flags_operators_set() {
    let Ran {
        code, stdout: out, ..
    } = run(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--kubeconfig",
        "--hostname",
        "--hosts-file",
        "--cluster-domain",
        "--bind-address",
        "--log-level",
        "[default: /data/edge/hosts]",
        "[default: cluster.local]",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}:\n{out}");
    }
}

#[test]
fn bad_flags_exit_2() {
    let Ran {
        code, stderr: err, ..
    } = run(&["--no-such-flag"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unexpected argument '--no-such-flag'"),
        "{err}"
    );
    let Ran {
        code, stderr: err, ..
    } = run(&["--cluster-domain", "cluster..local"]);
    assert_eq!(code, 2);
    assert!(err.contains("--cluster-domain"), "{err}");
}

#[test]
fn an_unwritable_hosts_file_is_one_line_and_exit_1() {
    let dir = scratch("cli");
    let plain = dir.join("a-file");
    std::fs::write(&plain, "").unwrap();
    for path in [dir.join("missing/hosts"), plain.join("hosts"), dir.clone()] {
        let Ran {
            code, stderr: err, ..
        } = run(&["--hosts-file", path.to_str().unwrap(), "--hostname", "bj-1"]);
        assert_eq!(code, 1, "{err}");
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("sitegrid-dnsd: "))
            .collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].contains(&format!("--hosts-file {}", path.display())),
            "{err}"
        );
    }
    assert!(!dir.join("missing").exists());
}

#[test]
fn an_unreachable_api_server_keeps_it_up_and_not_ready() {
    let dir = scratch("unreachable");
    let kubeconfig = dir.join("kubeconfig");
    // A port nobody listens on.
    let dead = free_port();
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters: [{{name: x, cluster: {{server: \"http://127.0.0.1:{dead}\"}}}}]\nusers: [{{name: x, user: {{}}}}]\ncontexts: [{{name: x, context: {{cluster: x, user: x}}}}]\ncurrent-context: x\n"),
    )
    .unwrap();
    let port = free_port();
    let mut dnsd = Process(
        bin()
            .args([
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--hostname",
                "bj-1",
            ])
            .args([
                "--hosts-file",
                dir.join("hosts").to_str().unwrap(),
                "--bind-address",
                &format!("127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Exported at 0 from the start: wait for the first error counted.
    wait_for(
        "watch errors counted",
        || http_get(port, "/metrics").1,
        |m| {
            m.lines().any(|l| {
                l.strip_prefix("sitegrid_dnsd_watch_errors_total{resource=\"nodes\"} ")
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v >= 1.0)
            })
        },
    );
    let (code, body) = http_get(port, "/readyz");
    assert_eq!(
        (code, body.as_str()),
        (503, "not ready: listing this node and the grids\n")
    );
    assert_eq!(http_get(port, "/healthz").0, 200);
    assert!(dnsd.0.try_wait().unwrap().is_none(), "dnsd exited");
    assert!(
        !dir.join("hosts").exists(),
        "no file before the API server has answered"
    );
    // SIGTERM: a clean stop.
    let pid = dnsd.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = wait_for("dnsd stops", || dnsd.0.try_wait().unwrap(), Option::is_some);
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}
