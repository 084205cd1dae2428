//! Taking over what SuperEdge's application-grid-controller made: its grids
//! and children as it left them on a real Kubernetes 1.20.2
//! (`tests/fixtures/superedge-a979e05/`), read by sitegrid's types, rendered,
//! and compared with the children as sitegrid's reconciler compares them
//! before adopting one.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use sitegrid_api::{DeploymentGrid, ServiceGrid, SiteName, StatefulSetGrid};
use sitegrid_controller::drift::{self, adoption_blocker, contains};
use sitegrid_controller::render::{render_service, render_workloads};
use sitegrid_controller::workload::Workload;

/// Every object of a captured file, as JSON.
fn captured(file: &str) -> Vec<Value> {
    let path = crate::common::fixtures_dir()
        .join("superedge-a979e05")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("read capture");
    serde_saphyr::from_str_multiple(&text).unwrap_or_else(|err| panic!("{file}: {err}"))
}

/// The captured object of `kind` named `name` (in namespace `namespace`).
fn object<T: DeserializeOwned>(file: &str, kind: &str, namespace: &str, name: &str) -> (T, Value) {
    let value = captured(file)
        .into_iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"] == namespace
        })
        .unwrap_or_else(|| panic!("no {kind} {namespace}/{name} in {file}"));
    let typed = serde_json::from_value(value.clone()).unwrap_or_else(|err| {
        panic!("{kind} {namespace}/{name} does not read as sitegrid's type: {err}")
    });
    (typed, value)
}

fn sites() -> BTreeSet<SiteName> {
    ["beijing", "guangzhou"]
        .into_iter()
        .map(SiteName::from)
        .collect()
}

/// What sitegrid would apply to `site`'s workload, as JSON (ports filled as the reconciler does).
fn desired<G, W>(grid: &G, site: &str) -> Value
where
    G: sitegrid_api::WorkloadGrid<Workload = W>,
    W: Workload<Spec = G::Template> + serde::Serialize,
{
    let mut rendered = render_workloads(grid, &sites()).expect("renders");
    let child = rendered
        .remove(&SiteName::from(site))
        .expect("site rendered")
        .expect("site renders");
    let mut value = serde_json::to_value(child).unwrap();
    drift::fill_port_protocols(&mut value);
    value
}

/// Each site's captured child of the captured grid `{kind}/{name}` is what
/// sitegrid renders for that site, as far as its pods are concerned, and has
/// the owner sitegrid would set: adopting it changes nothing they run from.
fn adopted_in_place<G, W>(grid_kind: &str, grid_name: &str, child_kind: &str) -> G
where
    G: sitegrid_api::WorkloadGrid<Workload = W> + DeserializeOwned,
    W: Workload<Spec = G::Template> + kube::Resource + serde::Serialize + DeserializeOwned,
{
    let (grid, _): (G, _) = object("grids.yaml", grid_kind, "default", grid_name);
    for site in ["beijing", "guangzhou"] {
        let name = format!("{grid_name}-{site}");
        let (live, live_json): (W, _) = object("children.yaml", child_kind, "default", &name);
        let want = desired(&grid, site);
        assert_eq!(want["metadata"]["name"], name, "same name as SuperEdge's");
        assert_eq!(
            adoption_blocker(&live_json, &want, W::ADOPTION_FIELDS),
            None,
            "{name}: adopting it would change its pods"
        );
        assert_eq!(live.owner_references(), want_owner(&want).as_slice());
    }
    grid
}

#[test]
fn superedge_deployments_are_adopted_without_touching_their_pods() {
    let grid: DeploymentGrid =
        adopted_in_place("DeploymentGrid", "deploymentgrid-demo", "Deployment");
    // SuperEdge wrote its template hash into the grid's pod template: the
    // grid sitegrid reads carries it, so sitegrid renders it too.
    let template = grid.spec.template.template.metadata.unwrap_or_default();
    assert!(template
        .labels
        .unwrap_or_default()
        .contains_key("superedge.io/template-hash-key"));
}

#[test]
fn superedge_statefulsets_are_adopted_without_touching_their_pods() {
    let grid: StatefulSetGrid =
        adopted_in_place("StatefulSetGrid", "statefulsetgrid-demo", "StatefulSet");
    assert_eq!(
        grid.spec.template.service_name.as_deref(),
        Some("servicegrid-demo-svc")
    );
}

