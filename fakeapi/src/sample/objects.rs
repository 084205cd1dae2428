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

/// `len` lower-case hex digits derived from `seed` (digests, machine ids).
fn hex_for(seed: &str, len: usize) -> String {
    let mut out = String::with_capacity(len + 32);
    let mut round = 0u32;
    while out.len() < len {
        out.extend(
            uid_for(&format!("{seed}/{round}"))
                .chars()
                .filter(|c| *c != '-'),
        );
        round += 1;
    }
    out.truncate(len);
    out
}

/// The images a node of the synthetic cluster holds: `(repository, tag, sizeBytes)`.
const NODE_IMAGES: &[(&str, &str, u64)] = &[
    ("k8s.gcr.io/kube-proxy", "v1.20.2", 118_396_107),
    ("quay.io/coreos/flannel", "v0.13.0", 57_156_911),
    ("k8s.gcr.io/coredns", "1.7.0", 45_227_747),
    ("sitegrid/sitegrid-proxy", "0.1.0", 21_804_032),
    ("sitegrid/sitegrid-dnsd", "0.1.0", 9_871_360),
    ("superedge/echoserver", "2.2", 95_348_101),
    ("nginx", "1.19.6", 132_978_470),
    ("busybox", "1.32.1", 1_231_731),
    ("k8s.gcr.io/pause", "3.2", 682_696),
];

/// A Node as a kubelet 1.20 (with kubeadm, flannel and the docker runtime)
/// registers and reports it, the `index`-th of the cluster: labels, the
/// annotations and `managedFields` of kubeadm, kube-controller-manager, the
/// kubelet and `kubectl label` (its `location`), a pod CIDR, capacity and
/// allocatable, five conditions, addresses, nodeInfo and its images. About
/// 5 KB of JSON, as a real one (the two-site sample's nodes are minimal).
pub(crate) fn kubelet_node(name: &str, location: &str, ip: &str, index: usize) -> Value {
    const T0: &str = "2026-11-21T15:12:22Z";
    let cidr = format!("10.{}.{}.0/24", 64 + index / 256, index % 256);
    let condition = |ty: &str, status: &str, reason: &str, message: &str| {
        json!({"type": ty, "status": status, "lastHeartbeatTime": T0, "lastTransitionTime": T0,
               "reason": reason, "message": message})
    };
    let images: Vec<Value> = NODE_IMAGES
        .iter()
        .map(|(repo, tag, size)| {
            let digest = hex_for(&format!("image/{repo}:{tag}"), 64);
            json!({"names": [format!("{repo}@sha256:{digest}"), format!("{repo}:{tag}")], "sizeBytes": size})
        })
        .collect();
    let managed = |manager: &str, fields: Value| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "time": T0,
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    };
    let condition_fields = |ty: &str| {
        (
            format!("k:{{\"type\":\"{ty}\"}}"),
            json!({".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {},
                   "f:reason": {}, "f:status": {}, "f:type": {}}),
        )
    };
    let resources = json!({".": {}, "f:cpu": {}, "f:ephemeral-storage": {}, "f:hugepages-1Gi": {},
                           "f:hugepages-2Mi": {}, "f:memory": {}, "f:pods": {}});
    let mut conditions = serde_json::Map::new();
    conditions.insert(".".into(), json!({}));
    for ty in ["DiskPressure", "MemoryPressure", "PIDPressure", "Ready"] {
        let (k, v) = condition_fields(ty);
        conditions.insert(k, v);
    }
    let kubelet_fields = json!({
        "f:metadata": {
            "f:annotations": {".": {}, "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
            "f:labels": {".": {}, "f:beta.kubernetes.io/arch": {}, "f:beta.kubernetes.io/os": {},
                         "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {}}
        },
        "f:status": {
            "f:addresses": {".": {},
                "k:{\"type\":\"Hostname\"}": {".": {}, "f:address": {}, "f:type": {}},
                "k:{\"type\":\"InternalIP\"}": {".": {}, "f:address": {}, "f:type": {}}},
            "f:allocatable": resources,
            "f:capacity": resources,
            "f:conditions": conditions,
            "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}},
            "f:images": {},
            "f:nodeInfo": {"f:architecture": {}, "f:bootID": {}, "f:containerRuntimeVersion": {},
                           "f:kernelVersion": {}, "f:kubeProxyVersion": {}, "f:kubeletVersion": {},
                           "f:machineID": {}, "f:operatingSystem": {}, "f:osImage": {}, "f:systemUUID": {}}
        }
    });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid_for(&format!("node/{name}")),
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "location": location,
                "topology.kubernetes.io/zone": location
            },
            "annotations": {
                "flannel.alpha.coreos.com/backend-data": format!("{{\"VtepMAC\":\"{}\"}}", mac_for(name)),
                "flannel.alpha.coreos.com/backend-type": "vxlan",
                "flannel.alpha.coreos.com/kube-subnet-manager": "true",
                "flannel.alpha.coreos.com/public-ip": ip,
                "kubeadm.alpha.kubernetes.io/cri-socket": "/var/run/dockershim.sock",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"
            },
            "managedFields": [
                managed("kubeadm", json!({"f:metadata": {"f:annotations": {"f:kubeadm.alpha.kubernetes.io/cri-socket": {}}}})),
                managed("kube-controller-manager", json!({
                    "f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}},
                    "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, format!("v:\"{cidr}\""): {}}}
                })),
                managed("flanneld", json!({
                    "f:metadata": {"f:annotations": {"f:flannel.alpha.coreos.com/backend-data": {},
                        "f:flannel.alpha.coreos.com/backend-type": {}, "f:flannel.alpha.coreos.com/kube-subnet-manager": {},
                        "f:flannel.alpha.coreos.com/public-ip": {}}},
                    "f:status": {"f:conditions": {"k:{\"type\":\"NetworkUnavailable\"}": {".": {},
                        "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {},
                        "f:status": {}, "f:type": {}}}}
                })),
                managed("kubelet", kubelet_fields),
                managed("kubectl-label", json!({"f:metadata": {"f:labels": {"f:location": {}, "f:topology.kubernetes.io/zone": {}}}}))
            ]
        },
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        "status": {
            "capacity": {"cpu": "4", "ephemeral-storage": "101445540Ki", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "memory": "8152900Ki", "pods": "110"},
            "allocatable": {"cpu": "4", "ephemeral-storage": "93492209510", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "memory": "8050500Ki", "pods": "110"},
            "conditions": [
                condition("NetworkUnavailable", "False", "FlannelIsUp", "Flannel is running on this node"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status. AppArmor enabled")
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hex_for(&format!("machine/{name}"), 32),
                "systemUUID": uid_for(&format!("system/{name}")).to_uppercase(),
                "bootID": uid_for(&format!("boot/{name}")),
                "kernelVersion": "5.10.0-20-amd64",
                "osImage": "Debian GNU/Linux 11 (bullseye)",
                "containerRuntimeVersion": "docker://20.10.5",
                "kubeletVersion": "v1.20.2",
                "kubeProxyVersion": "v1.20.2",
                "operatingSystem": "linux",
                "architecture": "amd64"
            },
            "images": images
        }
    })
}

/// A locally administered MAC address derived from `seed` (flannel's VTEP).
fn mac_for(seed: &str) -> String {
    let hex = hex_for(&format!("mac/{seed}"), 10);
    let mut mac = String::from("02");
    for pair in hex.as_bytes().chunks(2) {
        mac.push(':');
        mac.push_str(std::str::from_utf8(pair).unwrap_or("00"));
    }
    mac
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
