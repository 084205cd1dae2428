//! The Service printer (`printService`, wide).

use serde_json::Value;

use super::{array_at, str_at, Column, AGE_DOC, NAME_DOC};

const SERVICE_TYPE_DOC: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const SERVICE_CLUSTER_IP_DOC: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_EXTERNAL_IPS_DOC: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const SERVICE_PORTS_DOC: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_SELECTOR_DOC: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";

/// Service columns, `Selector` only in wide output.
pub(super) const COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("Type", "", SERVICE_TYPE_DOC, 0),
    ("Cluster-IP", "", SERVICE_CLUSTER_IP_DOC, 0),
    ("External-IP", "", SERVICE_EXTERNAL_IPS_DOC, 0),
    ("Port(s)", "", SERVICE_PORTS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
    ("Selector", "", SERVICE_SELECTOR_DOC, 1),
];

/// One Service row.
pub(super) fn cells(svc: &Value, name: String, age: String) -> Vec<String> {
    let spec = svc.get("spec").unwrap_or(&Value::Null);
    // The apiserver defaults clusterIPs from clusterIP on read, so fall back to it.
    let cluster_ip = array_at(spec, &["clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| Some(str_at(spec, &["clusterIP"])).filter(|ip| !ip.is_empty()))
        .unwrap_or("<none>");
    let ports: Vec<String> = array_at(spec, &["ports"])
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = str_at(p, &["protocol"]);
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(node_port) if node_port > 0 => format!("{port}:{node_port}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        name,
        str_at(spec, &["type"]).to_string(),
        cluster_ip.to_string(),
        service_external_ip(svc),
        ports,
        age,
        format_labels(spec.get("selector")),
    ]
}

/// `getServiceExternalIP` with `wide=true`.
fn service_external_ip(svc: &Value) -> String {
    let external_ips: Vec<&str> = array_at(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match str_at(svc, &["spec", "type"]) {
        "ClusterIP" | "NodePort" if !external_ips.is_empty() => external_ips.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            // loadBalancerStatusStringer: IP, else hostname; a sorted set.
            let mut lb: Vec<&str> = array_at(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|ing| {
                    [str_at(ing, &["ip"]), str_at(ing, &["hostname"])]
                        .into_iter()
                        .find(|s| !s.is_empty())
                })
                .collect();
            lb.sort_unstable();
            lb.dedup();
            lb.extend(external_ips);
            if lb.is_empty() {
                "<pending>".to_string()
            } else {
                lb.join(",")
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

/// `labels.FormatLabels`: `k=v` pairs sorted as whole strings, `<none>` if empty.
fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort_unstable();
    pairs.join(",")
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::table::fixtures::{now, service};
    use crate::table::row_cells;

    #[test]
    fn kubernetes_service_row_matches_the_reference() {
        let mut svc = service(
            "kubernetes",
            json!({"ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}],
                   "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "type": "ClusterIP",
                   "sessionAffinity": "None"}),
        );
        let created = now() - 170;
        svc["metadata"]["creationTimestamp"] = crate::duration::format_rfc3339(created).into();
        assert_eq!(
            row_cells("services", &svc, now()),
            [
                "kubernetes",
                "ClusterIP",
                "10.96.0.1",
                "<none>",
                "443/TCP",
                "2m50s",
                "<none>"
            ]
        );
    }

    #[test]
    fn web_service_row_shows_selector_and_age() {
        let svc = service(
            "web",
            json!({"ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
                   "selector": {"app": "web"}, "clusterIP": "10.96.130.97",
                   "clusterIPs": ["10.96.130.97"], "type": "ClusterIP"}),
        );
        assert_eq!(
            row_cells("services", &svc, now()),
            [
                "web",
                "ClusterIP",
                "10.96.130.97",
                "<none>",
                "80/TCP",
                "2m43s",
                "app=web"
            ]
        );
    }

    #[test]
    fn service_node_ports_selector_order_and_cluster_ip_fallback() {
        let svc = service(
            "np",
            json!({"ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080},
                             {"protocol": "UDP", "port": 53}],
                   "selector": {"app": "web", "a-b": "x", "a": "y"},
                   "clusterIP": "10.96.0.9", "type": "NodePort", "externalIPs": ["1.2.3.4", "5.6.7.8"]}),
        );
        let cells = row_cells("services", &svc, now());
        assert_eq!(cells[2], "10.96.0.9");
        assert_eq!(cells[3], "1.2.3.4,5.6.7.8");
        assert_eq!(cells[4], "80:30080/TCP,53/UDP");
        // Sorted as whole "k=v" strings: '-' sorts before '='.
        assert_eq!(cells[6], "a-b=x,a=y,app=web");
    }

    #[test]
    fn service_external_ip_per_type() {
        let lb = |status: Value, external: Value| {
            let mut svc = service(
                "lb",
                json!({"type": "LoadBalancer", "clusterIPs": ["10.96.0.2"], "externalIPs": external}),
            );
            svc["status"] = status;
            row_cells("services", &svc, now())[3].clone()
        };
        assert_eq!(lb(json!({"loadBalancer": {}}), json!(null)), "<pending>");
        let ingress = json!({"loadBalancer": {"ingress": [
            {"ip": "9.9.9.9"}, {"hostname": "lb.example.com"}, {"ip": "1.1.1.1"}, {"ip": "9.9.9.9"}]}});
        assert_eq!(
            lb(ingress.clone(), json!(null)),
            "1.1.1.1,9.9.9.9,lb.example.com"
        );
        assert_eq!(
            lb(ingress, json!(["8.8.8.8"])),
            "1.1.1.1,9.9.9.9,lb.example.com,8.8.8.8"
        );
        assert_eq!(
            lb(json!({"loadBalancer": {}}), json!(["8.8.8.8"])),
            "8.8.8.8"
        );

        let ext = service(
            "ext",
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
        );
        let cells = row_cells("services", &ext, now());
        assert_eq!(
            (cells[2].as_str(), cells[3].as_str(), cells[4].as_str()),
            ("<none>", "db.example.com", "<none>")
        );

        let untyped = service("odd", json!({"clusterIPs": ["10.96.0.3"]}));
        assert_eq!(row_cells("services", &untyped, now())[3], "<unknown>");
    }
}
