//! EndpointSlice conversion between `discovery.k8s.io/v1beta1` and
//! `discovery.k8s.io/v1`, in place on JSON.
//!
//! Only the endpoint's placement fields differ between the versions:
//! v1beta1 has a `topology` map, v1 has `deprecatedTopology`, `zone` and (as
//! v1beta1 since 1.20) `nodeName`. The rules are Kubernetes' own
//! (`pkg/apis/discovery/v1beta1/conversion.go`, 1.21+), where the internal
//! type has the v1 shape. Keys are written in the target version's struct
//! order, maps sorted by key, as the apiserver would serialize them.

use serde_json::{Map, Value};

/// `topology.kubernetes.io/zone` (corev1.LabelTopologyZone).
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// `kubernetes.io/hostname` (corev1.LabelHostname).
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// v1beta1 `Endpoint` field order.
const V1BETA1_ENDPOINT_KEYS: &[&str] = &[
    "addresses",
    "conditions",
    "hostname",
    "targetRef",
    "topology",
    "nodeName",
    "hints",
];
/// v1 `Endpoint` field order.
const V1_ENDPOINT_KEYS: &[&str] = &[
    "addresses",
    "conditions",
    "hostname",
    "targetRef",
    "deprecatedTopology",
    "nodeName",
    "zone",
    "hints",
];

/// Converts a v1beta1 EndpointSlice to v1, in place: each endpoint's
/// `topology` becomes `deprecatedTopology`, less the zone (moved to `zone`)
/// and the hostname (moved to `nodeName` when that is unset, dropped when it
/// equals `nodeName`, kept when it differs); an emptied map is dropped.
/// `apiVersion`, if present, becomes `discovery.k8s.io/v1`.
pub fn v1beta1_to_v1(slice: &mut Value) {
    set_api_version(slice, "discovery.k8s.io/v1");
    for_each_endpoint(slice, |ep| {
        let topology = match ep.remove("topology") {
            Some(Value::Object(t)) => t,
            _ => {
                reorder(ep, V1_ENDPOINT_KEYS);
                return;
            }
        };
        let mut deprecated = topology.clone();
        if let Some(zone) = topology.get(ZONE_LABEL) {
            ep.insert("zone".into(), zone.clone());
            deprecated.remove(ZONE_LABEL);
        }
        if let Some(node) = topology.get(HOSTNAME_LABEL) {
            match ep.get("nodeName") {
                None | Some(Value::Null) => {
                    ep.insert("nodeName".into(), node.clone());
                    deprecated.remove(HOSTNAME_LABEL);
                }
                Some(name) if name == node => {
                    deprecated.remove(HOSTNAME_LABEL);
                }
                Some(_) => {}
            }
        }
        if !deprecated.is_empty() {
            ep.insert(
                "deprecatedTopology".into(),
                Value::Object(sorted(deprecated)),
            );
        }
        reorder(ep, V1_ENDPOINT_KEYS);
    });
}

/// Converts a v1 EndpointSlice to v1beta1, in place: each endpoint's
/// `topology` is rebuilt from `deprecatedTopology`, plus `zone`, plus
/// `nodeName` as the hostname unless the map already has a non-empty one.
/// `nodeName` itself stays (v1beta1 has it since 1.20). Endpoints with none of
/// the three get no `topology`. `apiVersion`, if present, becomes
/// `discovery.k8s.io/v1beta1`.
pub fn v1_to_v1beta1(slice: &mut Value) {
    set_api_version(slice, "discovery.k8s.io/v1beta1");
    for_each_endpoint(slice, |ep| {
        let deprecated = non_null(ep.remove("deprecatedTopology"));
        let zone = non_null(ep.remove("zone"));
        let node_name = ep.get("nodeName").filter(|v| !v.is_null()).cloned();
        if deprecated.is_none() && zone.is_none() && node_name.is_none() {
            reorder(ep, V1BETA1_ENDPOINT_KEYS);
            return;
        }
        let mut topology = match deprecated {
            Some(Value::Object(t)) => t,
            _ => Map::new(),
        };
        if let Some(zone) = zone {
            topology.insert(ZONE_LABEL.into(), zone);
        }
        if let Some(node) = node_name {
            let has_hostname = topology
                .get(HOSTNAME_LABEL)
                .and_then(Value::as_str)
                .is_some_and(|h| !h.is_empty());
            if !has_hostname {
                topology.insert(HOSTNAME_LABEL.into(), node);
            }
        }
        ep.insert("topology".into(), Value::Object(sorted(topology)));
        reorder(ep, V1BETA1_ENDPOINT_KEYS);
    });
}

