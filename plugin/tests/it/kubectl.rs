//! The real kubectl: it finds the plugin on PATH and runs it, and the
//! plugin's tables line up exactly as kubectl's own. A missing kubectl is a
//! failure saying so (`$KUBECTL` names another), never a skip.

use std::process::Command;

use serde_json::Value;
use sitegrid_fakeapi::kubectl::{binary, Kubectl};
use sitegrid_fakeapi::testing::Ran;
use sitegrid_plugin::table::Table;

use crate::common::{deployment_grid, site_state, Cluster, Scratch, BIN};

/// kubectl with only `dir` (holding `kubectl-sitegrid`) and the system's
/// directories on PATH, a HOME of its own, and `cluster`'s kubeconfig.
fn kubectl(dir: &Scratch, cluster: &Cluster) -> Command {
    let mut cmd = Command::new(binary());
    cmd.env_clear()
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", dir.0.display()),
        )
        .env("HOME", &dir.0)
        .env("KUBECONFIG", &cluster.kubeconfig);
    cmd
}

#[test]
fn kubectl_finds_the_plugin_on_path_and_runs_it() {
    let cluster = Cluster::two_sites();
    cluster.apply([deployment_grid(
        "default",
        "deploymentgrid-demo",
        serde_json::json!({"states": {"beijing": site_state(2), "guangzhou": site_state(2)}}),
    )]);
    let dir = Scratch::new();
    std::fs::copy(BIN, dir.0.join("kubectl-sitegrid")).unwrap();
    let listed = Ran::of(kubectl(&dir, &cluster), &["plugin", "list"]);
    assert!(
        listed
            .stdout
            .contains(&format!("{}/kubectl-sitegrid", dir.0.display())),
        "kubectl plugin list: {} {}",
        listed.stdout,
        listed.stderr
    );
    let through_kubectl = Ran::of(
        kubectl(&dir, &cluster),
        &["sitegrid", "status", "-o", "json"],
    );
    assert_eq!(through_kubectl.code, 0, "{}", through_kubectl.stderr);
    let direct = cluster.run(&["status", "-o", "json"]);
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    assert_eq!(parse(&through_kubectl.stdout), parse(&direct.stdout));
    assert_eq!(parse(&direct.stdout)["grids"][0]["readySites"], 2);
    // kubectl passes the plugin's own errors and exit status through.
    let failed = Ran::of(
        kubectl(&dir, &cluster),
        &["sitegrid", "endpoints", "nope", "--node", "bj-1"],
    );
    assert_eq!(failed.code, 1);
    assert!(
        failed.stderr.contains("error: service \"nope\" not found"),
        "{}",
        failed.stderr
    );
}

#[test]
fn tables_line_up_as_kubectls_own() {
    let cluster = Cluster::two_sites();
    // kubectl's custom columns go through the same tabwriter as every kubectl table.
    let theirs = Kubectl::new(cluster.url()).ok(&[
        "get",
        "nodes",
        "-o",
        "custom-columns=NAME:.metadata.name,LOCATION:.metadata.labels.location,RACK:.metadata.labels.rack,IP:.status.addresses[0].address",
    ]);
    let mut ours = Table::new(["name", "location", "rack", "ip"]);
    for n in &sitegrid_fakeapi::sample::WORLD.nodes {
        ours.row(vec![
            n.name.clone(),
            n.location.clone(),
            String::new(),
            n.ip.clone(),
        ]);
    }
    assert_eq!(ours.render(), theirs);
}
