//! The Node printer (`printNode`, wide).

use serde_json::Value;

use super::{array_at, at, str_at, Column, AGE_DOC, NAME_DOC};

const NODE_ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See http://pr.k8s.io/79391 for an example.";

/// Node columns, addresses and node info only in wide output.
pub(super) const COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("Status", "", "The status of the node", 0),
    ("Roles", "", "The roles of the node", 0),
    ("Age", "", AGE_DOC, 0),
    ("Version", "", "Kubelet Version reported by the node.", 0),
    ("Internal-IP", "", NODE_ADDRESSES_DOC, 1),
    ("External-IP", "", NODE_ADDRESSES_DOC, 1),
    (
        "OS-Image",
        "",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        1,
    ),
    (
        "Kernel-Version",
        "",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        1,
    ),
    (
        "Container-Runtime",
        "",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. docker://1.5.0).",
        1,
    ),
];

/// One Node row.
pub(super) fn cells(node: &Value, name: String, age: String) -> Vec<String> {
    // The last Ready condition wins, as in the printer's condition map.
    let ready = array_at(node, &["status", "conditions"])
        .iter()
        .rfind(|c| str_at(c, &["type"]) == "Ready");
    let mut status = match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if at(node, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }

    let info = |field: &str| {
        let v = str_at(node, &["status", "nodeInfo", field]);
        if v.is_empty() { "<unknown>" } else { v }.to_string()
    };
    vec![
        name,
        status,
        node_roles(node),
        age,
        str_at(node, &["status", "nodeInfo", "kubeletVersion"]).to_string(),
        node_address(node, "InternalIP"),
        node_address(node, "ExternalIP"),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ]
}

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` keys and the value of
/// `kubernetes.io/role`, as a sorted set.
fn node_roles(node: &Value) -> String {
    let labels = at(node, &["metadata", "labels"]).and_then(Value::as_object);
    let mut roles: Vec<&str> = labels
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) => Some(role).filter(|r| !r.is_empty()),
            None if k == "kubernetes.io/role" => v.as_str().filter(|r| !r.is_empty()),
            None => None,
        })
        .collect();
    roles.sort_unstable();
    roles.dedup();
    if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    }
}

/// The first `status.addresses` entry of `kind`, or `<none>`.
fn node_address(node: &Value, kind: &str) -> String {
    array_at(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == kind)
        .map(|a| str_at(a, &["address"]).to_string())
        .unwrap_or_else(|| "<none>".to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::table::fixtures::{n1, now};
    use crate::table::row_cells;

    #[test]
    fn node_row_matches_the_reference() {
        assert_eq!(
            row_cells("nodes", &n1(), now()),
            [
                "n1",
                "Ready",
                "<none>",
                "2m44s",
                "v1.20.2",
                "172.20.0.11",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>"
            ]
        );
    }

    #[test]
    fn node_status_roles_and_addresses() {
        let mut node = n1();
        node["spec"]["unschedulable"] = true.into();
        node["status"]["conditions"] = json!([{"type": "MemoryPressure", "status": "False"},
                                              {"type": "Ready", "status": "Unknown"}]);
        node["metadata"]["labels"] = json!({"node-role.kubernetes.io/master": "",
            "node-role.kubernetes.io/": "", "kubernetes.io/role": "edge",
            "node-role.kubernetes.io/edge": "", "kubernetes.io/hostname": "n1"});
        node["status"]["addresses"] = json!([{"type": "ExternalIP", "address": "203.0.113.5"},
            {"type": "ExternalIP", "address": "203.0.113.6"}]);
        node["status"]["nodeInfo"]["osImage"] = "Debian GNU/Linux 11 (bullseye)".into();
        let cells = row_cells("nodes", &node, now());
        assert_eq!(cells[1], "NotReady,SchedulingDisabled");
        assert_eq!(cells[2], "edge,master");
        assert_eq!(
            (cells[5].as_str(), cells[6].as_str()),
            ("<none>", "203.0.113.5")
        );
        assert_eq!(cells[7], "Debian GNU/Linux 11 (bullseye)");

        node["status"]["conditions"] = json!([]);
        node["spec"]["unschedulable"] = false.into();
        assert_eq!(row_cells("nodes", &node, now())[1], "Unknown");
    }
}
