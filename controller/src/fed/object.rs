//! Writing grids on either side of a distribution: the control cluster's
//! copies and a managed cluster's local grids are made, brought back to a
//! spec and deleted alike.

use std::collections::BTreeMap;

use kube::api::{Api, DeleteParams};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use crate::metrics::Metrics;
use crate::shared::GridKind;

/// A new grid of kind `K`.
pub fn new_grid<K: GridKind>(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    spec: &Value,
) -> serde_json::Result<K> {
    let mut metadata = json!({"name": name, "namespace": namespace, "labels": labels});
    if !annotations.is_empty() {
        metadata["annotations"] = json!(annotations);
    }
    serde_json::from_value(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": metadata,
        "spec": spec,
    }))
}

/// `grid` with exactly `spec` and `labels` (and `annotations` set among its
/// own), its status left out, for a PUT; `None` when it already is so. The
/// whole spec: zero values propagate (SuperEdge's merge dropped them) and a
/// local edit is put back.
pub fn respecced<K: GridKind>(
    grid: &K,
    spec: &Value,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> serde_json::Result<Option<K>> {
    let mut current = serde_json::to_value(grid)?;
    let own = grid.annotations();
    let same = current.get("spec") == Some(spec)
        && grid.meta().labels.as_ref() == Some(labels)
        && annotations.iter().all(|(k, v)| own.get(k) == Some(v));
    if same {
        return Ok(None);
    }
    current["spec"] = spec.clone();
    current["metadata"]["labels"] = json!(labels);
    for (key, value) in annotations {
        current["metadata"]["annotations"][key] = json!(value);
    }
    if let Some(map) = current.as_object_mut() {
        map.remove("status");
    }
    serde_json::from_value(current).map(Some)
}

/// Deletes `namespace/name`; one already gone is fine. Whether it deleted.
pub async fn delete_grid<K: GridKind>(
    client: &Client,
    metrics: &Metrics,
    namespace: &str,
    name: &str,
) -> Result<bool, kube::Error> {
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {
            metrics.wrote("delete", &K::kind(&()));
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use sitegrid_api::DeploymentGrid;

    use super::*;
    use crate::fixtures::labels;

    #[test]
    fn a_grid_is_brought_back_to_a_spec_only_when_it_differs() {
        let spec = json!({"gridUniqKey": "zone", "template": {"replicas": 2, "selector": {}, "template": {}}});
        let l = labels(&[("superedge.io/fed", "yes")]);
        let a = labels(&[("sitegrid.io/original-uid", "u1")]);
        let grid: DeploymentGrid = new_grid("g", "ns", &l, &a, &spec).unwrap();
        assert_eq!(grid.namespace().as_deref(), Some("ns"));
        assert!(respecced(&grid, &spec, &l, &a).unwrap().is_none());
        // A local edit of a zero value is put back whole.
        let zero = json!({"gridUniqKey": "zone", "template": {"replicas": 0, "selector": {}, "template": {}}});
        let back = respecced(&grid, &zero, &l, &a).unwrap().unwrap();
        assert_eq!(back.spec.template.replicas, Some(0));
        assert!(back.status.is_none());
        // Another original's uid is written over.
        let other = labels(&[("sitegrid.io/original-uid", "u2")]);
        let moved = respecced(&grid, &spec, &l, &other).unwrap().unwrap();
        assert_eq!(
            moved
                .annotations()
                .get("sitegrid.io/original-uid")
                .map(String::as_str),
            Some("u2")
        );
    }
}
