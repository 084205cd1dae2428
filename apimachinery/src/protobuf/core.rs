//! `v1` Endpoints, Service and Node messages from their JSON (k8s-openapi)
//! forms, writing fields as Go does (see [`super::meta`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as json;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as JsonQuantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString as JsonIntOrString;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;

use super::meta::{condition, object_meta, s, time, time_ptr};

/// `v1.Endpoints`.
pub(super) fn endpoints(e: json::Endpoints) -> pb::Endpoints {
    pb::Endpoints {
        metadata: Some(object_meta(e.metadata)),
        subsets: e
            .subsets
            .unwrap_or_default()
            .into_iter()
            .map(|s| pb::EndpointSubset {
                addresses: addresses(s.addresses),
                not_ready_addresses: addresses(s.not_ready_addresses),
                ports: s
                    .ports
                    .unwrap_or_default()
                    .into_iter()
                    .map(|p| pb::EndpointPort {
                        name: self::s(p.name),
                        port: Some(p.port),
                        protocol: self::s(p.protocol),
                        app_protocol: p.app_protocol,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn addresses(list: Option<Vec<json::EndpointAddress>>) -> Vec<pb::EndpointAddress> {
    list.unwrap_or_default()
        .into_iter()
        .map(|a| pb::EndpointAddress {
            ip: Some(a.ip),
            hostname: s(a.hostname),
            node_name: a.node_name,
            target_ref: a.target_ref.map(object_reference),
        })
        .collect()
}

/// `v1.ObjectReference`: every field a value.
pub(super) fn object_reference(r: json::ObjectReference) -> pb::ObjectReference {
    pb::ObjectReference {
        kind: s(r.kind),
        namespace: s(r.namespace),
        name: s(r.name),
        uid: s(r.uid),
        api_version: s(r.api_version),
        resource_version: s(r.resource_version),
        field_path: s(r.field_path),
    }
}

/// `v1.Service`.
pub(super) fn service(svc: json::Service) -> pb::Service {
    let spec = svc.spec.unwrap_or_default();
    let status = svc.status.unwrap_or_default();
    pb::Service {
        metadata: Some(object_meta(svc.metadata)),
        spec: Some(pb::ServiceSpec {
            ports: spec
                .ports
                .unwrap_or_default()
                .into_iter()
                .map(service_port)
                .collect(),
            selector: spec.selector.unwrap_or_default(),
            cluster_ip: s(spec.cluster_ip),
            cluster_ips: spec.cluster_ips.unwrap_or_default(),
            r#type: s(spec.type_),
            external_ips: spec.external_ips.unwrap_or_default(),
            session_affinity: s(spec.session_affinity),
            load_balancer_ip: s(spec.load_balancer_ip),
            load_balancer_source_ranges: spec.load_balancer_source_ranges.unwrap_or_default(),
            external_name: s(spec.external_name),
            external_traffic_policy: s(spec.external_traffic_policy),
            health_check_node_port: Some(spec.health_check_node_port.unwrap_or_default()),
            publish_not_ready_addresses: Some(spec.publish_not_ready_addresses.unwrap_or_default()),
            session_affinity_config: spec.session_affinity_config.map(|c| {
                pb::SessionAffinityConfig {
                    client_ip: c.client_ip.map(|ip| pb::ClientIpConfig {
                        timeout_seconds: ip.timeout_seconds,
                    }),
                }
            }),
            ip_families: spec.ip_families.unwrap_or_default(),
            ip_family_policy: spec.ip_family_policy,
            allocate_load_balancer_node_ports: spec.allocate_load_balancer_node_ports,
            load_balancer_class: spec.load_balancer_class,
            internal_traffic_policy: spec.internal_traffic_policy,
            traffic_distribution: spec.traffic_distribution,
        }),
        status: Some(pb::ServiceStatus {
            load_balancer: Some(pb::LoadBalancerStatus {
                ingress: status
                    .load_balancer
                    .and_then(|lb| lb.ingress)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| pb::LoadBalancerIngress {
                        ip: s(i.ip),
                        hostname: s(i.hostname),
                        ip_mode: i.ip_mode,
                        ports: i
                            .ports
                            .unwrap_or_default()
                            .into_iter()
                            .map(|p| pb::PortStatus {
                                port: Some(p.port),
                                protocol: Some(p.protocol),
                                error: p.error,
                            })
                            .collect(),
                    })
                    .collect(),
            }),
            conditions: status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .map(condition)
                .collect(),
        }),
    }
}

fn service_port(p: json::ServicePort) -> pb::ServicePort {
    pb::ServicePort {
        name: s(p.name),
        protocol: s(p.protocol),
        app_protocol: p.app_protocol,
        port: Some(p.port),
        target_port: Some(int_or_string(p.target_port)),
        node_port: Some(p.node_port.unwrap_or_default()),
    }
}

/// `intstr.IntOrString`, a value: type 0 with `intVal`, or type 1 with `strVal`.
fn int_or_string(v: Option<JsonIntOrString>) -> IntOrString {
    match v {
        Some(JsonIntOrString::String(text)) => IntOrString {
            r#type: Some(1),
            int_val: Some(0),
            str_val: Some(text),
        },
        Some(JsonIntOrString::Int(n)) => IntOrString {
            r#type: Some(0),
            int_val: Some(n),
            str_val: Some(String::new()),
        },
        None => IntOrString {
            r#type: Some(0),
            int_val: Some(0),
            str_val: Some(String::new()),
        },
    }
}

/// `v1.Node`.
pub(super) fn node(n: json::Node) -> pb::Node {
    let spec = n.spec.unwrap_or_default();
    pb::Node {
        metadata: Some(object_meta(n.metadata)),
        spec: Some(pb::NodeSpec {
            pod_cidr: s(spec.pod_cidr),
            pod_cid_rs: spec.pod_cidrs.unwrap_or_default(),
            provider_id: s(spec.provider_id),
            unschedulable: Some(spec.unschedulable.unwrap_or_default()),
            taints: spec
                .taints
                .unwrap_or_default()
                .into_iter()
                .map(|t| pb::Taint {
                    key: Some(t.key),
                    value: s(t.value),
                    effect: Some(t.effect),
                    time_added: time_ptr(t.time_added),
                })
                .collect(),
            config_source: spec.config_source.map(config_source),
            external_id: s(spec.external_id),
        }),
        status: Some(node_status(n.status.unwrap_or_default())),
    }
}

fn node_status(st: json::NodeStatus) -> pb::NodeStatus {
    let info = st.node_info.unwrap_or_default();
    pb::NodeStatus {
        capacity: quantities(st.capacity),
        allocatable: quantities(st.allocatable),
        phase: s(st.phase),
        conditions: st
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| pb::NodeCondition {
                r#type: Some(c.type_),
                status: Some(c.status),
                last_heartbeat_time: time(c.last_heartbeat_time),
                last_transition_time: time(c.last_transition_time),
                reason: s(c.reason),
                message: s(c.message),
            })
            .collect(),
        addresses: st
            .addresses
            .unwrap_or_default()
            .into_iter()
            .map(|a| pb::NodeAddress {
                r#type: Some(a.type_),
                address: Some(a.address),
            })
            .collect(),
        daemon_endpoints: Some(pb::NodeDaemonEndpoints {
            kubelet_endpoint: Some(pb::DaemonEndpoint {
                port: Some(
                    st.daemon_endpoints
                        .and_then(|d| d.kubelet_endpoint)
                        .map(|k| k.port)
                        .unwrap_or_default(),
                ),
            }),
        }),
        node_info: Some(pb::NodeSystemInfo {
            machine_id: Some(info.machine_id),
            system_uuid: Some(info.system_uuid),
            boot_id: Some(info.boot_id),
            kernel_version: Some(info.kernel_version),
            os_image: Some(info.os_image),
            container_runtime_version: Some(info.container_runtime_version),
            kubelet_version: Some(info.kubelet_version),
            kube_proxy_version: Some(info.kube_proxy_version),
            operating_system: Some(info.operating_system),
            architecture: Some(info.architecture),
            swap: info.swap.map(|sw| pb::NodeSwapStatus {
                capacity: sw.capacity,
            }),
        }),
        images: st
            .images
            .unwrap_or_default()
            .into_iter()
            .map(|i| pb::ContainerImage {
                names: i.names.unwrap_or_default(),
                size_bytes: Some(i.size_bytes.unwrap_or_default()),
            })
            .collect(),
        volumes_in_use: st.volumes_in_use.unwrap_or_default(),
        volumes_attached: st
            .volumes_attached
            .unwrap_or_default()
            .into_iter()
            .map(|v| pb::AttachedVolume {
                name: Some(v.name),
                device_path: Some(v.device_path),
            })
            .collect(),
        config: st.config.map(|c| pb::NodeConfigStatus {
            assigned: c.assigned.map(config_source),
            active: c.active.map(config_source),
            last_known_good: c.last_known_good.map(config_source),
            error: s(c.error),
        }),
        runtime_handlers: st
            .runtime_handlers
            .unwrap_or_default()
            .into_iter()
            .map(|h| pb::NodeRuntimeHandler {
                name: s(h.name),
                features: h.features.map(|f| pb::NodeRuntimeHandlerFeatures {
                    recursive_read_only_mounts: f.recursive_read_only_mounts,
                    user_namespaces: f.user_namespaces,
                }),
            })
            .collect(),
        features: st.features.map(|f| pb::NodeFeatures {
            supplemental_groups_policy: f.supplemental_groups_policy,
        }),
        declared_features: Vec::new(),
    }
}

fn config_source(c: json::NodeConfigSource) -> pb::NodeConfigSource {
    pb::NodeConfigSource {
        config_map: c.config_map.map(|m| pb::ConfigMapNodeConfigSource {
            namespace: Some(m.namespace),
            name: Some(m.name),
            uid: s(m.uid),
            resource_version: s(m.resource_version),
            kubelet_config_key: Some(m.kubelet_config_key),
        }),
    }
}

fn quantities(map: Option<BTreeMap<String, JsonQuantity>>) -> BTreeMap<String, Quantity> {
    map.unwrap_or_default()
        .into_iter()
        .map(|(k, q)| (k, Quantity { string: Some(q.0) }))
        .collect()
}
