//! Bad grids, reconciled against the scripted API server: each is a clear
//! condition and one Warning event, is not retried in a loop, and a healthy
//! grid next to it gets its workloads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::api::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{reflector, watcher};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use sitegrid_api::{DeploymentGrid, ServiceGrid};
use sitegrid_controller::fed::fleet::Fleet;
use sitegrid_controller::metrics::{KindCensus, Metrics};
use sitegrid_controller::reconcile::{reconcile_service, reconcile_workload, Context};

use crate::apiserver::FakeApi;

const RESYNC: Duration = Duration::from_secs(300);
const NS: &str = "default";

/// A controller context over `api` whose nodes carry `zone=<site>`, one node per site.
fn context(api: &FakeApi, sites: impl IntoIterator<Item = String>) -> Arc<Context> {
    context_scraped(api, sites).0
}

/// [`context`], and the registry its metrics are in.
fn context_scraped(
    api: &FakeApi,
    sites: impl IntoIterator<Item = String>,
) -> (Arc<Context>, Registry) {
    let client = api.client();
    let (nodes, mut writer) = reflector::store::<PartialObjectMeta<Node>>();
    for (i, site) in sites.into_iter().enumerate() {
        let node: PartialObjectMeta<Node> = serde_json::from_value(json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": format!("node-{i}"), "labels": {"zone": site}},
        }))
        .unwrap();
        writer.apply_watcher_event(&watcher::Event::Apply(node));
    }
    let mut registry = Registry::with_prefix("sitegrid_controller");
    let (fleet, _) = Fleet::start(client.clone(), Duration::from_secs(40));
    let ctx = Arc::new(Context {
        client: client.clone(),
        nodes,
        recorder: Recorder::new(
            client,
            Reporter {
                controller: "sitegrid-controller".into(),
                instance: None,
            },
        ),
        metrics: Arc::new(Metrics::register(&mut registry)),
        resync: RESYNC,
        reconciled_versions: Mutex::new(HashMap::new()),
        fleet,
        failure_counts: Mutex::new(HashMap::new()),
    });
    (ctx, registry)
}

fn sites(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": "nginx:1.19"})
}

fn deployment_spec(replicas: i64, container_name: &str) -> Value {
    json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container(container_name)]}},
    })
}

/// Stores a DeploymentGrid with `spec` (gridUniqKey `zone` unless given) and returns it.
fn deployment_grid(api: &FakeApi, name: &str, spec: Value) -> DeploymentGrid {
    let mut spec = spec;
    if spec.get("gridUniqKey").is_none() {
        spec["gridUniqKey"] = json!("zone");
    }
    api.put(
        "deploymentgrids",
        json!({
            "apiVersion": "superedge.io/v1", "kind": "DeploymentGrid",
            "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "generation": 1},
            "spec": spec,
        }),
    );
    read::<DeploymentGrid>(api, "deploymentgrids", name)
}

/// The grid as the controller's watcher would now hand it over.
fn read<K: serde::de::DeserializeOwned>(api: &FakeApi, plural: &str, name: &str) -> K {
    serde_json::from_value(api.get(plural, NS, name).expect("stored grid"))
        .expect("the grid decodes")
}

async fn reconcile(api: &FakeApi, ctx: &Arc<Context>, name: &str) -> Action {
    let grid: DeploymentGrid = read(api, "deploymentgrids", name);
    reconcile_workload(Arc::new(grid), ctx.clone())
        .await
        .expect("a bad grid is reported in its status, not retried as an error")
}

fn status(api: &FakeApi, name: &str) -> Value {
    api.get("deploymentgrids", NS, name).unwrap()["status"].clone()
}