/// The node an endpoint runs on: `nodeName`, else v1beta1 `topology["kubernetes.io/hostname"]`.
pub fn endpoint_node_name(endpoint: &Value) -> Option<&str> {
    endpoint
        .get("nodeName")
        .and_then(Value::as_str)
        .or_else(|| {
            endpoint
                .get("topology")
                .and_then(|t| t.get(HOSTNAME_LABEL))
                .and_then(Value::as_str)
        })
}

fn set_api_version(slice: &mut Value, version: &str) {
    if let Some(v) = slice.get_mut("apiVersion") {
        *v = Value::from(version);
    }
}

fn for_each_endpoint(slice: &mut Value, mut f: impl FnMut(&mut Map<String, Value>)) {
    if let Some(Value::Array(endpoints)) = slice.get_mut("endpoints") {
        for ep in endpoints.iter_mut().filter_map(Value::as_object_mut) {
            f(ep);
        }
    }
}

/// `None` for an absent or `null` field (Go's nil pointer or map).
fn non_null(v: Option<Value>) -> Option<Value> {
    v.filter(|v| !v.is_null())
}

/// A Go map as encoding/json writes it: keys in byte order.
fn sorted(map: Map<String, Value>) -> Map<String, Value> {
    let mut entries: Vec<(String, Value)> = map.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.into_iter().collect()
}

