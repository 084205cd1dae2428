//! The two-site world as a newer kube-apiserver stores it: the objects of
//! [`two_sites`] (EndpointSlices in v1) with the fields that release's
//! defaulting and controllers add, and its default ServiceCIDR. Derived
//! from the one world, never a second one; 1.20 gets [`two_sites`] itself,
//! byte for byte.
//!
//! What a release adds (sources in `docs/research/kube-proxy-1.29-1.35.md`,
//! "the note"):
//! - Services: `clusterIPs` (headless ones too: `["None"]`), `ipFamilies`
//!   `["IPv4"]` and `ipFamilyPolicy: SingleStack` (dual-stack defaulting,
//!   on since 1.21), `internalTrafficPolicy: Cluster` (defaulted since
//!   1.22), and the world's `trafficDistribution` where the release knows
//!   the value (the note §4.2: the field since 1.30, `PreferSameZone` and
//!   `PreferSameNode` since 1.33).
//! - EndpointSlices: the hints the EndpointSlice controller writes for that
//!   `trafficDistribution` on every ready endpoint: `forZones` its zone
//!   (`PreferClose`, `PreferSameZone`), and for `PreferSameNode` also
//!   `forNodes` its node (KEP-3015: the zone hint stays as the fallback of
//!   proxies that do not read node hints). `conditions.serving`,
//!   `terminating` and `zone` are already in the v1 shape.
//! - The ServiceCIDR `kubernetes` the apiserver creates for its service
//!   range, Ready, with the service-cidr controller's finalizer, wherever
//!   `servicecidrs` are served.

use serde_json::{json, Map, Value};

use super::objects::uid_for;
use super::world::{two_sites, SampleService, WORLD};

use crate::apiserver::{ApiServer, ApiServerConfig, ConfigError, KubernetesVersion, Profile};

/// Every object of the two-site world as the release `config` plays stores
/// it (its EndpointSlice version, its gates: a 1.31 server without
/// MultiCIDRServiceAllocator has no ServiceCIDR), or why the configuration
/// is refused.
pub fn two_sites_for(config: &ApiServerConfig) -> Result<Vec<Value>, ConfigError> {
    Ok(objects_for(&config.profile()?))
}

/// The two-site world for `profile`.
pub(crate) fn objects_for(profile: &Profile) -> Vec<Value> {
    if profile.version == KubernetesVersion::V1_20 {
        return two_sites(profile.endpointslice_version);
    }
    let mut objs = two_sites("v1");
    for obj in &mut objs {
        match obj["kind"].as_str() {
            Some("Service") => upgrade_service(obj, profile.version),
            Some("EndpointSlice") => add_hints(obj, profile.version),
            _ => {}
        }
    }
    if let Some(version) = profile.service_cidrs {
        // Created by the apiserver at start, with the namespaces.
        let at = objs
            .iter()
            .position(|o| o["kind"] != "Namespace")
            .unwrap_or(objs.len());
        objs.insert(at, default_service_cidr(&WORLD.service_cidr, version));
    }
    objs
}

impl ApiServer {
    /// Load the two-site world as this server's release stores it
    /// ([`two_sites_for`] with its own configuration).
    pub fn load_two_sites(&self) {
        self.load(objects_for(&self.profile()));
    }
}

/// The world's Service `namespace/name`, if it is one (`kubernetes` is not).
fn world_service(obj: &Value) -> Option<&'static SampleService> {
    let meta = &obj["metadata"];
    WORLD.service(meta["namespace"].as_str()?, meta["name"].as_str()?)
}

/// `svc`'s `trafficDistribution` if `version` accepts the value.
fn traffic_distribution(svc: &SampleService, version: KubernetesVersion) -> Option<&str> {
    let value = svc.traffic_distribution.as_deref()?;
    let since = match value {
        "PreferClose" => KubernetesVersion::V1_31,
        // PreferSameTrafficDistribution: Alpha in 1.33, on from 1.34.
        "PreferSameZone" | "PreferSameNode" => KubernetesVersion::V1_35,
        _ => return None,
    };
    (version >= since).then_some(value)
}

