//! The binary's start-up errors: a bad flag or an unusable file exits
//! non-zero with one clear line naming the problem.

use sitegrid_fakeapi::testing::{command, error_lines, Ran};
use std::process::Command;

const BIN: &str = "sitegrid-proxy";

fn bin() -> Command {
    command(env!("CARGO_BIN_EXE_sitegrid-proxy"), &[])
}

fn run(args: &[&str]) -> Ran {
    Ran::of(bin(), args)
}

#[test]
fn an_unknown_flag_is_refused() {
    let Ran {
        code, stderr: err, ..
    } = run(&["--no-such-flag"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unexpected argument '--no-such-flag'"),
        "{err}"
    );
}

#[test]
fn a_missing_kubeconfig_names_the_file() {
    let Ran {
        code, stderr: err, ..
    } = run(&[
        "--kubeconfig",
        "/nonexistent/sitegrid.kubeconfig",
        "--bind-address",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 1);
    let lines = error_lines(&err, BIN);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("--kubeconfig /nonexistent/sitegrid.kubeconfig"),
        "{err}"
    );
}

#[test]
fn an_invalid_kubeconfig_is_one_line() {
    let path = std::env::temp_dir().join(format!(
        "sitegrid-runtime-bad-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&path, "clusters: [").unwrap();
    let Ran {
        code, stderr: err, ..
    } = run(&[
        "--kubeconfig",
        path.to_str().unwrap(),
        "--bind-address",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with(&format!("sitegrid-proxy: --kubeconfig {}", path.display())),
        "{err}"
    );
}

#[test]
fn cert_and_key_go_together() {
    let Ran {
        code, stderr: err, ..
    } = run(&["--cert-file", "/x.crt"]);
    assert_eq!(code, 2);
    assert!(err.contains("--key-file"), "{err}");
}

#[test]
fn an_unreadable_certificate_names_the_flag_and_file() {
    let dir = std::env::temp_dir().join(format!("sitegrid-runtime-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // A valid kubeconfig; the upstream is never reached because the certificate fails first.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"http://127.0.0.1:9\"}}]\n\
         contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\ncurrent-context: c\n",
    )
    .unwrap();
    let Ran {
        code, stderr: err, ..
    } = run(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--bind-address",
        "127.0.0.1:0",
        "--cert-file",
        "/nonexistent/serving.crt",
        "--key-file",
        "/nonexistent/serving.key",
    ]);
    assert_eq!(code, 1);
    let lines = error_lines(&err, BIN);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("sitegrid-proxy: --cert-file /nonexistent/serving.crt"),
        "{err}"
    );
}
