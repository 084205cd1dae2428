//! An in-memory API server holding a world, a kubeconfig naming it, and the
//! plugin run against it the way a user runs it (a clean environment, the
//! kubeconfig through `$KUBECONFIG`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};
use sitegrid_fakeapi::testing::{command, Ran};
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig, ServerHandle};

/// The plugin's binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-sitegrid");

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh, empty directory under the system's temp dir.
    pub fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "sitegrid-plugin-it-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `text` to `name` in the directory; returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: a leftover temp directory is harmless.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A kubeconfig whose current context `ctx` names `server` (namespace
/// `namespace` if given), with no credentials (the in-memory server needs none).
pub fn kubeconfig(server: &str, namespace: Option<&str>) -> String {
    let ns = namespace.map_or_else(String::new, |n| format!(", namespace: {n}"));
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\n\
         users: [{{name: u, user: {{}}}}]\n\
         contexts: [{{name: ctx, context: {{cluster: c, user: u{ns}}}}}]\n\
         current-context: ctx\n"
    )
}

/// A running in-memory API server and a kubeconfig for it.
pub struct Cluster {
    /// The server, to change the world while it runs.
    pub api: ApiServer,
    handle: Option<ServerHandle>,
    runtime: tokio::runtime::Runtime,
    /// Holds the kubeconfig.
    pub dir: Scratch,
    /// The kubeconfig naming the server.
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// The two-site world (EndpointSlices in `discovery.k8s.io/v1`).
    pub fn two_sites() -> Cluster {
        Cluster::start(ApiServerConfig::default(), sample::two_sites("v1"))
    }

    /// A server with `config`, loaded with `objects`.
    pub fn start(config: ApiServerConfig, objects: Vec<Value>) -> Cluster {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let api = ApiServer::new(config);
        api.load(objects);
        let handle = runtime
            .block_on(api.serve("127.0.0.1:0".parse().unwrap()))
            .unwrap();
        let dir = Scratch::new();
        let kubeconfig = dir.write("kubeconfig", &kubeconfig(&handle.url(), None));
        Cluster {
            api,
            handle: Some(handle),
            runtime,
            dir,
            kubeconfig,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.handle
            .as_ref()
            .map(ServerHandle::url)
            .unwrap_or_default()
    }

    /// Creates or replaces each object.
    pub fn apply(&self, objects: impl IntoIterator<Item = Value>) {
        for o in objects {
            self.api.apply(o);
        }
    }

    /// `kubectl-sitegrid ARGS` with this cluster's kubeconfig in `$KUBECONFIG`.
    pub fn run(&self, args: &[&str]) -> Ran {
        let mut cmd = plugin();
        cmd.env("KUBECONFIG", &self.kubeconfig);
        Ran::of(cmd, args)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.runtime.block_on(handle.shutdown());
        }
    }
}

/// The plugin with a clean environment: no `$KUBECONFIG`, a HOME of its own.
pub fn plugin() -> Command {
    command(BIN, &[])
}

/// Runs the plugin with `kubeconfig` passed as `--kubeconfig`.
pub fn run_with(kubeconfig: &Path, args: &[&str]) -> Ran {
    let mut all = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
    all.extend_from_slice(args);
    Ran::of(plugin(), &all)
}

/// The seed's DeploymentGrid `deploymentgrid-demo` (2 replicas per site, key
/// `location`) in `namespace`, with `status` as sitegrid-controller writes it.
pub fn deployment_grid(namespace: &str, name: &str, status: Value) -> Value {
    json!({
        "apiVersion": "superedge.io/v1", "kind": "DeploymentGrid",
        "metadata": {"name": name, "namespace": namespace,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"gridUniqKey": "location", "template": {
            "replicas": 2, "selector": {"matchLabels": {"appGrid": "echo"}},
            "template": {"metadata": {"labels": {"appGrid": "echo"}},
                         "spec": {"containers": [{"name": "echo", "image": "superedge/echoserver:2.2"}]}}}},
        "status": status,
    })
}

/// A site's Deployment status as the controller copies it into `states`.
pub fn site_state(ready: i32) -> Value {
    json!({"replicas": 2, "readyReplicas": ready, "updatedReplicas": 2, "availableReplicas": ready})
}

/// The seed's ServiceGrid `servicegrid-demo` (its Service is the sample's `servicegrid-demo-svc`).
pub fn service_grid() -> Value {
    json!({
        "apiVersion": "superedge.io/v1", "kind": "ServiceGrid",
        "metadata": {"name": "servicegrid-demo", "namespace": "default"},
        "spec": {"gridUniqKey": "location", "template": {
            "selector": {"appGrid": "echo"}, "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}]}},
        "status": {"conditions": [{"type": "Synced", "status": "True", "reason": "Applied",
            "message": "the Service is up to date", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
    })
}

/// Standard output's lines.
pub fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}
