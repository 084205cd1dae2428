//! Server-side `Table`s (`meta.k8s.io/v1` or `v1beta1`), what `kubectl get`
//! asks for with `Accept: application/json;as=Table;…`.
//!
//! Columns and cells reproduce kube-apiserver 1.20's printers
//! (`pkg/printers/internalversion/printers.go`) for the four resources sitegrid
//! serves. The apiserver always prints "wide" (priority-1 columns included) and
//! takes each column's description from the OpenAPI docs of the field it shows;
//! the strings below are the 1.20.2 ones, verbatim.

use serde_json::{json, Map, Value};

use crate::duration::{human_duration_signed, parse_rfc3339};

/// What a row's `object` carries, from the `includeObject` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// A `PartialObjectMetadata` with the object's full metadata (the default).
    #[default]
    Metadata,
    /// The whole object, with its own kind and apiVersion.
    Object,
    /// `"object": null`.
    None,
}

impl IncludeObject {
    /// Parses `includeObject`; absent or empty means `Metadata`. The error is
    /// the message of the `400 BadRequest` Status the apiserver sends.
    pub fn parse(v: Option<&str>) -> Result<IncludeObject, String> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "Object" => Ok(IncludeObject::Object),
            "None" => Ok(IncludeObject::None),
            other => Err(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: \
                 {}: must be 'Metadata', 'Object', 'None', or empty",
                go_quote(other)
            )),
        }
    }
}

/// Go's `%q` (`strconv.Quote`), as field errors print a bad string value.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `metav1.ObjectMeta{}.SwaggerDoc()["name"]`.
const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names";
/// `metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]`.
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

const SERVICE_TYPE_DOC: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const SERVICE_CLUSTER_IP_DOC: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_EXTERNAL_IPS_DOC: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const SERVICE_PORTS_DOC: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const SERVICE_SELECTOR_DOC: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";

const ENDPOINTS_SUBSETS_DOC: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";

const SLICE_ADDRESS_TYPE_DOC: &str = "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.";
const SLICE_PORTS_DOC: &str = "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.";
const SLICE_ENDPOINTS_DOC: &str = "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.";

const NODE_ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See http://pr.k8s.io/79391 for an example.";