/// Puts the known fields in struct order; unknown ones follow in their order.
fn reorder(ep: &mut Map<String, Value>, order: &[&str]) {
    let mut out = Map::with_capacity(ep.len());
    for key in order {
        if let Some((k, v)) = ep.remove_entry(*key) {
            out.insert(k, v);
        }
    }
    // `ep` keeps only the unknown fields now, in their original order.
    out.append(ep);
    *ep = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `web-6hr22` from the reference capture (v1beta1, as a 1.20 server lists it).
    fn reference_v1beta1() -> Value {
        json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1beta1",
            "metadata": {"name": "web-6hr22", "namespace": "default"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.244.1.2"], "conditions": {"ready": true},
                 "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-7db76dcc55-bdwrb"},
                 "topology": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/region": "r1",
                              "topology.kubernetes.io/zone": "z1"}},
                {"addresses": ["192.0.2.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]})
    }

    #[test]
    fn v1beta1_to_v1_moves_zone_and_hostname_out_of_topology() {
        let mut slice = reference_v1beta1();
        v1beta1_to_v1(&mut slice);
        assert_eq!(
            slice.to_string(),
            json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"name": "web-6hr22", "namespace": "default"},
                "addressType": "IPv4",
                "endpoints": [
                    {"addresses": ["10.244.1.2"], "conditions": {"ready": true},
                     "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-7db76dcc55-bdwrb"},
                     "deprecatedTopology": {"topology.kubernetes.io/region": "r1"},
                     "nodeName": "n1", "zone": "z1"},
                    {"addresses": ["192.0.2.1"], "conditions": {"ready": true}}],
                "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]})
            .to_string()
        );
    }

    #[test]
    fn v1beta1_hostname_versus_node_name() {
        // Equal to nodeName: dropped from the map, which then empties.
        let mut same = json!({"endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "n1",
            "topology": {"kubernetes.io/hostname": "n1"}}]});
        v1beta1_to_v1(&mut same);
        assert_eq!(
            same,
            json!({"endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "n1"}]})
        );

        // Different from nodeName: both kept.
        let mut differ = json!({"endpoints": [{"addresses": ["10.0.0.1"],
            "topology": {"kubernetes.io/hostname": "h1"}, "nodeName": "n1"}]});
        v1beta1_to_v1(&mut differ);
        assert_eq!(
            differ.to_string(),
            r#"{"endpoints":[{"addresses":["10.0.0.1"],"deprecatedTopology":{"kubernetes.io/hostname":"h1"},"nodeName":"n1"}]}"#
        );

        // An empty or null topology leaves nothing behind.
        let mut empty = json!({"endpoints": [{"addresses": ["a"], "topology": {}}, {"addresses": ["b"], "topology": null}]});
        v1beta1_to_v1(&mut empty);
        assert_eq!(
            empty,
            json!({"endpoints": [{"addresses": ["a"]}, {"addresses": ["b"]}]})
        );
    }

    #[test]
    fn v1_to_v1beta1_rebuilds_a_sorted_topology() {
        let mut slice = json!({"apiVersion": "discovery.k8s.io/v1", "addressType": "IPv4", "endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true, "terminating": false},
             "nodeName": "n2", "zone": "z1", "hints": {"forZones": [{"name": "z1"}]},
             "deprecatedTopology": {"topology.kubernetes.io/region": "r1"}},
            {"addresses": ["10.0.0.2"], "deprecatedTopology": {"kubernetes.io/hostname": "h9"}, "nodeName": "n9"},
            {"addresses": ["10.0.0.3"]}]});
        v1_to_v1beta1(&mut slice);
        assert_eq!(
            slice.to_string(),
            json!({"apiVersion": "discovery.k8s.io/v1beta1", "addressType": "IPv4", "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true, "terminating": false},
                 "topology": {"kubernetes.io/hostname": "n2", "topology.kubernetes.io/region": "r1",
                              "topology.kubernetes.io/zone": "z1"},
                 "nodeName": "n2", "hints": {"forZones": [{"name": "z1"}]}},
                {"addresses": ["10.0.0.2"], "topology": {"kubernetes.io/hostname": "h9"}, "nodeName": "n9"},
                {"addresses": ["10.0.0.3"]}]})
            .to_string()
        );
    }

    #[test]
    fn v1beta1_round_trip_is_identity_when_node_name_is_set() {
        let mut original = reference_v1beta1();
        original["endpoints"][0]
            .as_object_mut()
            .unwrap()
            .insert("nodeName".into(), "n1".into());
        let mut slice = original.clone();
        v1beta1_to_v1(&mut slice);
        v1_to_v1beta1(&mut slice);
        assert_eq!(slice.to_string(), original.to_string());
    }

    #[test]
    fn v1beta1_round_trip_fills_in_node_name_from_hostname() {
        // A 1.20 server leaves nodeName unset (EndpointSliceNodeName is alpha);
        // after a trip through v1 it is set, as a 1.21+ server would show it.
        let original = reference_v1beta1();
        let mut slice = original.clone();
        v1beta1_to_v1(&mut slice);
        v1_to_v1beta1(&mut slice);
        let mut expected = original;
        expected["endpoints"][0]
            .as_object_mut()
            .unwrap()
            .insert("nodeName".into(), "n1".into());
        assert_eq!(slice.to_string(), expected.to_string());
    }

    #[test]
    fn v1_round_trip_is_identity() {
        let original = json!({"apiVersion": "discovery.k8s.io/v1", "endpoints": [
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "nodeName": "n1", "zone": "z1"},
            {"addresses": ["10.0.0.2"], "deprecatedTopology": {"a": "b", "kubernetes.io/hostname": "h2"},
             "nodeName": "n2"},
            {"addresses": ["10.0.0.3"]}]});
        let mut slice = original.clone();
        v1_to_v1beta1(&mut slice);
        assert_eq!(slice["apiVersion"], "discovery.k8s.io/v1beta1");
        v1beta1_to_v1(&mut slice);
        assert_eq!(slice.to_string(), original.to_string());
    }

    #[test]
    fn api_version_is_only_rewritten_when_present() {
        let mut item = json!({"addressType": "IPv4", "endpoints": []});
        v1beta1_to_v1(&mut item);
        assert_eq!(item, json!({"addressType": "IPv4", "endpoints": []}));
    }

    #[test]
    fn node_name_of_either_version() {
        assert_eq!(endpoint_node_name(&json!({"nodeName": "n1"})), Some("n1"));
        assert_eq!(
            endpoint_node_name(&json!({"topology": {"kubernetes.io/hostname": "n2"}})),
            Some("n2")
        );
        assert_eq!(
            endpoint_node_name(
                &json!({"nodeName": "n1", "topology": {"kubernetes.io/hostname": "h"}})
            ),
            Some("n1")
        );
        assert_eq!(
            endpoint_node_name(&json!({"addresses": ["10.0.0.1"]})),
            None
        );
    }
}