/// The `(reason, note)` of every Warning event about grid `name`.
fn warnings(api: &FakeApi, name: &str) -> Vec<(String, String)> {
    api.with(|s| {
        s.events
            .iter()
            .filter(|e| e["type"] == "Warning" && e["regarding"]["name"] == name)
            .map(|e| {
                (
                    e["reason"].as_str().unwrap_or_default().to_owned(),
                    e["note"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    })
}

fn site_condition(status: &Value, site: &str) -> Value {
    status["states"][site]["conditions"]
        .as_array()
        .and_then(|list| list.iter().find(|c| c["type"] == "SiteReconciled"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn grid_condition(status: &Value, kind: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|list| list.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

fn deployments_of(api: &FakeApi, grid: &str) -> Vec<String> {
    api.names("deployments", "superedge.io/grid-selector", grid)
}

#[tokio::test]
async fn an_object_the_api_server_refuses_fails_its_site_only() {
    let api = FakeApi::default();
    let ctx = context(&api, sites(&["beijing", "guangzhou"]));
    deployment_grid(
        &api,
        "web",
        json!({
            "template": deployment_spec(2, "nginx"),
            "templatePool": {"broken": deployment_spec(-1, "Bad_Name")},
            "templates": {"guangzhou": "broken"},
        }),
    );
    deployment_grid(
        &api,
        "good",
        json!({"template": deployment_spec(1, "nginx")}),
    );

    assert_eq!(reconcile(&api, &ctx, "web").await, Action::requeue(RESYNC));
    assert_eq!(reconcile(&api, &ctx, "good").await, Action::requeue(RESYNC));

    assert_eq!(deployments_of(&api, "web"), ["web-beijing"]);
    assert_eq!(
        deployments_of(&api, "good"),
        ["good-beijing", "good-guangzhou"]
    );
    let status = status(&api, "web");
    let condition = site_condition(&status, "guangzhou");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "ApplyFailed");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "site guangzhou: Deployment web-guangzhou: Deployment.apps \"web-guangzhou\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\""
        ),
        "{message}"
    );
    assert_eq!(site_condition(&status, "beijing"), Value::Null);
    assert_eq!(status["sites"], 1);
    let events = warnings(&api, "web");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "ApplyFailed");
    assert_eq!(events[0].1, message);
    assert!(warnings(&api, "good").is_empty());

    // A resync tries the site again but writes nothing new: no event, no status.
    let (writes, refused) = api.with(|s| (s.writes, s.refused));
    assert_eq!(reconcile(&api, &ctx, "web").await, Action::requeue(RESYNC));
    assert_eq!(api.with(|s| (s.writes, s.refused)), (writes, refused + 1));
}

#[tokio::test]
async fn a_canary_that_is_not_a_template_fails_its_site_only() {
    let api = FakeApi::default();
    let ctx = context(&api, sites(&["beijing", "guangzhou", "shanghai"]));
    let mut typo = deployment_spec(1, "nginx");
    typo["replicas"] = json!("three");
    deployment_grid(
        &api,
        "web",
        json!({
            "template": deployment_spec(2, "nginx"),
            "templatePool": {"canary": "replicas: [oops", "typo": typo},
            "templates": {"guangzhou": "canary", "shanghai": "typo"},
        }),
    );
    let grid: DeploymentGrid = read(&api, "deploymentgrids", "web");
    // Kept as stored: a multi-cluster copy carries the same bytes.
    assert_eq!(
        serde_json::to_value(&grid).unwrap()["spec"]["templatePool"]["canary"],
        "replicas: [oops"
    );

    assert_eq!(reconcile(&api, &ctx, "web").await, Action::requeue(RESYNC));

    assert_eq!(deployments_of(&api, "web"), ["web-beijing"]);
    let status = status(&api, "web");
    let canary = site_condition(&status, "guangzhou");
    assert_eq!(canary["reason"], "InvalidTemplate");
    assert_eq!(
        canary["message"],
        "site guangzhou: templatePool entry \"canary\" is not a valid template: invalid type: string \"replicas: [oops\", expected DeploymentSpec"
    );
    let typo = site_condition(&status, "shanghai");
    assert_eq!(typo["reason"], "InvalidTemplate");
    assert_eq!(
        typo["message"],
        "site shanghai: templatePool entry \"typo\" is not a valid template: invalid type: string \"three\", expected i32"
    );
    let reasons: Vec<String> = warnings(&api, "web").into_iter().map(|e| e.0).collect();
    assert_eq!(reasons, ["InvalidTemplate", "InvalidTemplate"]);
}

/// The `grid_sites` and `grid_sites_ready` of grid `web` in `registry`'s exposition.
fn site_gauges(registry: &Registry) -> (Option<String>, Option<String>) {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let series = "{kind=\"DeploymentGrid\",namespace=\"default\",grid=\"web\"} ";
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{series}")))
            .map(str::to_owned)
    };
    (
        value("sitegrid_controller_grid_sites"),
        value("sitegrid_controller_grid_sites_ready"),
    )
}

#[tokio::test]
async fn a_grids_sites_and_ready_sites_are_gauges_gone_with_the_grid() {
    let api = FakeApi::default();
    let (ctx, registry) = context_scraped(&api, sites(&["beijing", "guangzhou", "shanghai"]));
    // What the controllers' stores hold: the grid, until it is deleted.
    let stored = Arc::new(Mutex::new(vec![(
        "DeploymentGrid/default/web".to_owned(),
        true,
    )]));
    let live = stored.clone();
    ctx.metrics.set_census(move || {
        vec![KindCensus {
            kind: "DeploymentGrid".into(),
            child_kind: "Deployment",
            grids: live.lock().clone(),
        }]
    });
    deployment_grid(
        &api,
        "web",
        json!({
            "template": deployment_spec(2, "nginx"),
            "templatePool": {"canary": "replicas: [oops"},
            "templates": {"guangzhou": "canary"},
        }),
    );
    reconcile(&api, &ctx, "web").await;
    // Three sites targeted (guangzhou's template is broken), none running yet.
    assert_eq!(site_gauges(&registry), (Some("3".into()), Some("0".into())));
    api.set_status_all("deployments", &running_status());
    reconcile(&api, &ctx, "web").await;
    assert_eq!(site_gauges(&registry), (Some("3".into()), Some("2".into())));
    stored.lock().clear();
    assert_eq!(site_gauges(&registry), (None, None));
}

#[tokio::test]
async fn a_grid_name_too_long_for_its_label_is_one_condition_and_event() {
    let api = FakeApi::default();
    let ctx = context(&api, sites(&["beijing", "guangzhou"]));
    let long = "a".repeat(70);
    deployment_grid(
        &api,
        &long,
        json!({"template": deployment_spec(1, "nginx")}),
    );
    deployment_grid(
        &api,
        "prefixed",
        json!({"gridUniqKey": "topology.kubernetes.io/zone", "template": deployment_spec(1, "nginx")}),
    );
    // SuperEdge's names are kept whenever they fit.
    let fits = "b".repeat(60);
    deployment_grid(
        &api,
        &fits,
        json!({"template": deployment_spec(1, "nginx")}),
    );

    for name in [&long, "prefixed", &fits] {
        assert_eq!(reconcile(&api, &ctx, name).await, Action::requeue(RESYNC));
    }

    assert!(deployments_of(&api, &long).is_empty());
    let condition = grid_condition(&status(&api, &long), "Rendered");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "NameTooLong");
    assert!(condition["message"]
        .as_str()
        .unwrap()
        .starts_with("the grid's name is 70 characters long, but its children carry it as the value of label superedge.io/grid-selector, which Kubernetes limits to 63"));
    let events = warnings(&api, &long);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, "NameTooLong");

    let condition = grid_condition(&status(&api, "prefixed"), "Rendered");
    assert_eq!(condition["reason"], "InvalidGridUniqKey");
    assert_eq!(warnings(&api, "prefixed").len(), 1);

    assert_eq!(
        deployments_of(&api, &fits),
        [format!("{fits}-beijing"), format!("{fits}-guangzhou")]
    );

    // Not retried, and a resync says nothing new.
    let writes = api.with(|s| s.writes);
    assert_eq!(reconcile(&api, &ctx, &long).await, Action::requeue(RESYNC));
    assert_eq!(api.with(|s| s.writes), writes);
}

#[tokio::test]
async fn a_service_grid_name_too_long_or_refused_is_a_synced_false_condition() {
    let api = FakeApi::default();
    let ctx = context(&api, sites(&["beijing"]));
    let long = "s".repeat(64);
    for (name, port) in [(long.as_str(), 80), ("zero-port", 0), ("ok", 80)] {
        api.put(
            "servicegrids",
            json!({
                "apiVersion": "superedge.io/v1", "kind": "ServiceGrid",
                "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "generation": 1},
                "spec": {"gridUniqKey": "zone", "template": {"selector": {"app": "web"}, "ports": [{"port": port}]}},
            }),
        );
        let grid: ServiceGrid = read(&api, "servicegrids", name);
        let action = reconcile_service(Arc::new(grid), ctx.clone())
            .await
            .expect("not retried as an error");
        assert_eq!(action, Action::requeue(RESYNC));
    }
    let synced =
        |name: &str| api.get("servicegrids", NS, name).unwrap()["status"]["conditions"][0].clone();
    assert_eq!(synced(&long)["reason"], "NameTooLong");
    assert_eq!(synced(&long)["status"], "False");
    assert_eq!(synced("zero-port")["reason"], "ApplyFailed");
    assert_eq!(
        synced("zero-port")["message"],
        "Service zero-port-svc: Service \"zero-port-svc\" is invalid: spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive (Invalid)"
    );
    assert_eq!(synced("ok")["status"], "True");
    assert!(api.get("services", NS, "ok-svc").is_some());
    assert_eq!(warnings(&api, &long).len(), 1);
    assert_eq!(warnings(&api, "zero-port").len(), 1);
}

#[tokio::test]
async fn a_template_refused_on_every_site_is_not_an_event_per_site() {
    let api = FakeApi::default();
    let names: Vec<String> = (0..25).map(|i| format!("site-{i:02}")).collect();
    let ctx = context(&api, names);
    deployment_grid(
        &api,
        "web",
        json!({"template": deployment_spec(-1, "nginx")}),
    );
    assert_eq!(reconcile(&api, &ctx, "web").await, Action::requeue(RESYNC));
    let events = warnings(&api, "web");
    assert_eq!(events.len(), 11);
    assert!(events[..10].iter().all(|e| e.0 == "ApplyFailed"));
    assert_eq!(events[10].0, "SitesFailed");
    assert!(
        events[10].1.starts_with(
            "15 more sites failed (see status.states[site] for each): ApplyFailed: 15"
        ),
        "{}",
        events[10].1
    );
    let status = status(&api, "web");
    assert_eq!(status["states"].as_object().unwrap().len(), 25);
}

/// What the Deployment controller reports once a site's pods run: the
/// counts and its two conditions, as a 1.20 cluster writes them.
fn running_status() -> Value {
    json!({
        "observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2,
        "conditions": [
            {"type": "Available", "status": "True", "lastUpdateTime": "2026-11-21T15:12:23Z", "lastTransitionTime": "2026-11-21T15:12:23Z", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
            {"type": "Progressing", "status": "True", "lastUpdateTime": "2026-11-21T15:12:30Z", "lastTransitionTime": "2026-11-21T15:12:20Z", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet \"many-site-00000-5d59d67564\" has successfully progressed."},
        ],
    })
}

/// Peak resident memory of this process so far, in KiB (Linux).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_sites_get_their_workloads_and_a_status_that_fits() {
    const SITES: usize = 10_000;
    let api = FakeApi::default();
    let ctx = context(&api, (0..SITES).map(|i| format!("site-{i:05}")));
    deployment_grid(
        &api,
        "many",
        json!({"template": deployment_spec(2, "nginx")}),
    );
    let rss_before = peak_rss_kib();

    let started = Instant::now();
    assert_eq!(reconcile(&api, &ctx, "many").await, Action::requeue(RESYNC));
    let first = started.elapsed();
    assert_eq!(deployments_of(&api, "many").len(), SITES);

    // The pods run: every site reports a full workload status.
    api.set_status_all("deployments", &running_status());
    let started = Instant::now();
    assert_eq!(reconcile(&api, &ctx, "many").await, Action::requeue(RESYNC));
    let second = started.elapsed();

    let grid = api.get("deploymentgrids", NS, "many").unwrap();
    let status = &grid["status"];
    assert_eq!(status["sites"], SITES);
    assert_eq!(status["readySites"], SITES);
    let condition = grid_condition(status, "StatesComplete");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "Truncated");
    let kept = status["states"].as_object().unwrap().len();
    assert!(kept > 0 && kept < SITES);
    assert!(condition["message"]
        .as_str()
        .unwrap()
        .starts_with(&format!("status.states lists {kept} of {SITES} sites")));
    assert_eq!(warnings(&api, "many").len(), 1);
    assert!(grid.to_string().len() < crate::apiserver::ETCD_MAX_OBJECT);

    // A resync with nothing new writes nothing.
    let writes = api.with(|s| s.writes);
    let started = Instant::now();
    assert_eq!(reconcile(&api, &ctx, "many").await, Action::requeue(RESYNC));
    let resync = started.elapsed();
    assert_eq!(api.with(|s| s.writes), writes);

    let per_site = status["states"].to_string().len() / kept;
    eprintln!(
        "10,000 sites: first reconcile (10,000 applies) {first:?}, with statuses {second:?}, \
         no-op resync {resync:?}; status.states {per_site} bytes per site, {kept} sites kept, \
         whole grid {} bytes; peak RSS {:?} KiB before, {:?} KiB after",
        grid.to_string().len(),
        rss_before,
        peak_rss_kib()
    );
}
