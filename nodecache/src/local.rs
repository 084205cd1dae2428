//! The kubelet's word on its own pods while the API server is unreachable:
//! the status it writes (`PATCH …/pods/<p>/status`, a strategic merge
//! patch) is applied to the kept pod, answered as the API server would
//! answer it (the patched pod), and summed up as a [`LocalPod`] — its
//! addresses and readiness — for the served-state cache to serve in the
//! site's endpoints (cache/src/writer/local.rs has the rule).
//!
//! Only what kube-apiserver's strategic merge does to a pod's status is
//! done here: maps merged, `null` deleting a key, the status's lists merged
//! by their patch merge keys (`conditions` by `type`, `podIPs` and
//! `hostIPs` by `ip`, container statuses by `name`) with the `$patch`,
//! `$setElementOrder` and `$deleteFromPrimitiveList` directives the
//! kubelet's two-way patches carry; any other list replaced whole.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A pod as its kubelet last reported it, offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalPod {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (what endpoints' `targetRef` name).
    pub uid: String,
    /// The node it runs on.
    pub node: String,
    /// `status.podIPs` (else `status.podIP`).
    pub ips: Vec<String>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// Its phase is neither `Succeeded` nor `Failed`: its containers run or will.
    pub running: bool,
}

/// The merge key of a list at `path` (dotted, from the object's root), as
/// Kubernetes' Pod type declares it (`patchMergeKey`).
fn merge_key(path: &str) -> Option<&'static str> {
    match path {
        "status.conditions" => Some("type"),
        "status.podIPs" | "status.hostIPs" => Some("ip"),
        "status.containerStatuses"
        | "status.initContainerStatuses"
        | "status.ephemeralContainerStatuses"
        | "status.resourceClaimStatuses" => Some("name"),
        _ => None,
    }
}

/// Applies a strategic merge patch to `target` (a pod as JSON).
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    merge_at(target, patch, "");
}

fn merge_at(target: &mut Value, patch: &Value, path: &str) {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        replaced.remove("$patch");
        *target = Value::Object(replaced);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let mut orders = Vec::new();
    for (key, value) in patch {
        let child = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if let Some(list) = key.strip_prefix("$setElementOrder/") {
            orders.push((list.to_owned(), value.clone()));
            continue;
        }
        if let Some(list) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(items), Some(gone)) = (
                target.get_mut(list).and_then(Value::as_array_mut),
                value.as_array(),
            ) {
                items.retain(|i| !gone.contains(i));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        let Some(obj) = target.as_object_mut() else {
            return;
        };
        match value {
            Value::Null => {
                obj.remove(key);
            }
            Value::Object(_) => {
                merge_at(obj.entry(key.clone()).or_insert(Value::Null), value, &child)
            }
            Value::Array(items) => match merge_key(&child) {
                Some(k) => merge_list(
                    obj.entry(key.clone()).or_insert(Value::Array(Vec::new())),
                    items,
                    k,
                    &child,
                ),
                None => {
                    obj.insert(key.clone(), value.clone());
                }
            },
            scalar => {
                obj.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (list, order) in orders {
        let Some(key) = merge_key(&if path.is_empty() {
            list.clone()
        } else {
            format!("{path}.{list}")
        }) else {
            continue;
        };
        let (Some(items), Some(order)) = (
            target.get_mut(&list).and_then(Value::as_array_mut),
            order.as_array(),
        ) else {
            continue;
        };
        let rank = |item: &Value| {
            order
                .iter()
                .position(|o| o.get(key) == item.get(key))
                .unwrap_or(usize::MAX)
        };
        items.sort_by_key(rank);
    }
}

fn merge_list(target: &mut Value, items: &[Value], key: &str, path: &str) {
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Some(list) = target.as_array_mut() else {
        return;
    };
    for item in items {
        let id = item.get(key);
        let at = list.iter().position(|t| id.is_some() && t.get(key) == id);
        match (item.get("$patch").and_then(Value::as_str), at) {
            (Some("delete"), Some(i)) => {
                list.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => merge_at(&mut list[i], item, path),
            (_, None) => {
                let mut fresh = Value::Null;
                merge_at(&mut fresh, item, path);
                list.push(fresh);
            }
        }
    }
}

/// What a pod (as JSON) says of itself, as a [`LocalPod`].
pub fn summary(pod: &Value) -> LocalPod {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let status = &pod["status"];
    let mut ips: Vec<String> = status["podIPs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["ip"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if ips.is_empty() {
        ips.extend(
            status["podIP"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
    }
    let ready = status["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    let phase = status["phase"].as_str().unwrap_or_default();
    LocalPod {
        namespace: text(&pod["metadata"]["namespace"]),
        name: text(&pod["metadata"]["name"]),
        uid: text(&pod["metadata"]["uid"]),
        node: text(&pod["spec"]["nodeName"]),
        ips,
        ready,
        running: !matches!(phase, "Succeeded" | "Failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7"},
            "spec": {"nodeName": "sh-1"},
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "Initialized", "status": "True"},
                    {"type": "Ready", "status": "True"},
                    {"type": "PodScheduled", "status": "True"}
                ],
                "podIP": "10.0.31.4", "podIPs": [{"ip": "10.0.31.4"}],
                "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                                       "state": {"running": {"startedAt": "2026-12-02T00:00:00Z"}}}]
            }
        })
    }

    /// A patch as kubelet 1.20's status manager writes one after a reboot:
    /// new address, not ready yet, a container restarted.
    #[test]
    fn the_kubelets_status_patch_applies_as_kube_apiserver_applies_it() {
        let mut p = pod();
        let patch = json!({"metadata": {"uid": "u1"}, "status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}, {"type": "ContainersReady"}, {"type": "PodScheduled"}],
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": null},
                {"type": "ContainersReady", "status": "False"}
            ],
            "containerStatuses": [{"name": "web", "ready": false, "restartCount": 1,
                                   "lastState": {"terminated": {"exitCode": 255}},
                                   "state": {"running": null, "waiting": {"reason": "ContainerCreating"}}}],
            "podIP": "10.0.31.9", "podIPs": [{"ip": "10.0.31.9"}, {"$patch": "delete", "ip": "10.0.31.4"}]
        }});
        strategic_merge(&mut p, &patch);
        let s = &p["status"];
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            ["Initialized", "Ready", "ContainersReady", "PodScheduled"],
            "the order the patch sets"
        );
        assert_eq!(s["conditions"][1]["status"], "False");
        assert!(s["conditions"][1].get("message").is_none(), "null deletes");
        assert_eq!(s["podIPs"], json!([{"ip": "10.0.31.9"}]));
        assert_eq!(s["containerStatuses"][0]["restartCount"], 1);
        assert!(s["containerStatuses"][0]["state"].get("running").is_none());
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        assert_eq!(p["metadata"]["resourceVersion"], "7", "untouched");
        let local = summary(&p);
        assert_eq!(
            (local.ips, local.ready, local.running, local.node.as_str()),
            (vec!["10.0.31.9".to_owned()], false, true, "sh-1")
        );
        strategic_merge(&mut p, &json!({"status": {"phase": "Succeeded"}}));
        assert!(!summary(&p).running);
    }

    #[test]
    fn directives_replace_and_delete_from_primitive_lists() {
        let mut v = json!({"a": {"x": 1, "y": 2}, "tags": ["a", "b", "c"]});
        strategic_merge(
            &mut v,
            &json!({"a": {"$patch": "replace", "z": 3}, "$deleteFromPrimitiveList/tags": ["b"]}),
        );
        assert_eq!(v, json!({"a": {"z": 3}, "tags": ["a", "c"]}));
    }
}
