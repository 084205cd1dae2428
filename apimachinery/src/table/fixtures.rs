//! Objects from the reference capture (`kubectl get` against kube-apiserver
//! 1.20), shared by every printer's tests.

use serde_json::{json, Value};

use crate::duration::parse_rfc3339;

/// The reference capture's request time: `web` (created 15:12:23) is 2m43s old.
pub(super) fn now() -> i64 {
    parse_rfc3339("2026-11-21T15:15:06Z").unwrap()
}

/// The metadata every fixture shares, named `name`, created at `created`.
pub(super) fn meta(name: &str, created: &str) -> Value {
    json!({"name": name, "namespace": "default", "uid": "4a38af75", "resourceVersion": "413",
           "creationTimestamp": created})
}

/// A Service named `name` with `spec`, created 2m43s before [`now`].
pub(super) fn service(name: &str, spec: Value) -> Value {
    json!({"kind": "Service", "apiVersion": "v1", "metadata": meta(name, "2026-11-21T15:12:23Z"),
           "spec": spec, "status": {"loadBalancer": {}}})
}

/// The reference capture's `web` EndpointSlice: three ready endpoints, port 8080.
pub(super) fn web_slice() -> Value {
    json!({"metadata": meta("web-6hr22", "2026-11-21T15:12:23Z"), "addressType": "IPv4",
           "endpoints": [
               {"addresses": ["10.244.1.2"], "conditions": {"ready": true},
                "topology": {"kubernetes.io/hostname": "n1"}},
               {"addresses": ["10.244.2.2"], "conditions": {"ready": true}},
               {"addresses": ["10.244.3.2"], "conditions": {"ready": true}}],
           "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]})
}

/// The reference capture's node `n1`, Ready, with an InternalIP.
pub(super) fn n1() -> Value {
    json!({"metadata": {"name": "n1", "creationTimestamp": "2026-11-21T15:12:22Z",
                        "labels": {"kubernetes.io/hostname": "n1", "zone": "z1"}},
           "spec": {"podCIDR": "10.244.1.0/24"},
           "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                      "addresses": [{"type": "InternalIP", "address": "172.20.0.11"},
                                    {"type": "Hostname", "address": "n1"}],
                      "nodeInfo": {"kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                   "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2"}}})
}
