//! The two-site world: `sample/two-sites.json` read into types, and the
//! objects a cluster holding it serves — nodes, Services, pods, and the
//! Endpoints and EndpointSlices the controllers would derive from them.

use std::{collections::BTreeMap, sync::LazyLock};

use serde::Deserialize;
use serde_json::{json, Value};

use super::objects::{
    endpoint_slice, endpoints, namespace, node, pod, service, suffix_for, Backend, PodSpec,
    ServiceSpec, SliceSpec,
};

/// The file, embedded so tests need no path.
const TWO_SITES_JSON: &str = include_str!("../../sample/two-sites.json");

/// The two-site world, parsed once.
pub static WORLD: LazyLock<World> = LazyLock::new(|| {
    // Embedded at build time and covered by this crate's tests: a parse
    // failure is a broken commit, not a runtime condition.
    serde_json::from_str(TWO_SITES_JSON).expect("sample/two-sites.json is valid")
});

/// What `two-sites.json` holds.
#[derive(Debug, Clone, Deserialize)]
pub struct World {
    /// The API server's own address (the `default/kubernetes` endpoint).
    pub apiserver: String,
    /// The Service IP range (`--service-cluster-ip-range`), which the
    /// default ServiceCIDR of 1.31+ holds.
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: String,
    /// The nodes.
    pub nodes: Vec<SampleNode>,
    /// The Services.
    pub services: Vec<SampleService>,
    /// The pods behind them.
    pub pods: Vec<SamplePod>,
}

/// A node of the world.
#[derive(Debug, Clone, Deserialize)]
pub struct SampleNode {
    /// `bj-1`.
    pub name: String,
    /// Its `location` label: the site.
    pub location: String,
    /// Its InternalIP.
    pub ip: String,
}

