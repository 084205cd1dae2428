//! What the user reads when something is missing: the CRDs, the API server,
//! the kubeconfig or a context; and kubectl's kubeconfig rules.

use sitegrid_fakeapi::testing::{free_port, Ran};
use sitegrid_fakeapi::{sample, ApiServerConfig};

use crate::common::{kubeconfig, plugin, run_with, Cluster, Scratch};

#[test]
fn a_cluster_without_the_crds_gets_one_line_saying_how_to_install_them() {
    let cluster = Cluster::start(
        ApiServerConfig {
            crds: false,
            ..ApiServerConfig::default()
        },
        sample::two_sites("v1"),
    );
    for (command, resource) in [
        ("status", "deploymentgrids.superedge.io"),
        ("sites", "nodeunits.site.superedge.io"),
    ] {
        let ran = cluster.run(&[command]);
        assert_eq!(ran.code, 1, "{command}");
        assert_eq!(ran.stdout, "", "{command}");
        let err: Vec<&str> = ran.stderr.lines().collect();
        assert_eq!(err.len(), 1, "{command}: {}", ran.stderr);
        assert!(
            err[0].starts_with("error: sitegrid's CRDs are not installed in this cluster"),
            "{}",
            err[0]
        );
        assert!(err[0].contains(resource), "{}", err[0]);
        assert!(
            err[0].contains("kubectl apply -f deploy/crds/"),
            "{}",
            err[0]
        );
    }
    // What a node's proxy serves needs no CRD.
    let ran = cluster.run(&["endpoints", "servicegrid-demo-svc", "--node", "gz-2"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

#[test]
fn an_unreachable_api_server_reads_as_kubectls_refusal() {
    let dir = Scratch::new();
    let port = free_port().unwrap();
    let kc = dir.write("kc", &kubeconfig(&format!("http://127.0.0.1:{port}"), None));
    for command in ["status", "sites"] {
        let ran = run_with(&kc, &[command]);
        assert_eq!(ran.code, 1);
        assert_eq!(
            ran.stderr,
            format!(
                "The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?\n"
            )
        );
    }
}

#[test]
fn a_missing_kubeconfig_is_named() {
    let ran = run_with("/nonexistent/kc".as_ref(), &["status"]);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr
            .starts_with("error: --kubeconfig /nonexistent/kc: cannot read kubeconfig"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
}

#[test]
fn context_picks_a_kubeconfig_context_and_its_namespace() {
    let cluster = Cluster::two_sites();
    // The current context points nowhere; `other` at the server, in kube-system.
    let port = free_port().unwrap();
    let kc = cluster.dir.write(
        "two-contexts",
        &format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: dead, cluster: {{server: \"http://127.0.0.1:{port}\"}}}},\
                        {{name: live, cluster: {{server: \"{}\"}}}}]\n\
             users: [{{name: u, user: {{}}}}]\n\
             contexts: [{{name: current, context: {{cluster: dead, user: u}}}},\
                        {{name: other, context: {{cluster: live, user: u, namespace: kube-system}}}}]\n\
             current-context: current\n",
            cluster.url()
        ),
    );
    let mut cmd = plugin();
    cmd.env("KUBECONFIG", &kc);
    let ran = Ran::of(
        cmd,
        &[
            "endpoints",
            "kube-dns",
            "--node",
            "gz-2",
            "--context",
            "other",
        ],
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout.starts_with("Service kube-system/kube-dns"),
        "{}",
        ran.stdout
    );
    let ran = run_with(&kc, &["status", "--context", "nope"]);
    assert_eq!(ran.code, 1);
    assert!(ran.stderr.contains("nope"), "{}", ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
}

#[test]
fn kubeconfig_lists_are_merged_as_kubectl_merges_them() {
    // $KUBECONFIG=a:b, the cluster in one file and the context in the other.
    let cluster = Cluster::two_sites();
    let a = cluster.dir.write(
        "a",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: live, cluster: {{server: \"{}\"}}}}]\n\
             users: [{{name: u, user: {{}}}}]\n",
            cluster.url()
        ),
    );
    let b = cluster.dir.write(
        "b",
        "apiVersion: v1\nkind: Config\ncontexts: [{name: c, context: {cluster: live, user: u}}]\ncurrent-context: c\n",
    );
    let mut cmd = plugin();
    cmd.env("KUBECONFIG", format!("{}:{}", a.display(), b.display()));
    let ran = Ran::of(cmd, &["status"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.stderr, "No grids found in default namespace.\n");
}

#[test]
fn an_unknown_output_format_is_refused_by_the_flags() {
    let ran = Ran::of(plugin(), &["status", "-o", "yaml"]);
    assert_eq!(ran.code, 2);
    assert!(
        ran.stderr.contains("possible values: wide, json"),
        "{}",
        ran.stderr
    );
}
