//! Sample clusters to load into the [`ApiServer`]: the two-site SuperEdge
//! example and a large synthetic cluster for benchmarks.

mod objects;

use serde_json::{json, Value};

use crate::apiserver::ApiServer;
use objects::{
    endpoint_slice, endpoints, namespace, node, service, suffix_for, Backend, ServiceSpec,
    SliceSpec,
};

/// Node names, location and InternalIP of the two-site example.
const TWO_SITE_NODES: &[(&str, &str, &str)] = &[
    ("bj-1", "beijing", "192.0.2.11"),
    ("bj-2", "beijing", "192.0.2.12"),
    ("bj-3", "beijing", "192.0.2.13"),
    ("gz-1", "guangzhou", "192.0.2.21"),
    ("gz-2", "guangzhou", "192.0.2.22"),
    ("gz-3", "guangzhou", "192.0.2.23"),
];

/// The apiserver's own address in the samples.
const APISERVER_IP: &str = "192.0.2.1";

fn backend(ip: &str, node: &str, zone: &str, pod: &str) -> Backend {
    Backend {
        ip: ip.into(),
        node: Some(node.into()),
        zone: Some(zone.into()),
        pod: Some(pod.into()),
    }
}

/// A Service (with Endpoints and one EndpointSlice) on port 80 → 8080.
fn echo_service(
    out: &mut Vec<Value>,
    name: &str,
    cluster_ip: &str,
    selector: Value,
    grid: Option<&str>,
    backends: &[Backend],
    version: &str,
) {
    let (labels, annotations) = match grid {
        Some(grid) => (
            json!({"superedge.io/grid-selector": grid, "superedge.io/grid-uniq-key": "location"}),
            json!({"topologyKeys": "[\"location\"]"}),
        ),
        None => (json!({}), json!({})),
    };
    out.push(service(&ServiceSpec {
        namespace: "default",
        name,
        cluster_ip,
        selector,
        labels,
        annotations,
        port: json!({"protocol": "TCP", "port": 80, "targetPort": 8080}),
    }));
    out.push(endpoints(
        "default",
        name,
        json!({}),
        backends,
        json!([{"port": 8080, "protocol": "TCP"}]),
    ));
    out.push(endpoint_slice(
        &SliceSpec {
            namespace: "default",
            service: name,
            generated_suffix: Some(suffix_for(&format!("slice/default/{name}"))),
            ports: json!([{"name": "", "protocol": "TCP", "port": 8080}]),
            version,
        },
        backends,
    ));
}