/// One column: name, format, description, priority (every type is "string").
type Column = (&'static str, &'static str, &'static str, u8);

const SERVICE_COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("Type", "", SERVICE_TYPE_DOC, 0),
    ("Cluster-IP", "", SERVICE_CLUSTER_IP_DOC, 0),
    ("External-IP", "", SERVICE_EXTERNAL_IPS_DOC, 0),
    ("Port(s)", "", SERVICE_PORTS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
    ("Selector", "", SERVICE_SELECTOR_DOC, 1),
];

const ENDPOINTS_COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("Endpoints", "", ENDPOINTS_SUBSETS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
];

const ENDPOINTSLICE_COLUMNS: &[Column] = &[
    ("Name", "name", NAME_DOC, 0),
    ("AddressType", "", SLICE_ADDRESS_TYPE_DOC, 0),
    ("Ports", "", SLICE_PORTS_DOC, 0),
    ("Endpoints", "", SLICE_ENDPOINTS_DOC, 0),
    ("Age", "", AGE_DOC, 0),
];

const NODE_COLUMNS: &[Column] = &[
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

fn columns(resource: &str) -> Option<&'static [Column]> {
    match resource {
        "services" => Some(SERVICE_COLUMNS),
        "endpoints" => Some(ENDPOINTS_COLUMNS),
        "endpointslices" => Some(ENDPOINTSLICE_COLUMNS),
        "nodes" => Some(NODE_COLUMNS),
        _ => None,
    }
}

/// The `columnDefinitions` array for `resource` (plural, lower case), each
/// `{"name","type","format","description","priority"}` in that key order;
/// `None` for a resource without a printer here.
pub fn column_definitions(resource: &str) -> Option<Value> {
    let cols = columns(resource)?;
    let defs = cols
        .iter()
        .map(|&(name, format, description, priority)| {
            json!({
                "name": name,
                "type": "string",
                "format": format,
                "description": description,
                "priority": priority,
            })
        })
        .collect();
    Some(Value::Array(defs))
}

/// The cells of one row, all strings, in column order; empty for a resource
/// without a printer here. `now_unix` is the request time, for `Age`.
pub fn row_cells(resource: &str, object: &Value, now_unix: i64) -> Vec<String> {
    let name = str_at(object, &["metadata", "name"]).to_string();
    let age = age(object, now_unix);
    match resource {
        "services" => service_cells(object, name, age),
        "endpoints" => vec![name, format_endpoints(object), age],
        "endpointslices" => vec![
            name,
            str_at(object, &["addressType"]).to_string(),
            format_discovery_ports(object),
            format_discovery_endpoints(object),
            age,
        ],
        "nodes" => node_cells(object, name, age),
        _ => Vec::new(),
    }
}

/// One row `{"cells":[...],"object":...}`; `object` is a full object WITH kind/apiVersion.
/// Metadata → {"kind":"PartialObjectMetadata","apiVersion":<table_api_version>,"metadata":{...full metadata...}}; Object → the object as given; None → null.
pub fn row(
    resource: &str,
    object: &Value,
    include: IncludeObject,
    table_api_version: &str,
    now_unix: i64,
) -> Value {
    let cells = row_cells(resource, object, now_unix);
    let object = match include {
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": table_api_version,
            "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
        IncludeObject::Object => object.clone(),
        IncludeObject::None => Value::Null,
    };
    json!({ "cells": cells, "object": object })
}

/// A whole Table: {"kind":"Table","apiVersion":table_api_version,"metadata":list_meta,"columnDefinitions":cols_or_null,"rows":rows}
/// with_columns=false writes "columnDefinitions":null (used by every Table watch event after the first).
pub fn table(
    resource: &str,
    table_api_version: &str,
    list_meta: Value,
    rows: Vec<Value>,
    with_columns: bool,
) -> Value {
    let columns = if with_columns {
        column_definitions(resource).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let mut t = Map::new();
    t.insert("kind".into(), "Table".into());
    t.insert("apiVersion".into(), table_api_version.into());
    t.insert("metadata".into(), list_meta);
    t.insert("columnDefinitions".into(), columns);
    t.insert("rows".into(), Value::Array(rows));
    Value::Object(t)
}

/// The string at `path`, or `""` when absent or not a string (Go's zero value).
fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(key))
}

/// The array at `path`, empty when absent or null.
fn array_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `translateTimestampSince(creationTimestamp)`.
fn age(object: &Value, now_unix: i64) -> String {
    match parse_rfc3339(str_at(object, &["metadata", "creationTimestamp"])) {
        Some(created) => human_duration_signed(now_unix - created),
        None => "<unknown>".to_string(),
    }
}

/// `listWithMoreString`: at most 3 entries, then ` + N more...`; `<unset>` if empty.
fn list_with_more(list: Vec<String>, count: usize) -> String {
    let ret = list.join(",");
    if count > MAX_LISTED {
        return format!("{ret} + {} more...", count - MAX_LISTED);
    }
    if ret.is_empty() {
        return "<unset>".to_string();
    }
    ret
}

/// How many entries the Endpoints cells show before ` + N more...`.
const MAX_LISTED: usize = 3;