/// ServiceSpec's fields in the order Go's encoder writes them.
const SERVICE_SPEC_ORDER: &[&str] = &[
    "ports",
    "selector",
    "clusterIP",
    "clusterIPs",
    "type",
    "externalIPs",
    "sessionAffinity",
    "loadBalancerIP",
    "loadBalancerSourceRanges",
    "externalName",
    "externalTrafficPolicy",
    "healthCheckNodePort",
    "publishNotReadyAddresses",
    "sessionAffinityConfig",
    "ipFamilies",
    "ipFamilyPolicy",
    "allocateLoadBalancerNodePorts",
    "loadBalancerClass",
    "internalTrafficPolicy",
    "trafficDistribution",
];

/// A ClusterIP Service as `version` defaults and stores it.
fn upgrade_service(svc: &mut Value, version: KubernetesVersion) {
    let distribution = world_service(svc).and_then(|s| traffic_distribution(s, version));
    let Some(Value::Object(spec)) = svc.get_mut("spec") else {
        return;
    };
    if let Some(ip) = spec.get("clusterIP").cloned() {
        spec.entry("clusterIPs").or_insert_with(|| json!([ip]));
    }
    spec.insert("ipFamilies".into(), json!(["IPv4"]));
    spec.insert("ipFamilyPolicy".into(), json!("SingleStack"));
    spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    if let Some(d) = distribution {
        spec.insert("trafficDistribution".into(), json!(d));
    }
    let mut ordered = Map::with_capacity(spec.len());
    for key in SERVICE_SPEC_ORDER {
        if let Some(v) = spec.shift_remove(*key) {
            ordered.insert((*key).to_owned(), v);
        }
    }
    ordered.append(spec);
    *spec = ordered;
}

/// The hints the EndpointSlice controller of `version` writes on `slice`.
fn add_hints(slice: &mut Value, version: KubernetesVersion) {
    let meta = &slice["metadata"];
    let svc = match (
        meta["namespace"].as_str(),
        meta["labels"]["kubernetes.io/service-name"].as_str(),
    ) {
        (Some(ns), Some(name)) => WORLD.service(ns, name),
        _ => None,
    };
    let Some(distribution) = svc.and_then(|s| traffic_distribution(s, version)) else {
        return;
    };
    let Some(Value::Array(endpoints)) = slice.get_mut("endpoints") else {
        return;
    };
    for ep in endpoints {
        if ep["conditions"]["ready"] != json!(true) {
            continue;
        }
        let mut hints = Map::new();
        if let Some(zone) = ep["zone"].as_str() {
            hints.insert("forZones".into(), json!([{ "name": zone }]));
        }
        if distribution == "PreferSameNode" {
            if let Some(node) = ep["nodeName"].as_str() {
                hints.insert("forNodes".into(), json!([{ "name": node }]));
            }
        }
        if !hints.is_empty() {
            ep["hints"] = Value::Object(hints);
        }
    }
}

