//! Objects for the unit tests, made as the API server would hold them: grids
//! with uids, StatefulSets named and labelled by the rules the controller
//! follows (`sitegrid_api`), pods as the StatefulSet controller and a kubelet
//! make them.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use sitegrid_api::labels::{GRID_SELECTOR_LABEL, GRID_UNIQ_KEY_LABEL, SITE_LABEL};
use sitegrid_api::names::{site_child_name, NameRule};
use sitegrid_api::{ServiceGrid, StatefulSetGrid};

use crate::site::POD_NAME_LABEL;

pub use sitegrid_fakeapi::testing::labels;

/// A StatefulSetGrid `ns/name` over `key`, whose pods (`app: name`) are governed by `service`.
pub fn grid(ns: &str, name: &str, key: &str, service: &str, replicas: i32) -> Arc<StatefulSetGrid> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "superedge.io/v1", "kind": "StatefulSetGrid",
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-ssg-{ns}-{name}")},
            "spec": {"gridUniqKey": key, "template": {
                "serviceName": service, "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                             "spec": {"containers": [{"name": "main", "image": "echo"}]}}}}
        }))
        .unwrap(),
    )
}

/// The StatefulSet the controller makes for `grid` in `unit`, as stored (with
/// a uid): the grid's template pinned to the site, named, labelled and owned
/// as the controller does it.
pub fn statefulset(grid: &StatefulSetGrid, unit: &str) -> Arc<StatefulSet> {
    let meta = &grid.metadata;
    let grid_name = meta.name.as_deref().unwrap();
    let name = site_child_name(grid_name, unit, NameRule::StatefulSetLabel);
    let key = grid.spec.grid_uniq_key.as_str();
    let mut spec = grid.spec.template.clone();
    let pod_spec = spec.template.spec.get_or_insert_with(Default::default);
    pod_spec.node_selector = Some(labels(&[(key, unit)]));
    let metadata = json!({
        "name": name, "namespace": meta.namespace, "uid": format!("uid-sts-{name}"),
        "labels": {GRID_SELECTOR_LABEL: grid_name, GRID_UNIQ_KEY_LABEL: key, SITE_LABEL: unit},
        "ownerReferences": [{"apiVersion": "superedge.io/v1", "kind": "StatefulSetGrid",
                             "name": grid_name, "uid": meta.uid, "controller": true}],
    });
    Arc::new(StatefulSet {
        metadata: serde_json::from_value(metadata).unwrap(),
        spec: Some(spec),
        status: None,
    })
}

/// Pod `ordinal` of `sts`, running at `ips` (none: not started), ready or not.
pub fn pod(sts: &StatefulSet, ordinal: u32, ips: &[&str], ready: bool) -> Arc<Pod> {
    let meta = &sts.metadata;
    let name = format!("{}-{ordinal}", meta.name.as_deref().unwrap());
    let spec = sts.spec.as_ref().unwrap();
    let mut pod_labels = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone()
        .unwrap();
    pod_labels.insert(POD_NAME_LABEL.into(), name.clone());
    let status = if ips.is_empty() {
        json!({"phase": "Pending"})
    } else {
        let ready = if ready { "True" } else { "False" };
        json!({"phase": "Running", "podIP": ips[0],
               "podIPs": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
               "conditions": [{"type": "Ready", "status": ready}]})
    };
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": meta.namespace, "labels": pod_labels,
                "uid": format!("uid-pod-{name}"),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta.name,
                                     "uid": meta.uid, "controller": true}]},
            "spec": {"hostname": name, "subdomain": spec.service_name,
                     "containers": [{"name": "main", "image": "echo"}]},
            "status": status
        }))
        .unwrap(),
    )
}

/// A ServiceGrid `ns/name` selecting `app: selects`, headless or not.
pub fn service_grid(ns: &str, name: &str, selects: &str, headless: bool) -> Arc<ServiceGrid> {
    let mut template = json!({"selector": {"app": selects}, "ports": [{"port": 80}]});
    if headless {
        template["clusterIP"] = json!("None");
    }
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "superedge.io/v1", "kind": "ServiceGrid",
            "metadata": {"name": name, "namespace": ns, "uid": format!("uid-sg-{ns}-{name}")},
            "spec": {"gridUniqKey": "location", "template": template}
        }))
        .unwrap(),
    )
}