fn service_cells(svc: &Value, name: String, age: String) -> Vec<String> {
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

/// `formatEndpoints(endpoints, nil)`: ready addresses only, `ip:port` for each
/// port × address, bare IPs for a subset without ports. `<none>` only when
/// there are no subsets at all; subsets without ready addresses print `""`.
fn format_endpoints(endpoints: &Value) -> String {
    let subsets = array_at(endpoints, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    let mut list = Vec::new();
    let mut count = 0;
    for subset in subsets {
        let ips: Vec<&str> = array_at(subset, &["addresses"])
            .iter()
            .map(|a| str_at(a, &["ip"]))
            .collect();
        let ports = array_at(subset, &["ports"]);
        if ports.is_empty() {
            for ip in &ips {
                if list.len() < MAX_LISTED {
                    list.push(ip.to_string());
                }
                count += 1;
            }
            continue;
        }
        for port in ports {
            let port = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for ip in &ips {
                if list.len() < MAX_LISTED {
                    list.push(join_host_port(ip, port));
                }
                count += 1;
            }
        }
    }
    let ret = list.join(",");
    if count > MAX_LISTED {
        return format!("{ret} + {} more...", count - MAX_LISTED);
    }
    ret
}

/// Go's `net.JoinHostPort`: brackets around a host containing a colon.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `formatDiscoveryPorts`: port numbers, the name for a nil port, else `*`.
fn format_discovery_ports(slice: &Value) -> String {
    let ports = array_at(slice, &["ports"]);
    let list = ports
        .iter()
        .take(MAX_LISTED)
        .map(|p| match (p.get("port"), p.get("name")) {
            (Some(Value::Number(n)), _) => n.to_string(),
            (_, Some(Value::String(name))) => name.clone(),
            _ => "*".to_string(),
        })
        .collect();
    list_with_more(list, ports.len())
}

/// `formatDiscoveryEndpoints`: every address of every endpoint, in slice order.
fn format_discovery_endpoints(slice: &Value) -> String {
    let addresses = array_at(slice, &["endpoints"])
        .iter()
        .flat_map(|ep| array_at(ep, &["addresses"]))
        .map(|a| a.as_str().unwrap_or(""));
    let count = addresses.clone().count();
    let list = addresses.take(MAX_LISTED).map(str::to_string).collect();
    list_with_more(list, count)
}

fn node_cells(node: &Value, name: String, age: String) -> Vec<String> {
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
    use super::*;

    /// The reference capture's request time: `web` (created 15:12:23) is 2m43s old.
    fn now() -> i64 {
        parse_rfc3339("2026-11-21T15:15:06Z").unwrap()
    }

    fn meta(name: &str, created: &str) -> Value {
        json!({"name": name, "namespace": "default", "uid": "4a38af75", "resourceVersion": "413",
               "creationTimestamp": created})
    }

    fn service(name: &str, spec: Value) -> Value {
        json!({"kind": "Service", "apiVersion": "v1", "metadata": meta(name, "2026-11-21T15:12:23Z"),
               "spec": spec, "status": {"loadBalancer": {}}})
    }

    fn web_slice() -> Value {
        json!({"metadata": meta("web-6hr22", "2026-11-21T15:12:23Z"), "addressType": "IPv4",
               "endpoints": [
                   {"addresses": ["10.244.1.2"], "conditions": {"ready": true},
                    "topology": {"kubernetes.io/hostname": "n1"}},
                   {"addresses": ["10.244.2.2"], "conditions": {"ready": true}},
                   {"addresses": ["10.244.3.2"], "conditions": {"ready": true}}],
               "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]})
    }

    fn n1() -> Value {
        json!({"metadata": {"name": "n1", "creationTimestamp": "2026-11-21T15:12:22Z",
                            "labels": {"kubernetes.io/hostname": "n1", "zone": "z1"}},
               "spec": {"podCIDR": "10.244.1.0/24"},
               "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                          "addresses": [{"type": "InternalIP", "address": "172.20.0.11"},
                                        {"type": "Hostname", "address": "n1"}],
                          "nodeInfo": {"kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                       "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2"}}})
    }

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

    #[test]
    fn endpoints_row_matches_the_reference() {
        let ep = json!({"metadata": meta("web", "2026-11-21T15:12:23Z"), "subsets": [{
            "addresses": [{"ip": "10.244.1.2"}, {"ip": "10.244.2.2"}, {"ip": "10.244.3.2"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]});
        assert_eq!(
            row_cells("endpoints", &ep, now()),
            [
                "web",
                "10.244.1.2:8080,10.244.2.2:8080,10.244.3.2:8080",
                "2m43s"
            ]
        );
    }

    #[test]
    fn endpoints_truncate_after_three_and_count_every_address_port_pair() {
        let ep = json!({"metadata": meta("many", "2026-11-21T15:12:23Z"), "subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
             "notReadyAddresses": [{"ip": "10.0.0.99"}],
             "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]});
        assert_eq!(
            row_cells("endpoints", &ep, now())[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
        );
        let v6 = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 53}]}]});
        assert_eq!(row_cells("endpoints", &v6, now())[1], "[fd00::1]:53");
    }

    #[test]
    fn endpoints_without_ports_subsets_or_ready_addresses() {
        let headless = json!({"subsets": [{"addresses": [
            {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}]}]});
        assert_eq!(
            row_cells("endpoints", &headless, now())[1],
            "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."
        );
        assert_eq!(
            row_cells("endpoints", &json!({"metadata": {}}), now())[1],
            "<none>"
        );
        assert_eq!(
            row_cells("endpoints", &json!({"subsets": []}), now())[1],
            "<none>"
        );
        let not_ready = json!({"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]});
        assert_eq!(row_cells("endpoints", &not_ready, now())[1], "");
    }

    #[test]
    fn endpointslice_row_matches_the_reference() {
        assert_eq!(
            row_cells("endpointslices", &web_slice(), now()),
            [
                "web-6hr22",
                "IPv4",
                "8080",
                "10.244.1.2,10.244.2.2,10.244.3.2",
                "2m43s"
            ]
        );
    }

    #[test]
    fn endpointslice_truncation_and_unset_values() {
        let slice = json!({"addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3"]},
                          {"addresses": ["10.0.0.4", "10.0.0.5"]}],
            "ports": [{"port": 1}, {"name": "named", "port": null}, {}, {"port": 4}]});
        let cells = row_cells("endpointslices", &slice, now());
        assert_eq!(cells[2], "1,named,* + 1 more...");
        assert_eq!(cells[3], "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...");
        assert_eq!(cells[4], "<unknown>");

        let empty = json!({"addressType": "IPv4", "endpoints": [], "ports": []});
        let cells = row_cells("endpointslices", &empty, now());
        assert_eq!(
            (cells[2].as_str(), cells[3].as_str()),
            ("<unset>", "<unset>")
        );
    }

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

    #[test]
    fn age_handles_missing_and_future_timestamps() {
        let mut node = n1();
        node["metadata"]["creationTimestamp"] = Value::Null;
        assert_eq!(row_cells("nodes", &node, now())[3], "<unknown>");
        node["metadata"]["creationTimestamp"] = "2026-11-21T15:15:07Z".into();
        assert_eq!(row_cells("nodes", &node, now())[3], "0s");
        node["metadata"]["creationTimestamp"] = "2026-11-21T15:15:09Z".into();
        assert_eq!(row_cells("nodes", &node, now())[3], "<invalid>");
    }

    #[test]
    fn column_definitions_match_the_reference_table() {
        type Expected<'a> = &'a [(&'a str, &'a str, u64)];
        let expect: &[(&str, Expected)] = &[
            (
                "services",
                &[
                    ("Name", "name", 0),
                    ("Type", "", 0),
                    ("Cluster-IP", "", 0),
                    ("External-IP", "", 0),
                    ("Port(s)", "", 0),
                    ("Age", "", 0),
                    ("Selector", "", 1),
                ],
            ),
            (
                "endpoints",
                &[("Name", "name", 0), ("Endpoints", "", 0), ("Age", "", 0)],
            ),
            (
                "endpointslices",
                &[
                    ("Name", "name", 0),
                    ("AddressType", "", 0),
                    ("Ports", "", 0),
                    ("Endpoints", "", 0),
                    ("Age", "", 0),
                ],
            ),
            (
                "nodes",
                &[
                    ("Name", "name", 0),
                    ("Status", "", 0),
                    ("Roles", "", 0),
                    ("Age", "", 0),
                    ("Version", "", 0),
                    ("Internal-IP", "", 1),
                    ("External-IP", "", 1),
                    ("OS-Image", "", 1),
                    ("Kernel-Version", "", 1),
                    ("Container-Runtime", "", 1),
                ],
            ),
        ];
        for (resource, cols) in expect {
            let defs = column_definitions(resource).unwrap();
            let got: Vec<(&str, &str, u64)> = defs
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    assert_eq!(d["type"], "string");
                    assert!(!d["description"].as_str().unwrap().is_empty());
                    (
                        d["name"].as_str().unwrap(),
                        d["format"].as_str().unwrap(),
                        d["priority"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(&got, cols, "{resource}");
            // Every printer's row has one cell per column.
            assert_eq!(
                row_cells(resource, &json!({}), now()).len(),
                cols.len(),
                "{resource}"
            );
        }
        assert_eq!(column_definitions("pods"), None);
        assert!(row_cells("pods", &json!({}), now()).is_empty());
    }

    #[test]
    fn column_definition_keys_and_descriptions_are_verbatim() {
        let defs = column_definitions("endpoints").unwrap();
        assert_eq!(
            defs[0].to_string(),
            format!(
                r#"{{"name":"Name","type":"string","format":"name","description":"{NAME_DOC}","priority":0}}"#
            )
        );
        assert!(defs[2].to_string().contains(r#""description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system."#));
    }

    #[test]
    fn include_object_parsing() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("")), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse(Some("Metadata")),
            Ok(IncludeObject::Metadata)
        );
        assert_eq!(
            IncludeObject::parse(Some("Object")),
            Ok(IncludeObject::Object)
        );
        assert_eq!(IncludeObject::parse(Some("None")), Ok(IncludeObject::None));
        assert_eq!(
            IncludeObject::parse(Some("Bogus")),
            Err("Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\": \
                 must be 'Metadata', 'Object', 'None', or empty"
                .to_string())
        );
        assert_eq!(
            IncludeObject::parse(Some("object")).unwrap_err(),
            "Unable to convert to Table as requested: includeObject: Invalid value: \"object\": \
             must be 'Metadata', 'Object', 'None', or empty"
        );
        assert!(IncludeObject::parse(Some("a\"b\n"))
            .unwrap_err()
            .contains(r#"Invalid value: "a\"b\n": must"#));
    }

    #[test]
    fn row_object_per_include_policy() {
        let svc = service(
            "web",
            json!({"type": "ClusterIP", "clusterIPs": ["10.96.130.97"]}),
        );
        let with_meta = row(
            "services",
            &svc,
            IncludeObject::Metadata,
            "meta.k8s.io/v1",
            now(),
        );
        assert_eq!(
            with_meta["object"].to_string(),
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web","namespace":"default","uid":"4a38af75","resourceVersion":"413","creationTimestamp":"2026-11-21T15:12:23Z"}}"#
        );
        let keys: Vec<&String> = with_meta.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["cells", "object"]);
        let beta = row(
            "services",
            &svc,
            IncludeObject::Metadata,
            "meta.k8s.io/v1beta1",
            now(),
        );
        assert_eq!(beta["object"]["apiVersion"], "meta.k8s.io/v1beta1");

        let whole = row(
            "services",
            &svc,
            IncludeObject::Object,
            "meta.k8s.io/v1",
            now(),
        );
        assert_eq!(whole["object"], svc);
        let none = row(
            "services",
            &svc,
            IncludeObject::None,
            "meta.k8s.io/v1",
            now(),
        );
        assert_eq!(
            none.to_string(),
            r#"{"cells":["web","ClusterIP","10.96.130.97","<none>","<none>","2m43s","<none>"],"object":null}"#
        );
    }

    #[test]
    fn table_shape_with_and_without_columns() {
        let r = row("nodes", &n1(), IncludeObject::None, "meta.k8s.io/v1", now());
        let t = table(
            "nodes",
            "meta.k8s.io/v1",
            json!({"resourceVersion": "569"}),
            vec![r.clone()],
            true,
        );
        let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "kind",
                "apiVersion",
                "metadata",
                "columnDefinitions",
                "rows"
            ]
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["columnDefinitions"], column_definitions("nodes").unwrap());
        assert_eq!(t["rows"], json!([r]));

        let later = table(
            "nodes",
            "meta.k8s.io/v1",
            json!({"resourceVersion": "570"}),
            vec![],
            false,
        );
        assert_eq!(
            later.to_string(),
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"570"},"columnDefinitions":null,"rows":[]}"#
        );
    }
}
