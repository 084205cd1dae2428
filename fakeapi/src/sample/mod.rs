//! Sample clusters to load into the [`ApiServer`]: the two-site SuperEdge
//! example (the one test world: `sample/two-sites.json`, also loaded into the
//! real cluster by `deploy/e2e/sample.sh`), as kube-apiserver 1.20 stores it
//! ([`two_sites`]) or as the release a server plays does ([`two_sites_for`],
//! [`ApiServer::load_two_sites`]); and a large synthetic cluster for
//! benchmarks.

mod objects;
mod release;
mod world;

use serde_json::{json, Value};

use crate::apiserver::ApiServer;
use objects::{
    endpoint_slice, endpoints, kubelet_node, service, suffix_for, Backend, ServiceSpec, SliceSpec,
};
pub use release::two_sites_for;
pub use world::{two_sites, World, WORLD};

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

/// The `index`-th address of the /8-style block starting at `base`.second octet.
fn addr(first: u8, second: u8, index: usize) -> String {
    let second = usize::from(second) + index / 65_536;
    format!("{first}.{second}.{}.{}", (index / 256) % 256, index % 256)
}

/// The synthetic cluster's size as command-line flags: the in-memory API
/// server's and the benchmarks' (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
pub struct SyntheticSize {
    /// Synthetic sample: number of sites.
    #[arg(long, default_value_t = 10)]
    pub sites: usize,
    /// Synthetic sample: nodes per site.
    #[arg(long, default_value_t = 10)]
    pub nodes_per_site: usize,
    /// Synthetic sample: number of Services (each with Endpoints and one EndpointSlice).
    #[arg(long, default_value_t = 1000)]
    pub services: usize,
    /// Synthetic sample: endpoints per Service.
    #[arg(long, default_value_t = 10)]
    pub endpoints_per_service: usize,
}

impl SyntheticSize {
    /// The cluster's objects ([`synthetic`]), EndpointSlices in `endpointslice_version`.
    pub fn objects(&self, endpointslice_version: &str) -> Vec<Value> {
        synthetic(
            self.sites,
            self.nodes_per_site,
            self.services,
            self.endpoints_per_service,
            endpointslice_version,
        )
    }

    /// Endpoints in all.
    pub fn endpoints(&self) -> usize {
        self.services * self.endpoints_per_service
    }
}

/// A large synthetic cluster: `sites` sites of `nodes_per_site` nodes
/// (`site-<i>-node-<j>`, label `location=site-<i>`, each a full kubelet-made
/// Node of about 5 KB with managedFields, conditions and images), and `services` Services
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
            let index = nodes.len();
            out.push(kubelet_node(
                &name,
                &location,
                &addr(172, 16, index + 1),
                index,
            ));
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
                kinds("EndpointSlice"),
                kinds("Pod")
            ),
            (6, 5, 5, 5, 7),
            "the file's nodes, Services (and default/kubernetes) and pods"
        );
        let slice = |objs: &[Value], svc: &str| {
            objs.iter()
                .find(|o| {
                    o["kind"] == "EndpointSlice"
                        && o["metadata"]["labels"]["kubernetes.io/service-name"] == svc
                })
                .unwrap()
                .clone()
        };
        let demo = slice(&objs, "servicegrid-demo-svc");
        let nodes: Vec<&str> = demo["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["nodeName"].as_str().unwrap())
            .collect();
        assert_eq!(nodes, ["bj-1", "bj-3", "gz-2", "gz-3"]);
        // The headless Service's endpoints carry the controllers' mark.
        let headless = slice(&objs, "echo-headless");
        assert_eq!(
            headless["metadata"]["labels"]["service.kubernetes.io/headless"],
            ""
        );
        assert_eq!(
            WORLD.ips_of("default", "servicegrid-demo-svc", Some("beijing")),
            ["10.0.0.70", "10.0.1.72"]
        );
        let beta = two_sites("v1beta1");
        let demo = slice(&beta, "servicegrid-demo-svc");
        assert_eq!(demo["apiVersion"], "discovery.k8s.io/v1beta1");
        assert!(demo["endpoints"][0]["topology"]["kubernetes.io/hostname"].is_string());
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
