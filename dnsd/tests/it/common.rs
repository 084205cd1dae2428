//! The world of the integration tests: the in-memory API server holding the
//! two-site world plus the seeds' grids, and the waits and tools they share.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sitegrid_api::labels::{GRID_SELECTOR_LABEL, GRID_UNIQ_KEY_LABEL, SITE_LABEL};
use sitegrid_api::names::{site_child_name, NameRule};
use sitegrid_fakeapi::{ApiServer, ServerHandle};

/// Generous bound on anything a test waits for, so a bug fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(15);

/// The seeds' StatefulSetGrid (3 replicas behind `servicegrid-demo-svc`) and
/// headless ServiceGrid, verbatim from the controller's fixtures.
pub const SSG_FIXTURE: &str = "seed000-06-statefulsetgrid.yaml";
/// The seed's headless ServiceGrid.
pub const HEADLESS_SG_FIXTURE: &str = "seed000-08-servicegrid.yaml";
/// Its uid in the in-memory API server.
pub const SSG_UID: &str = "0b6f3c57-5d1e-4f38-9a43-2f1d0c4ab001";

/// The name dnsd makes for pod `i` of the seed grid.
pub fn ordinal_name(i: u32) -> String {
    format!("statefulsetgrid-demo-{i}.servicegrid-demo-svc.default.svc.cluster.local")
}
/// The headless Service's name.
pub const HEADLESS_NAME: &str = "servicegrid-demo-svc.default.svc.cluster.local";

/// A fresh scratch directory, readable by others (dnsmasq drops to `nobody`).
pub fn scratch(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sitegrid-dnsd-it-{}-{what}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    dir
}

/// A free port on 127.0.0.1 (bound, then released for the process under test).
pub fn free_port() -> u16 {
    sitegrid_fakeapi::testing::free_port().expect("a free loopback port")
}

/// Polls `check` until it holds, failing with `what` and the last state after [`WAIT`].
pub fn wait_for<T: std::fmt::Debug>(
    what: &str,
    mut probe: impl FnMut() -> T,
    check: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = probe();
        if check(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {got:?} after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The path of a tool the tests need, or a failure saying how to get it.
pub fn tool(name: &str, package: &str) -> PathBuf {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/bin",
        "/usr/local/sbin",
    ] {
        let path = Path::new(dir).join(name);
        if path.is_file() {
            return path;
        }
    }
    panic!("{name} is missing: these tests query a real DNS server; install Debian's {package} (apt-get install {package}; .ci/run does)");
}

/// The in-memory API server, serving on its own runtime so the tests can block.
pub struct Cluster {
    pub server: ApiServer,
    handle: Option<ServerHandle>,
    runtime: tokio::runtime::Runtime,
    pub kubeconfig: PathBuf,
}

impl Cluster {
    /// The two-site world (nodes bj-1..3 in beijing, gz-1..3 in guangzhou),
    /// the seeds' StatefulSetGrid and headless ServiceGrid, and what the
    /// controller and the StatefulSet controller make of them: one
    /// StatefulSet per site and its three pods, running and ready.
    pub fn start() -> Cluster {
        let (runtime, server, handle) = sitegrid_fakeapi::testing::serve_two_sites_on_own_runtime();
        let dir = scratch("kubeconfig");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: \"{}\"}}}}]\n\
                 users: [{{name: dnsd, user: {{}}}}]\ncontexts: [{{name: fake, context: {{cluster: fake, user: dnsd}}}}]\ncurrent-context: fake\n",
                handle.url()
            ),
        )
        .unwrap();
        let cluster = Cluster {
            server,
            handle: Some(handle),
            runtime,
            kubeconfig,
        };
        let mut grid = fixture(SSG_FIXTURE);
        grid["metadata"]["uid"] = json!(SSG_UID);
        cluster.server.apply(grid);
        cluster.server.apply(fixture(HEADLESS_SG_FIXTURE));
        for (unit, net) in [("beijing", "10.0.0"), ("guangzhou", "10.0.1")] {
            let sts = cluster.statefulset(unit);
            for i in 0..3 {
                cluster.set_pod(&sts, i, Some(&format!("{net}.{}", 10 + i)), true);
            }
        }
        cluster
    }

    /// The StatefulSet the controller makes for the seed grid in `unit`
    /// (created if absent): the grid's template pinned to the site, named,
    /// labelled and owned as the controller does it.
    pub fn statefulset(&self, unit: &str) -> Value {
        let grid_name = "statefulsetgrid-demo";
        let name = site_child_name(grid_name, unit, NameRule::StatefulSetLabel);
        if let Some(live) = self.server.get("statefulsets", Some("default"), &name) {
            return live;
        }
        let grid = self
            .server
            .get("statefulsetgrids", Some("default"), grid_name)
            .unwrap();
        let key = grid["spec"]["gridUniqKey"].as_str().unwrap();
        let mut spec = grid["spec"]["template"].clone();
        spec["template"]["spec"]["nodeSelector"] = json!({ key: unit });
        self.server.apply(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet", "spec": spec,
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-sts-{name}"),
                "labels": {GRID_SELECTOR_LABEL: grid_name, GRID_UNIQ_KEY_LABEL: key, SITE_LABEL: unit},
                "ownerReferences": [{"apiVersion": "superedge.io/v1", "kind": "StatefulSetGrid", "name": grid_name,
                    "uid": grid["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        }))
    }

    /// Pod `i` of `sts` as the StatefulSet controller and a kubelet of the
    /// site's first node make it: at `ip` (none: pending), ready or not.
    pub fn set_pod(&self, sts: &Value, i: u32, ip: Option<&str>, ready: bool) {
        let sts_name = sts["metadata"]["name"].as_str().unwrap();
        let name = format!("{sts_name}-{i}");
        let node = if sts_name.ends_with("beijing") {
            "bj-1"
        } else {
            "gz-1"
        };
        let mut labels = sts["spec"]["template"]["metadata"]["labels"].clone();
        labels["statefulset.kubernetes.io/pod-name"] = json!(name);
        let status = match ip {
            None => json!({"phase": "Pending"}),
            Some(ip) => json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}),
        };
        self.server.apply(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels, "uid": format!("uid-pod-{name}"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts_name,
                    "uid": sts["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"nodeName": node, "hostname": name, "subdomain": sts["spec"]["serviceName"],
                "containers": [{"name": "echo", "image": "superedge/echoserver:2.2"}]},
            "status": status
        }));
    }

    /// Sets `spec.replicas` of `sts`.
    pub fn scale(&self, sts: &Value, replicas: u32) {
        let mut sts = sts.clone();
        sts["spec"]["replicas"] = json!(replicas);
        self.server.apply(sts);
    }

    /// Moves `node` to site `location`.
    pub fn relabel(&self, node: &str, location: &str) {
        let mut n = self.server.get("nodes", None, node).unwrap();
        n["metadata"]["labels"]["location"] = json!(location);
        self.server.apply(n);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Close the server's sockets on its own runtime before that runtime goes.
        if let Some(handle) = self.handle.take() {
            self.runtime.block_on(handle.shutdown());
        }
    }
}

/// A seed fixture of the controller, as JSON.
pub fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../controller/tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}
