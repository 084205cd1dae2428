//! Every DeploymentGrid, StatefulSetGrid and ServiceGrid example in the SuperEdge
//! documents (copied verbatim into `tests/fixtures/`) reads into the types, and
//! writes back with the same spec fields.

use crate::common::{fixtures_of, parse};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use sitegrid_api::{DeploymentGrid, ServiceGrid, StatefulSetGrid};

/// The spec keys a user wrote, and the spec keys the type writes back.
fn spec_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value["spec"]
        .as_object()
        .map(|spec| spec.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

/// A ServiceGrid example that the StatefulSetGrid document labels
/// `kind: StatefulSetGrid` by mistake; see [`mislabelled_service_grid_carries_no_pod_template`].
const MISLABELLED: &str = "seed002-02-statefulsetgrid.yaml";

fn check_all<T: DeserializeOwned + Serialize>(kind: &str, expected: usize) {
    let fixtures: Vec<_> = fixtures_of(kind)
        .into_iter()
        .filter(|(name, _)| name != MISLABELLED)
        .collect();
    let names: Vec<&str> = fixtures.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.len(), expected, "{kind} fixtures: {names:?}");
    for (name, yaml) in &fixtures {
        let (name, yaml) = (name.as_str(), yaml.as_str());
        let grid: T = parse(name, yaml);
        let written = serde_json::to_value(&grid).unwrap();
        let original: Value = parse(name, yaml);
        assert_eq!(written["kind"], original["kind"], "{name}");
        assert_eq!(written["apiVersion"], "superedge.io/v1", "{name}");
        assert_eq!(
            written["metadata"]["name"], original["metadata"]["name"],
            "{name}"
        );
        assert_eq!(spec_keys(&written), spec_keys(&original), "{name}");
        assert_eq!(
            written["spec"]["gridUniqKey"], original["spec"]["gridUniqKey"],
            "{name}"
        );
        // JSON, as the API server hands it back, reads the same way.
        let again: T = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(again).unwrap(), written, "{name}");
    }
}

#[test]
fn deployment_grid_examples_read() {
    check_all::<DeploymentGrid>("DeploymentGrid", 5);
}

#[test]
fn statefulset_grid_examples_read() {
    check_all::<StatefulSetGrid>("StatefulSetGrid", 3);
}

#[test]
fn service_grid_examples_read() {
    check_all::<ServiceGrid>("ServiceGrid", 6);
}

#[test]
fn canary_example_keeps_its_pool_and_assignments() {
    let grid: DeploymentGrid = crate::common::load("seed000-09-deploymentgrid.yaml");
    let spec = &grid.spec;
    assert_eq!(
        spec.default_template_name.as_ref().map(|n| n.as_str()),
        Some("test1")
    );
    let pool: Vec<&str> = spec.template_pool.keys().map(|n| n.as_str()).collect();
    assert_eq!(pool, ["test1", "test2"]);
    assert_eq!(spec.template.replicas, Some(1));
}

#[test]
fn mislabelled_service_grid_carries_no_pod_template() {
    // seed 002 shows a ServiceGrid (Service ports, no pod template) under
    // `kind: StatefulSetGrid`. No StatefulSet can come of it: the CRD schema
    // requires `spec.template.template` (checked in crds.rs), so the API
    // server refuses it at apply time with that field named (the real-cluster
    // scenario 30 applies it). The Rust types, like k8s-openapi's, read the
    // missing field as empty: nothing to run.
    let text = std::fs::read_to_string(crate::common::fixtures_dir().join(MISLABELLED)).unwrap();
    let grid: StatefulSetGrid = parse(MISLABELLED, &text);
    assert_eq!(grid.spec.template.template, PodTemplateSpec::default());
    // Under the kind it was meant to be, it reads fine.
    let fixed: ServiceGrid = parse(
        MISLABELLED,
        &text.replace("kind: StatefulSetGrid", "kind: ServiceGrid"),
    );
    assert_eq!(fixed.spec.template.ports.as_ref().map(Vec::len), Some(1));
}