#[test]
fn superedge_service_already_is_what_sitegrid_applies() {
    let (grid, _): (ServiceGrid, _) =
        object("grids.yaml", "ServiceGrid", "default", "servicegrid-demo");
    let (_, live): (Service, _) = object(
        "children.yaml",
        "Service",
        "default",
        "servicegrid-demo-svc",
    );
    let mut want = serde_json::to_value(render_service(&grid).unwrap()).unwrap();
    drift::fill_port_protocols(&mut want);
    // Everything sitegrid sets is there already (the topologyKeys
    // annotation, the grid's own annotations SuperEdge copied, the labels,
    // the controller reference, the spec); applying it adds only sitegrid's
    // bookkeeping, and never touches the allocated clusterIP.
    assert!(contains(&live, &want), "live {live:#}\nwant {want:#}");
    assert_eq!(want["spec"].get("clusterIP"), None);
}

#[test]
fn a_drifted_superedge_deployment_names_the_field_that_would_restart_it() {
    let (grid, _): (DeploymentGrid, _) = object(
        "grids.yaml",
        "DeploymentGrid",
        "default",
        "deploymentgrid-demo",
    );
    let (_, mut live): (Deployment, _) = object(
        "children.yaml",
        "Deployment",
        "default",
        "deploymentgrid-demo-guangzhou",
    );
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("superedge/echoserver:2.1");
    let want = desired(&grid, "guangzhou");
    let blocker = adoption_blocker(&live, &want, Deployment::ADOPTION_FIELDS).expect("refused");
    assert_eq!(blocker.path, "spec.template.spec.containers[0].image");
    assert_eq!(blocker.live, json!("superedge/echoserver:2.1"));
    assert_eq!(blocker.desired, json!("superedge/echoserver:2.2"));

    // A label SuperEdge's controller would not have left, on the pod template.
    let (_, mut relabelled): (Deployment, _) = object(
        "children.yaml",
        "Deployment",
        "default",
        "deploymentgrid-demo-guangzhou",
    );
    relabelled["spec"]["template"]["metadata"]["labels"]["superedge.io/template-hash-key"] =
        json!("1");
    let blocker =
        adoption_blocker(&relabelled, &want, Deployment::ADOPTION_FIELDS).expect("refused");
    assert_eq!(
        blocker.path,
        "spec.template.metadata.labels[superedge.io/template-hash-key]"
    );

    // The user lets sitegrid roll it; or sitegrid applied it before: its changes roll as the grid says.
    for (key, value) in [
        (drift::ADOPT_ANNOTATION, drift::ADOPT_ROLL),
        (drift::APPLIED_HASH_ANNOTATION, "0123"),
    ] {
        let mut allowed = live.clone();
        allowed["metadata"]["annotations"][key] = json!(value);
        assert_eq!(
            adoption_blocker(&allowed, &want, Deployment::ADOPTION_FIELDS),
            None,
            "{key}"
        );
    }
    let mut other_value = live.clone();
    other_value["metadata"]["annotations"][drift::ADOPT_ANNOTATION] = json!("yes");
    assert!(adoption_blocker(&other_value, &want, Deployment::ADOPTION_FIELDS).is_some());
}

#[test]
fn a_statefulset_with_another_service_name_is_refused_on_that_field() {
    let (grid, _): (StatefulSetGrid, _) = object(
        "grids.yaml",
        "StatefulSetGrid",
        "default",
        "statefulsetgrid-demo",
    );
    let (_, mut live): (StatefulSet, _) = object(
        "children.yaml",
        "StatefulSet",
        "default",
        "statefulsetgrid-demo-beijing",
    );
    live["spec"]["serviceName"] = json!("old-svc");
    let blocker = adoption_blocker(
        &live,
        &desired(&grid, "beijing"),
        StatefulSet::ADOPTION_FIELDS,
    )
    .expect("refused");
    assert_eq!(blocker.path, "spec.serviceName");
    assert_eq!(
        blocker.to_string(),
        r#"spec.serviceName is "old-svc" but the grid has "servicegrid-demo-svc""#
    );
}

#[test]
fn superedge_canary_grid_lost_its_pool_labels_to_superedge_crds() {
    // SuperEdge's CRDs prune templatePool[*].template.metadata, so its canary
    // grid (seed000-09) has pool templates without labels, and the API server
    // refuses their Deployments: sitegrid renders what is there, and the
    // migration guide says to apply such grids again once sitegrid's CRDs
    // are installed.
    let (grid, raw): (DeploymentGrid, _) = object(
        "grids.yaml",
        "DeploymentGrid",
        "canary",
        "deploymentgrid-demo",
    );
    assert_eq!(
        raw["spec"]["templatePool"]["test1"]["template"]["metadata"],
        json!({})
    );
    let rendered = render_workloads(&grid, &["zone1"].into_iter().map(SiteName::from).collect())
        .expect("renders");
    let child = rendered[&SiteName::from("zone1")]
        .as_ref()
        .expect("zone1 renders");
    assert_eq!(
        child
            .spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref()),
        None
    );
}

/// The ownerReferences sitegrid would set.
fn want_owner(want: &Value) -> Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    serde_json::from_value(want["metadata"]["ownerReferences"].clone()).unwrap()
}
