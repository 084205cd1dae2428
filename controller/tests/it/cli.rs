//! The binary's command line: help, bad flags and unusable files exit with
//! one clear line; the operator endpoints answer while it starts.

use sitegrid_fakeapi::testing::{command, error_lines, Ran};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = "sitegrid-controller";

fn bin() -> Command {
    command(env!("CARGO_BIN_EXE_sitegrid-controller"), &["POD_NAME"])
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
        "--bind-address",
        "--leader-elect ",
        "--leader-elect-resource-namespace",
        "--leader-elect-resource-name",
        "--resync-period",
        "--sites",
        "--default-node-units",
        "crds",
    ] {
        assert!(out.contains(flag), "--help lacks {flag}:\n{out}");
    }
}

#[test]
fn unknown_flags_and_bad_durations_are_refused() {
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
    } = run(&["--resync-period", "often"]);
    assert_eq!(code, 2);
    assert!(err.contains("--resync-period"), "{err}");
}

#[test]
fn a_missing_kubeconfig_is_one_line_naming_it() {
    let Ran {
        code, stderr: err, ..
    } = run(&[
        "--kubeconfig",
        "/nonexistent/controller.kubeconfig",
        "--bind-address",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 1);
    let lines = error_lines(&err, BIN);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("/nonexistent/controller.kubeconfig"),
        "{err}"
    );
}

#[test]
fn renew_margin_must_be_shorter_than_the_lease() {
    let Ran {
        code, stderr: err, ..
    } = run(&[
        "--leader-elect-lease-duration=5s",
        "--leader-elect-renew-margin=10s",
    ]);
    assert_eq!(code, 1);
    assert!(
        error_lines(&err, BIN)[0].contains("--leader-elect-renew-margin"),
        "{err}"
    );
}

#[test]
fn crds_prints_the_three_grid_crds() {
    let Ran {
        code, stdout: out, ..
    } = run(&["crds"]);
    assert_eq!(code, 0);
    for name in [
        "deploymentgrids.superedge.io",
        "statefulsetgrids.superedge.io",
        "servicegrids.superedge.io",
    ] {
        assert!(out.contains(&format!("name: {name}")), "{name} missing");
    }
}

/// GET `path` on 127.0.0.1:`port`; the status code and body, or None if nothing answers.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((code, body))
}

/// Starts the controller against a loopback port nobody listens on, with
/// `extra` flags; returns (/healthz, /readyz, /metrics, /nope) statuses and the /readyz body.
fn probe_without_api_server(
    extra: &[&str],
) -> (Option<u16>, Option<u16>, Option<u16>, Option<u16>, String) {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let dir = std::env::temp_dir().join(format!(
        "sitegrid-controller-cli-{}-{}",
        std::process::id(),
        extra.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:{dead_port}'}}\n\
             users:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let ops = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = ops.local_addr().unwrap().port();
    drop(ops);
    let address = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--bind-address",
        &address,
    ];
    args.extend_from_slice(extra);
    let mut child = bin().args(&args).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut health = None;
    while Instant::now() < deadline {
        health = get(port, "/healthz").map(|(code, _)| code);
        if health.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Give a failed first attempt time to be reported.
    std::thread::sleep(Duration::from_millis(500));
    let ready = get(port, "/readyz");
    let metrics = get(port, "/metrics").map(|(code, _)| code);
    let missing = get(port, "/nope").map(|(code, _)| code);
    // Still running: an unreachable API server is waited for, not fatal.
    let alive = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(alive, "the controller exited without an API server");
    let (ready_code, ready_body) = ready.unzip();
    (
        health,
        ready_code,
        metrics,
        missing,
        ready_body.unwrap_or_default(),
    )
}

#[test]
fn without_an_api_server_it_is_alive_but_not_ready() {
    let (health, ready, metrics, missing, body) =
        probe_without_api_server(&["--leader-elect=false"]);
    assert_eq!(health, Some(200));
    assert_eq!(ready, Some(503), "ready without an API server");
    assert!(body.contains("node cache"), "{body}");
    assert_eq!(metrics, Some(200));
    assert_eq!(missing, Some(404));
}

#[test]
fn with_election_and_no_api_server_it_waits_for_the_lease() {
    let (health, ready, _, _, body) = probe_without_api_server(&[]);
    assert_eq!(health, Some(200));
    assert_eq!(ready, Some(503));
    assert!(
        body.contains("leader election (kube-system/sitegrid-controller)"),
        "{body}"
    );
}