/// A Service of the world.
#[derive(Debug, Clone, Deserialize)]
pub struct SampleService {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.clusterIP` (`None` for a headless Service).
    #[serde(rename = "clusterIP")]
    pub cluster_ip: String,
    /// `spec.selector`.
    pub selector: BTreeMap<String, String>,
    /// The ServiceGrid that made it (it then carries `topologyKeys: '["location"]'`).
    #[serde(default)]
    pub grid: Option<String>,
    /// Its one port (ServicePort JSON).
    pub port: Value,
    /// `spec.trafficDistribution` on releases that have the field and the
    /// value (1.30+; `PreferSameNode` 1.33+).
    #[serde(default, rename = "trafficDistribution")]
    pub traffic_distribution: Option<String>,
}

/// A pod of the world: Running and Ready on its node.
#[derive(Debug, Clone, Deserialize)]
pub struct SamplePod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// Its pod IP.
    pub ip: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its container image.
    pub image: String,
    /// The port its container listens on.
    pub port: u16,
}

impl World {
    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&SampleNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The pods `svc` selects, in the file's order (by node).
    pub fn backends_of(&self, svc: &SampleService) -> Vec<&SamplePod> {
        self.pods
            .iter()
            .filter(|p| {
                p.namespace == svc.namespace
                    && svc.selector.iter().all(|(k, v)| p.labels.get(k) == Some(v))
            })
            .collect()
    }

    /// The Service `namespace/name`.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&SampleService> {
        self.services
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
    }

    /// The IPs of the pods behind `namespace/name` running in `site` (all
    /// sites: `None`), sorted as text (the order of an Endpoints' addresses).
    pub fn ips_of(&self, namespace: &str, name: &str, site: Option<&str>) -> Vec<String> {
        let Some(svc) = self.service(namespace, name) else {
            return Vec::new();
        };
        let mut ips: Vec<String> = self
            .backends_of(svc)
            .into_iter()
            .filter(|p| site.is_none_or(|s| self.node(&p.node).is_some_and(|n| n.location == s)))
            .map(|p| p.ip.clone())
            .collect();
        ips.sort();
        ips
    }
}

/// Every object of the two-site world, as kube-apiserver 1.20 stores them:
/// namespaces, nodes, `default/kubernetes`, each Service with its Endpoints
/// and one EndpointSlice (in `endpointslice_version`, "v1" or "v1beta1"),
/// and the pods.
pub fn two_sites(endpointslice_version: &str) -> Vec<Value> {
    let world = &*WORLD;
    let mut out: Vec<Value> = ["default", "kube-system", "kube-public", "kube-node-lease"]
        .into_iter()
        .map(namespace)
        .collect();
    out.extend(
        world
            .nodes
            .iter()
            .map(|n| node(&n.name, &n.location, &n.ip)),
    );
    kubernetes_service(&mut out, &world.apiserver, endpointslice_version);
    for svc in &world.services {
        service_objects(&mut out, world, svc, endpointslice_version);
    }
    out.extend(world.pods.iter().map(|p| {
        pod(&PodSpec {
            namespace: &p.namespace,
            name: &p.name,
            node: &p.node,
            node_ip: world.node(&p.node).map_or("", |n| n.ip.as_str()),
            ip: &p.ip,
            labels: json!(p.labels),
            image: &p.image,
            port: p.port,
        })
    }));
    out
}

/// A Service of the world with its Endpoints and EndpointSlice.
fn service_objects(out: &mut Vec<Value>, world: &World, svc: &SampleService, version: &str) {
    let (labels, annotations) = match &svc.grid {
        Some(grid) => (
            json!({"superedge.io/grid-selector": grid, "superedge.io/grid-uniq-key": "location"}),
            json!({"topologyKeys": "[\"location\"]"}),
        ),
        None => (json!({}), json!({})),
    };
    let ns = svc.namespace.as_str();
    out.push(service(&ServiceSpec {
        namespace: ns,
        name: &svc.name,
        cluster_ip: &svc.cluster_ip,
        selector: json!(svc.selector),
        labels: labels.clone(),
        annotations,
        port: svc.port.clone(),
    }));
    let backends: Vec<Backend> = world
        .backends_of(svc)
        .into_iter()
        .map(|p| Backend {
            ip: p.ip.clone(),
            node: Some(p.node.clone()),
            zone: world.node(&p.node).map(|n| n.location.clone()),
            pod: Some(p.name.clone()),
        })
        .collect();
    // The endpoint controllers copy the Service's labels, and mark the
    // endpoints of a headless Service so that kube-proxy (which never routes
    // to them) can leave them out of its lists.
    let mut marks = labels;
    if svc.cluster_ip == "None" {
        marks["service.kubernetes.io/headless"] = json!("");
    }
    let port_name = svc.port.get("name").cloned().unwrap_or(json!(""));
    let protocol = svc.port.get("protocol").cloned().unwrap_or(json!("TCP"));
    let target = svc.port.get("targetPort").cloned().unwrap_or(json!(80));
    let mut endpoint_port = json!({"port": target, "protocol": protocol});
    if port_name != json!("") {
        endpoint_port["name"] = port_name.clone();
    }
    out.push(endpoints(
        ns,
        &svc.name,
        marks.clone(),
        &backends,
        json!([endpoint_port]),
    ));
    let mut slice = endpoint_slice(
        &SliceSpec {
            namespace: ns,
            service: &svc.name,
            generated_suffix: Some(suffix_for(&format!("slice/{ns}/{}", svc.name))),
            ports: json!([{"name": port_name, "protocol": protocol, "port": target}]),
            version,
        },
        &backends,
    );
    if let (Some(labels), Some(marks)) = (
        slice["metadata"]["labels"].as_object_mut(),
        marks.as_object(),
    ) {
        labels.extend(marks.clone());
    }
    out.push(slice);
}

/// `default/kubernetes`: Service, Endpoints and EndpointSlice as in the reference.
fn kubernetes_service(out: &mut Vec<Value>, apiserver_ip: &str, version: &str) {
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
        ip: apiserver_ip.into(),
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
