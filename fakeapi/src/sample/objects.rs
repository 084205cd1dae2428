//! Builders for the sample objects, in the shapes kube-apiserver 1.20 stores
//! (reference Appendix A).

use serde_json::{json, Value};

/// A deterministic uid-shaped string for `seed` (FNV-1a), so sample data is
/// reproducible and ownerReferences can point at the right object.
pub(crate) fn uid_for(seed: &str) -> String {
    let hash = |salt: u64| {
        seed.bytes().fold(0xcbf2_9ce4_8422_2325 ^ salt, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    crate::apiserver::uuid_from(hash(0), hash(0x9e37_79b9))
}

/// Five lower-case characters derived from `seed`, for generated names.
pub(crate) fn suffix_for(seed: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = u64::from_str_radix(&uid_for(seed)[..8], 16).unwrap_or(7);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize];
            n /= ALPHABET.len() as u64;
            c as char
        })
        .collect()
}

/// A ready Node labelled `location=<location>`, zone `<location>`.
pub(crate) fn node(name: &str, location: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid_for(&format!("node/{name}")),
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "location": location,
                "topology.kubernetes.io/zone": location
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"}
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{
                "type": "Ready", "status": "True",
                "lastHeartbeatTime": "2026-11-21T15:12:22Z", "lastTransitionTime": "2026-11-21T15:12:22Z",
                "reason": "KubeletReady", "message": "kubelet is posting ready status"
            }],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
                "containerRuntimeVersion": "", "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2",
                "operatingSystem": "linux", "architecture": "amd64"
            }
        }
    })
}

/// An Active Namespace.
pub(crate) fn namespace(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "uid": uid_for(&format!("namespace/{name}"))},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

/// A ClusterIP Service (headless with `cluster_ip: "None"`) with one port.
pub(crate) struct ServiceSpec<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub cluster_ip: &'a str,
    pub selector: Value,
    pub labels: Value,
    pub annotations: Value,
    pub port: Value,
}

/// The Service object.
pub(crate) fn service(s: &ServiceSpec<'_>) -> Value {
    let mut meta = json!({
        "name": s.name,
        "namespace": s.namespace,
        "uid": uid_for(&format!("service/{}/{}", s.namespace, s.name)),
    });
    if s.labels.as_object().is_some_and(|m| !m.is_empty()) {
        meta["labels"] = s.labels.clone();
    }
    if s.annotations.as_object().is_some_and(|m| !m.is_empty()) {
        meta["annotations"] = s.annotations.clone();
    }
    let mut spec = json!({"ports": [s.port.clone()]});
    if s.selector.as_object().is_some_and(|m| !m.is_empty()) {
        spec["selector"] = s.selector.clone();
    }
    spec["clusterIP"] = json!(s.cluster_ip);
    if s.cluster_ip != "None" {
        spec["clusterIPs"] = json!([s.cluster_ip]);
    }
    spec["type"] = json!("ClusterIP");
    spec["sessionAffinity"] = json!("None");
    json!({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": {"loadBalancer": {}}})
}

/// One ready backend of a Service.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    pub ip: String,
    /// Node name; `None` for the apiserver's own endpoint.
    pub node: Option<String>,
    /// The node's zone.
    pub zone: Option<String>,
    /// Backing pod name; `None` for the apiserver's own endpoint.
    pub pod: Option<String>,
}

fn target_ref(namespace: &str, pod: &str) -> Value {
    json!({
        "kind": "Pod", "namespace": namespace, "name": pod,
        "uid": uid_for(&format!("pod/{namespace}/{pod}")), "resourceVersion": "335"
    })
}

/// The Endpoints of a Service: one subset with every backend and `ports`
/// (EndpointPort objects: name, port, protocol).
pub(crate) fn endpoints(
    namespace: &str,
    name: &str,
    labels: Value,
    backends: &[Backend],
    ports: Value,
) -> Value {
    let mut sorted: Vec<&Backend> = backends.iter().collect();
    sorted.sort_by(|a, b| a.ip.cmp(&b.ip));
    let addresses: Vec<Value> = sorted
        .iter()
        .map(|b| {
            let mut a = json!({"ip": b.ip});
            if let Some(n) = &b.node {
                a["nodeName"] = json!(n);
            }
            if let Some(p) = &b.pod {
                a["targetRef"] = target_ref(namespace, p);
            }
            a
        })
        .collect();
    let mut meta = json!({"name": name, "namespace": namespace});
    if labels.as_object().is_some_and(|m| !m.is_empty()) {
        meta["labels"] = labels;
    }
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": meta,
        "subsets": [{"addresses": addresses, "ports": ports}]
    })
}