/// `default/kubernetes`: Service, Endpoints and EndpointSlice as in the reference.
fn kubernetes_service(out: &mut Vec<Value>, version: &str) {
    out.push(service(&ServiceSpec {
        namespace: "default",
        name: "kubernetes",
        cluster_ip: "10.96.0.1",
        selector: json!({}),
        labels: json!({"component": "apiserver", "provider": "kubernetes"}),
        annotations: json!({}),
        port: json!({"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}),
    }));
    let apiserver = [Backend {
        ip: APISERVER_IP.into(),
        node: None,
        zone: None,
        pod: None,
    }];
    out.push(endpoints(
        "default",
        "kubernetes",
        json!({"endpointslice.kubernetes.io/skip-mirror": "true"}),
        &apiserver,
        json!([{"name": "https", "port": 6443, "protocol": "TCP"}]),
    ));
    let mut slice = endpoint_slice(
        &SliceSpec {
            namespace: "default",
            service: "kubernetes",
            generated_suffix: None,
            ports: json!([{"name": "https", "protocol": "TCP", "port": 6443}]),
            version,
        },
        &apiserver,
    );
    // The apiserver's endpoint carries only `ready`, in either version.
    slice["endpoints"][0]["conditions"] = json!({"ready": true});
    out.push(slice);
}

/// The two-site example from the SuperEdge docs: nodes bj-1..3
/// (`location=beijing`) and gz-1..3 (`location=guangzhou`); the Service
/// `default/servicegrid-demo-svc` (annotation `topologyKeys: '["location"]'`)
/// with Endpoints and one EndpointSlice holding 4 ready endpoints (bj-1, bj-3,
/// gz-2, gz-3); `default/plain-echo` without the annotation (endpoints on bj-2
/// and gz-1); `default/kubernetes`; and the four standard namespaces.
/// EndpointSlices are in `endpointslice_version` ("v1" or "v1beta1").
pub fn two_sites(endpointslice_version: &str) -> Vec<Value> {
    let v = endpointslice_version;
    let mut out: Vec<Value> = ["default", "kube-system", "kube-public", "kube-node-lease"]
        .into_iter()
        .map(namespace)
        .collect();
    out.extend(TWO_SITE_NODES.iter().map(|(n, loc, ip)| node(n, loc, ip)));
    kubernetes_service(&mut out, v);
    let grid = [
        backend(
            "10.0.0.70",
            "bj-1",
            "beijing",
            "deploymentgrid-demo-beijing-65d669b7d-v9zdb",
        ),
        backend(
            "10.0.1.72",
            "bj-3",
            "beijing",
            "deploymentgrid-demo-beijing-65d669b7d-wrx7r",
        ),
        backend(
            "10.0.0.139",
            "gz-2",
            "guangzhou",
            "deploymentgrid-demo-guangzhou-5d599854c8-hhmt2",
        ),
        backend(
            "10.0.1.8",
            "gz-3",
            "guangzhou",
            "deploymentgrid-demo-guangzhou-5d599854c8-k9gc7",
        ),
    ];
    echo_service(
        &mut out,
        "servicegrid-demo-svc",
        "10.96.33.231",
        json!({"appGrid": "echo"}),
        Some("servicegrid-demo"),
        &grid,
        v,
    );
    let plain = [
        backend("10.0.0.81", "bj-2", "beijing", "plain-echo-6b7f9c8d5-4xq2m"),
        backend(
            "10.0.1.33",
            "gz-1",
            "guangzhou",
            "plain-echo-6b7f9c8d5-9tzkp",
        ),
    ];
    echo_service(
        &mut out,
        "plain-echo",
        "10.96.120.15",
        json!({"app": "plain"}),
        None,
        &plain,
        v,
    );
    out
}

/// The `index`-th address of the /8-style block starting at `base`.second octet.
fn addr(first: u8, second: u8, index: usize) -> String {
    let second = usize::from(second) + index / 65_536;
    format!("{first}.{second}.{}.{}", (index / 256) % 256, index % 256)
}

/// A large synthetic cluster: `sites` sites of `nodes_per_site` nodes
/// (`site-<i>-node-<j>`, label `location=site-<i>`), and `services` Services
/// `default/svc-<k>` with `topologyKeys: '["location"]'`, each with Endpoints
/// and one EndpointSlice holding `endpoints_per_service` ready endpoints spread
/// round-robin over all nodes. EndpointSlices are in `endpointslice_version`.
pub fn synthetic(
    sites: usize,
    nodes_per_site: usize,
    services: usize,
    endpoints_per_service: usize,
    endpointslice_version: &str,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(sites * nodes_per_site + services * 3);
    let mut nodes: Vec<(String, String)> = Vec::new();
    for i in 0..sites {
        for j in 0..nodes_per_site {
            let name = format!("site-{i}-node-{j}");
            let location = format!("site-{i}");
            out.push(node(&name, &location, &addr(172, 16, nodes.len() + 1)));
            nodes.push((name, location));
        }
    }
    let mut pod_index = 0usize;
    for k in 0..services {
        let name = format!("svc-{k}");
        let backends: Vec<Backend> = (0..endpoints_per_service)
            .map(|j| {
                pod_index += 1;
                let (node, zone) = match nodes.get((pod_index - 1) % nodes.len().max(1)) {
                    Some((n, z)) => (Some(n.clone()), Some(z.clone())),
                    None => (None, None),
                };
                Backend {
                    ip: addr(10, 128, pod_index),
                    node,
                    zone,
                    pod: Some(format!("{name}-{}-{j}", suffix_for(&name))),
                }
            })
            .collect();
        echo_service(
            &mut out,
            &name,
            &addr(10, 96, k + 16),
            json!({"app": name}),
            Some(&name),
            &backends,
            endpointslice_version,
        );
    }
    out
}

impl ApiServer {
    /// Apply each object in order (see [`ApiServer::apply`]).
    ///
    /// # Panics
    ///
    /// On an object [`ApiServer::apply`] would refuse.
    pub fn load(&self, objects: Vec<Value>) {
        for obj in objects {
            self.apply(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sites_shape() {
        let objs = two_sites("v1");
        let kinds = |k: &str| objs.iter().filter(|o| o["kind"] == k).count();
        assert_eq!(
            (
                kinds("Node"),
                kinds("Service"),
                kinds("Endpoints"),
                kinds("EndpointSlice")
            ),
            (6, 3, 3, 3)
        );
        let slice = objs
            .iter()
            .find(|o| {
                o["kind"] == "EndpointSlice"
                    && o["metadata"]["labels"]["kubernetes.io/service-name"]
                        == "servicegrid-demo-svc"
            })
            .unwrap();
        let nodes: Vec<&str> = slice["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["nodeName"].as_str().unwrap())
            .collect();
        assert_eq!(nodes, ["bj-1", "bj-3", "gz-2", "gz-3"]);
        let beta = two_sites("v1beta1");
        let slice = beta
            .iter()
            .find(|o| o["kind"] == "EndpointSlice" && o["metadata"]["name"] != "kubernetes")
            .unwrap();
        assert_eq!(slice["apiVersion"], "discovery.k8s.io/v1beta1");
        assert!(slice["endpoints"][0]["topology"]["kubernetes.io/hostname"].is_string());
    }

    #[test]
    fn synthetic_shape() {
        let objs = synthetic(3, 2, 5, 4, "v1");
        assert_eq!(objs.len(), 6 + 5 * 3);
        let slice = &objs[6 + 2];
        assert_eq!(slice["endpoints"].as_array().unwrap().len(), 4);
        assert_eq!(slice["endpoints"][0]["nodeName"], "site-0-node-0");
        assert_eq!(slice["endpoints"][3]["nodeName"], "site-1-node-1");
    }
}
