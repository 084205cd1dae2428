//! The real `kubectl` (1.32) against the server: discovery fallback,
//! client-side printing, JSON output and the write verbs. Skipped, with a
//! note, when `kubectl` is not on PATH.

mod common;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::start;
use serde_json::Value;
use sitegrid_fakeapi::ApiServerConfig;

fn kubectl_available() -> bool {
    match Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    {
        Ok(out) if out.status.success() => true,
        _ => {
            println!("note: kubectl is not on PATH; skipping the kubectl test");
            false
        }
    }
}

/// Run kubectl against `url` with a private HOME and cache; stdout on success.
async fn kubectl(url: &str, home: &PathBuf, args: &[&str]) -> String {
    kubectl_stdin(url, home, args, "").await
}

/// [`kubectl`] with `stdin` fed to the process.
async fn kubectl_stdin(url: &str, home: &PathBuf, args: &[&str], stdin: &str) -> String {
    let mut cmd = Command::new("kubectl");
    cmd.arg("--server")
        .arg(url)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(args)
        .env("HOME", home)
        .env("KUBECONFIG", home.join("kubeconfig"));
    let shown = format!("kubectl {}", args.join(" "));
    let input = stdin.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(input.as_bytes())?;
        }
        child.wait_with_output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "{shown} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn temp_home(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sitegrid-kubectl-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn kubectl_reads_and_writes() {
    if !kubectl_available() {
        return;
    }
    let h = start(ApiServerConfig::default()).await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let url = h.handle.url();
    let home = temp_home("v1");

    let svc = kubectl(&url, &home, &["get", "svc", "-A"]).await;
    let first = svc.lines().next().unwrap();
    assert!(
        first.starts_with("NAMESPACE") && first.contains("NAME"),
        "{svc}"
    );
    for name in ["kubernetes", "plain-echo", "servicegrid-demo-svc"] {
        assert!(svc.contains(name), "{name} in {svc}");
    }
    let all = kubectl(&url, &home, &["get", "svc,ep,endpointslices,nodes", "-A"]).await;
    for needle in [
        "service/servicegrid-demo-svc",
        "endpoints/plain-echo",
        "endpointslice.discovery.k8s.io/kubernetes",
        "node/gz-3",
    ] {
        assert!(all.contains(needle), "{needle} in {all}");
    }
    let json: Value = serde_json::from_str(
        &kubectl(&url, &home, &["get", "endpointslices", "-A", "-o", "json"]).await,
    )
    .unwrap();
    let items = json["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(items
        .iter()
        .all(|i| i["apiVersion"] == "discovery.k8s.io/v1"));
    let demo = items
        .iter()
        .find(|i| i["metadata"]["labels"]["kubernetes.io/service-name"] == "servicegrid-demo-svc")
        .unwrap();
    let nodes: Vec<&str> = demo["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["nodeName"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["bj-1", "bj-3", "gz-2", "gz-3"]);
    let raw: Value = serde_json::from_str(
        &kubectl(
            &url,
            &home,
            &[
                "get",
                "--raw",
                "/api/v1/namespaces/default/endpoints/plain-echo",
            ],
        )
        .await,
    )
    .unwrap();
    assert_eq!(raw["kind"], "Endpoints");
    assert_eq!(raw["subsets"][0]["addresses"].as_array().unwrap().len(), 2);

    // Writes: POST, merge PATCH, DELETE (which then GETs until the object is gone).
    // `create configmap` would send protobuf, which this server does not
    // decode; `create -f` sends JSON (and needs no OpenAPI with --validate=false).
    let manifest =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"demo"},"data":{"a":"b"}}"#;
    kubectl_stdin(
        &url,
        &home,
        &["create", "--validate=false", "-f", "-"],
        manifest,
    )
    .await;
    kubectl(&url, &home, &["label", "configmap", "demo", "site=bj"]).await;
    let cm = h.server.get("configmaps", Some("default"), "demo").unwrap();
    assert_eq!(cm["data"]["a"], "b");
    assert_eq!(cm["metadata"]["labels"]["site"], "bj");
    kubectl(&url, &home, &["delete", "configmap", "demo"]).await;
    assert!(h
        .server
        .get("configmaps", Some("default"), "demo")
        .is_none());
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn kubectl_with_v1beta1_endpointslices() {
    if !kubectl_available() {
        return;
    }
    let h = start(ApiServerConfig {
        endpointslice_version: "v1beta1",
        ..ApiServerConfig::default()
    })
    .await;
    h.server
        .load(sitegrid_fakeapi::sample::two_sites("v1beta1"));
    let home = temp_home("v1beta1");
    let json: Value = serde_json::from_str(
        &kubectl(
            &h.handle.url(),
            &home,
            &["get", "endpointslices", "-A", "-o", "json"],
        )
        .await,
    )
    .unwrap();
    let items = json["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(items
        .iter()
        .all(|i| i["apiVersion"] == "discovery.k8s.io/v1beta1"));
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn kubectl_prints_server_side_tables() {
    if !kubectl_available() {
        return;
    }
    let h = start(ApiServerConfig::default()).await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let url = h.handle.url();
    let home = temp_home("table");

    // The columns come from the server's Table; without one kubectl would
    // print only NAME and AGE.
    let ep = kubectl(&url, &home, &["get", "endpoints", "-A"]).await;
    let header: Vec<&str> = ep.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "ENDPOINTS", "AGE"], "{ep}");
    let plain = ep.lines().find(|l| l.contains("plain-echo")).unwrap();
    assert!(plain.contains(" 10.0.0.81:8080,10.0.1.33:8080 "), "{ep}");

    let nodes = kubectl(&url, &home, &["get", "nodes", "-o", "wide"]).await;
    let header: Vec<&str> = nodes.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header[..5],
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{nodes}"
    );
    assert!(header.contains(&"INTERNAL-IP"), "{nodes}");
    let _ = std::fs::remove_dir_all(&home);
}