/// How an EndpointSlice is named and owned.
pub(crate) struct SliceSpec<'a> {
    pub namespace: &'a str,
    pub service: &'a str,
    /// `None`: named after the service, unmanaged (like `default/kubernetes`).
    pub generated_suffix: Option<String>,
    /// EndpointPort objects in slice order (name, protocol, port).
    pub ports: Value,
    pub version: &'a str,
}

/// One EndpointSlice endpoint in `version`'s shape.
fn slice_endpoint(namespace: &str, b: &Backend, version: &str) -> Value {
    let mut ep = json!({"addresses": [b.ip]});
    ep["conditions"] = if version == "v1beta1" {
        json!({"ready": true})
    } else {
        json!({"ready": true, "serving": true, "terminating": false})
    };
    if let Some(p) = &b.pod {
        ep["targetRef"] = target_ref(namespace, p);
    }
    if version == "v1beta1" {
        if let Some(n) = &b.node {
            let mut topology = json!({"kubernetes.io/hostname": n});
            if let Some(z) = &b.zone {
                topology["topology.kubernetes.io/zone"] = json!(z);
            }
            ep["topology"] = topology;
            ep["nodeName"] = json!(n);
        }
    } else {
        if let Some(n) = &b.node {
            ep["nodeName"] = json!(n);
        }
        if let Some(z) = &b.zone {
            ep["zone"] = json!(z);
        }
    }
    ep
}

/// An EndpointSlice holding `backends`.
pub(crate) fn endpoint_slice(s: &SliceSpec<'_>, backends: &[Backend]) -> Value {
    let meta = match &s.generated_suffix {
        Some(suffix) => json!({
            "name": format!("{}-{suffix}", s.service),
            "generateName": format!("{}-", s.service),
            "namespace": s.namespace,
            "labels": {
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                "kubernetes.io/service-name": s.service
            },
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-21T15:12:23Z"},
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Service", "name": s.service,
                "uid": uid_for(&format!("service/{}/{}", s.namespace, s.service)),
                "controller": true, "blockOwnerDeletion": true
            }]
        }),
        None => json!({
            "name": s.service,
            "namespace": s.namespace,
            "labels": {"kubernetes.io/service-name": s.service}
        }),
    };
    let endpoints: Vec<Value> = backends
        .iter()
        .map(|b| slice_endpoint(s.namespace, b, s.version))
        .collect();
    json!({
        "apiVersion": format!("discovery.k8s.io/{}", s.version),
        "kind": "EndpointSlice",
        "metadata": meta,
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": s.ports.clone()
    })
}

/// A pod, as a kubelet reports it: bound to its node, Running and Ready.
pub(crate) struct PodSpec<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub node: &'a str,
    pub node_ip: &'a str,
    pub ip: &'a str,
    pub labels: Value,
    pub image: &'a str,
    pub port: u16,
}

/// The Pod object.
pub(crate) fn pod(p: &PodSpec<'_>) -> Value {
    let ready = |t: &str| {
        json!({"type": t, "status": "True", "lastProbeTime": null,
               "lastTransitionTime": "2026-11-21T15:12:23Z"})
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": p.name,
            "namespace": p.namespace,
            "uid": uid_for(&format!("pod/{}/{}", p.namespace, p.name)),
            "labels": p.labels
        },
        "spec": {
            "nodeName": p.node,
            "containers": [{
                "name": "main",
                "image": p.image,
                "ports": [{"containerPort": p.port, "protocol": "TCP"}]
            }]
        },
        "status": {
            "phase": "Running",
            "conditions": [ready("Initialized"), ready("Ready"), ready("ContainersReady"), ready("PodScheduled")],
            "hostIP": p.node_ip,
            "podIP": p.ip,
            "podIPs": [{"ip": p.ip}],
            "startTime": "2026-11-21T15:12:23Z"
        }
    })
}