/// The ServiceCIDR `kubernetes` kube-apiserver keeps for its own service
/// range, in `version` of networking.k8s.io: the default-servicecidr
/// controller's Ready condition (no reason) and the service-cidr
/// controller's finalizer.
fn default_service_cidr(cidr: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("networking.k8s.io/{version}"),
        "kind": "ServiceCIDR",
        "metadata": {
            "name": "kubernetes",
            "uid": uid_for("servicecidr/kubernetes"),
            "finalizers": ["networking.k8s.io/service-cidr-finalizer"]
        },
        "spec": {"cidrs": [cidr]},
        "status": {"conditions": [{
            "type": "Ready",
            "status": "True",
            "lastTransitionTime": "2026-11-21T15:12:22Z",
            "reason": "",
            "message": "Kubernetes default Service CIDR is ready"
        }]}
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::FeatureGates;

    fn world(version: KubernetesVersion, gates: FeatureGates) -> Vec<Value> {
        let config = ApiServerConfig {
            feature_gates: gates,
            ..ApiServerConfig::for_version(version)
        };
        two_sites_for(&config).unwrap()
    }

    fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
        objs.iter()
            .find(|o| {
                o["kind"] == kind
                    && (o["metadata"]["name"] == name
                        || o["metadata"]["labels"]["kubernetes.io/service-name"] == name)
            })
            .unwrap_or_else(|| panic!("{kind} {name}"))
    }

    #[test]
    fn the_1_20_world_is_the_world() {
        for es in ["v1", "v1beta1"] {
            let config = ApiServerConfig {
                endpointslice_version: es,
                ..ApiServerConfig::default()
            };
            assert_eq!(two_sites_for(&config).unwrap(), two_sites(es));
        }
    }

    #[test]
    fn services_gain_the_defaulted_fields_in_go_order() {
        let objs = world(KubernetesVersion::V1_35, FeatureGates::default());
        let spec = &find(&objs, "Service", "echo-headless")["spec"];
        let keys: Vec<&str> = spec
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "ports",
                "selector",
                "clusterIP",
                "clusterIPs",
                "type",
                "sessionAffinity",
                "ipFamilies",
                "ipFamilyPolicy",
                "internalTrafficPolicy"
            ]
        );
        assert_eq!(spec["clusterIPs"], json!(["None"]));
        let plain = &find(&objs, "Service", "plain-echo")["spec"];
        assert_eq!(plain["trafficDistribution"], "PreferClose");
    }

    #[test]
    fn hints_follow_the_release() {
        let v31 = world(KubernetesVersion::V1_31, FeatureGates::default());
        let plain = find(&v31, "EndpointSlice", "plain-echo");
        assert_eq!(
            plain["endpoints"][0]["hints"],
            json!({"forZones": [{"name": "beijing"}]})
        );
        // PreferSameNode is not a 1.31 value: no field, no hints.
        let dns = find(&v31, "EndpointSlice", "kube-dns");
        assert!(dns["endpoints"][0].get("hints").is_none());
        assert!(find(&v31, "Service", "kube-dns")["spec"]
            .get("trafficDistribution")
            .is_none());
        let v35 = world(KubernetesVersion::V1_35, FeatureGates::default());
        let dns = find(&v35, "EndpointSlice", "kube-dns");
        assert_eq!(
            dns["endpoints"][0]["hints"],
            json!({"forZones": [{"name": "guangzhou"}], "forNodes": [{"name": "gz-2"}]})
        );
        // No traffic distribution, no hints.
        let demo = find(&v35, "EndpointSlice", "servicegrid-demo-svc");
        assert!(demo["endpoints"][0].get("hints").is_none());
    }

    #[test]
    fn the_default_service_cidr_where_served() {
        let has = |objs: &[Value]| objs.iter().any(|o| o["kind"] == "ServiceCIDR");
        assert!(!has(&world(
            KubernetesVersion::V1_31,
            FeatureGates::default()
        )));
        let gated = FeatureGates {
            multi_cidr_service_allocator: Some(true),
            ..FeatureGates::default()
        };
        let v31 = world(KubernetesVersion::V1_31, gated);
        assert_eq!(
            find(&v31, "ServiceCIDR", "kubernetes")["apiVersion"],
            "networking.k8s.io/v1beta1"
        );
        let v35 = world(KubernetesVersion::V1_35, FeatureGates::default());
        let cidr = find(&v35, "ServiceCIDR", "kubernetes");
        assert_eq!(cidr["apiVersion"], "networking.k8s.io/v1");
        assert_eq!(cidr["spec"]["cidrs"], json!([WORLD.service_cidr]));
        assert_eq!(cidr["status"]["conditions"][0]["type"], "Ready");
    }
}
