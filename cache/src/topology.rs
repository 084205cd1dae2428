//! Topology projection: which endpoints of a Service the local node may see.
//!
//! A Service opts in with the annotation `topologyKeys` holding a JSON array
//! of node-label keys (what ServiceGrid writes, e.g. `'["location"]'`). The
//! first key, in order, under which the local node's site has an endpoint
//! wins; `"*"` means any endpoint. With one key this is exactly SuperEdge's
//! application-grid-wrapper. These are pure functions; the projector wraps
//! them with the stores.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use serde_json::Value;
use sitegrid_apimachinery::protobuf::to_json::Decoded;

/// The Service annotation holding the topology keys.
pub const TOPOLOGY_KEYS_ANNOTATION: &str = "topologyKeys";
/// The EndpointSlice label naming its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The key that matches any endpoint.
pub const ANY: &str = "*";

/// Node name → labels, for every node the cache knows.
pub type NodeLabels = HashMap<String, BTreeMap<String, String>>;

/// The parsed `topologyKeys` annotation of a Service (shared: most Services
/// of a cluster carry the same one, see the writer's `shared_keys`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyKeys(pub Arc<[String]>);

impl TopologyKeys {
    /// Reads the annotation from a Service's `metadata.annotations`.
    /// `Ok(None)` when absent; `Err` (with the reason) when it is not a JSON array of strings.
    pub fn from_annotations(
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Result<Option<TopologyKeys>, String> {
        let Some(raw) = annotations.and_then(|a| a.get(TOPOLOGY_KEYS_ANNOTATION)) else {
            return Ok(None);
        };
        serde_json::from_str::<Vec<String>>(raw)
            .map(|keys| Some(TopologyKeys(keys.into())))
            .map_err(|e| format!("annotation {TOPOLOGY_KEYS_ANNOTATION}={raw:?} is not a JSON array of strings: {e}"))
    }

    /// Every key other than `"*"` (the node labels that matter for this Service).
    pub fn label_keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str).filter(|k| *k != ANY)
    }
}

/// Which endpoints a node may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every endpoint (`"*"` reached).
    All,
    /// Endpoints on nodes whose label `key` equals `value` (the local site).
    Site {
        /// The node label key that won.
        key: String,
        /// The local node's value for it.
        value: String,
    },
    /// No endpoint at all (no key yields one; as SuperEdge does).
    Nothing,
}

impl Selection {
    /// Whether any of `selections` keeps an endpoint on `node`.
    pub fn any_keeps(selections: &[Selection], node: Option<&str>, nodes: &NodeLabels) -> bool {
        selections.iter().any(|s| s.keeps(node, nodes))
    }

    /// Whether an endpoint on `node` is kept.
    pub fn keeps(&self, node: Option<&str>, nodes: &NodeLabels) -> bool {
        match self {
            Selection::All => true,
            Selection::Nothing => false,
            Selection::Site { key, value } => node
                .and_then(|n| nodes.get(n))
                .and_then(|labels| labels.get(key))
                .is_some_and(|v| v == value),
        }
    }
}

/// One endpoint as the selection sees it: the node it runs on and readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRef {
    /// `nodeName` (or v1beta1 `topology["kubernetes.io/hostname"]`).
    pub node: Option<String>,
    /// Ready (Endpoints `addresses`; slices `conditions.ready` true or unset).
    pub ready: bool,
}

/// Chooses the selection for a Service from all its endpoints (across every
/// Endpoints subset or every EndpointSlice of the Service).
///
/// A key wins when the local site has a *ready* endpoint under it; if no key
/// does, the first key with any (not ready) local endpoint wins, so that the
/// not-ready addresses a node sees are always filtered by the same key as the
/// ready ones. The local node missing from the cache selects nothing.
pub fn choose(
    keys: &TopologyKeys,
    local: Option<&BTreeMap<String, String>>,
    nodes: &NodeLabels,
    endpoints: &[EndpointRef],
) -> Selection {
    for want_ready in [true, false] {
        for key in keys.0.iter() {
            if key == ANY {
                return Selection::All;
            }
            let Some(value) = local.and_then(|l| l.get(key)) else {
                continue;
            };
            let candidate = Selection::Site {
                key: key.clone(),
                value: value.clone(),
            };
            if endpoints
                .iter()
                .any(|e| (e.ready || !want_ready) && candidate.keeps(e.node.as_deref(), nodes))
            {
                return candidate;
            }
        }
    }
    Selection::Nothing
}

/// The endpoints of a core/v1 Endpoints object.
pub fn endpoints_refs(obj: &Value) -> Vec<EndpointRef> {
    let mut out = Vec::new();
    for subset in array(obj, "subsets") {
        for (field, ready) in [("addresses", true), ("notReadyAddresses", false)] {
            for addr in array(subset, field) {
                out.push(EndpointRef {
                    node: addr
                        .get("nodeName")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    ready,
                });
            }
        }
    }
    out
}

/// The endpoints of an EndpointSlice (v1 or v1beta1).
pub fn slice_refs(obj: &Value) -> Vec<EndpointRef> {
    array(obj, "endpoints")
        .map(|ep| EndpointRef {
            node: slice_endpoint_node(ep).map(str::to_owned),
            ready: slice_endpoint_ready(ep),
        })
        .collect()
}

/// [`slice_refs`] of an EndpointSlice as JSON or read from protobuf (from
/// its message, as they read in its JSON).
pub fn decoded_slice_refs(slice: &Decoded) -> Vec<EndpointRef> {
    match slice {
        Decoded::Value(v) => slice_refs(v),
        Decoded::Slice(m) => m
            .endpoints()
            .map(|e| EndpointRef {
                node: e.node.map(str::to_owned),
                ready: e.ready,
            })
            .collect(),
    }
}

/// [`project_slice`] of an EndpointSlice as JSON or read from protobuf:
/// from its message, only the endpoints kept are written.
pub fn project_decoded_slice(
    slice: Decoded,
    selections: &[Selection],
    nodes: &NodeLabels,
) -> Value {
    match slice {
        Decoded::Value(mut v) => {
            project_slice(&mut v, selections, nodes);
            v
        }
        Decoded::Slice(m) => {
            m.into_value_keeping(|e| Selection::any_keeps(selections, e.node, nodes))
        }
    }
}

/// Narrows an Endpoints object in place to the addresses any of `selections`
/// keeps: filters `addresses` and `notReadyAddresses` of every subset and
/// drops subsets left empty.
pub fn project_endpoints(obj: &mut Value, selections: &[Selection], nodes: &NodeLabels) {
    let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) else {
        return;
    };
    for subset in subsets.iter_mut() {
        for field in ["addresses", "notReadyAddresses"] {
            retain_in(subset, field, |addr| {
                Selection::any_keeps(
                    selections,
                    addr.get("nodeName").and_then(Value::as_str),
                    nodes,
                )
            });
        }
    }
    subsets.retain(|s| s.get("addresses").is_some() || s.get("notReadyAddresses").is_some());
}

/// Narrows an EndpointSlice in place to the endpoints any of `selections`
/// keeps (its `endpoints` list; kept even if empty).
pub fn project_slice(obj: &mut Value, selections: &[Selection], nodes: &NodeLabels) {
    if let Some(eps) = obj.get_mut("endpoints").and_then(Value::as_array_mut) {
        eps.retain(|ep| Selection::any_keeps(selections, slice_endpoint_node(ep), nodes));
    }
}

fn slice_endpoint_node(ep: &Value) -> Option<&str> {
    ep.get("nodeName").and_then(Value::as_str).or_else(|| {
        ep.get("topology")
            .and_then(|t| t.get("kubernetes.io/hostname"))
            .and_then(Value::as_str)
    })
}

fn slice_endpoint_ready(ep: &Value) -> bool {
    // An unset `ready` means ready (discovery API docs: "unknown state ... interpreted as ready").
    ep.get("conditions")
        .and_then(|c| c.get("ready"))
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

fn array<'a>(obj: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    obj.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Keeps the entries of `obj[field]` for which `keep` holds; removes the
/// field when nothing is left (kube-apiserver omits empty address lists).
fn retain_in(obj: &mut Value, field: &str, keep: impl Fn(&Value) -> bool) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let now_empty = match map.get_mut(field).and_then(Value::as_array_mut) {
        Some(list) => {
            list.retain(|v| keep(v));
            list.is_empty()
        }
        None => false,
    };
    if now_empty {
        map.shift_remove(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nodes() -> NodeLabels {
        let mut n = NodeLabels::new();
        for (name, loc, zone) in [
            ("bj-1", "beijing", "z1"),
            ("bj-2", "beijing", "z2"),
            ("gz-1", "guangzhou", "z3"),
        ] {
            n.insert(
                name.into(),
                BTreeMap::from([
                    ("location".into(), loc.into()),
                    ("zone".into(), zone.into()),
                ]),
            );
        }
        n
    }

    fn keys(k: &[&str]) -> TopologyKeys {
        TopologyKeys(k.iter().map(|s| s.to_string()).collect())
    }

    fn ep(node: &str, ready: bool) -> EndpointRef {
        EndpointRef {
            node: Some(node.into()),
            ready,
        }
    }

    #[test]
    fn single_key_keeps_only_the_local_site() {
        let n = nodes();
        let sel = choose(
            &keys(&["location"]),
            n.get("bj-1"),
            &n,
            &[ep("bj-2", true), ep("gz-1", true)],
        );
        assert_eq!(
            sel,
            Selection::Site {
                key: "location".into(),
                value: "beijing".into()
            }
        );
        assert!(sel.keeps(Some("bj-2"), &n));
        assert!(!sel.keeps(Some("gz-1"), &n));
        assert!(
            !sel.keeps(None, &n),
            "an endpoint without a node is not in any site"
        );
        assert!(!sel.keeps(Some("unknown-node"), &n));
    }

    #[test]
    fn single_key_with_no_local_endpoint_selects_nothing() {
        let n = nodes();
        let sel = choose(&keys(&["location"]), n.get("gz-1"), &n, &[ep("bj-2", true)]);
        assert_eq!(sel, Selection::Nothing);
    }

    #[test]
    fn falls_through_keys_in_order_then_star() {
        let n = nodes();
        // zone z2 has no endpoint near gz-1 (z1); location guangzhou has none either → "*".
        let sel = choose(
            &keys(&["zone", "location", "*"]),
            n.get("gz-1"),
            &n,
            &[ep("bj-2", true)],
        );
        assert_eq!(sel, Selection::All);
        // bj-1 (z1): no z1 endpoint, but beijing has bj-2 → location wins.
        let sel = choose(
            &keys(&["zone", "location", "*"]),
            n.get("bj-1"),
            &n,
            &[ep("bj-2", true), ep("gz-1", true)],
        );
        assert_eq!(
            sel,
            Selection::Site {
                key: "location".into(),
                value: "beijing".into()
            }
        );
    }

    #[test]
    fn ready_endpoints_decide_before_not_ready_ones() {
        let n = nodes();
        // Local site only has a not-ready endpoint: with "*" traffic goes anywhere ready.
        let sel = choose(
            &keys(&["location", "*"]),
            n.get("bj-1"),
            &n,
            &[ep("bj-2", false), ep("gz-1", true)],
        );
        assert_eq!(sel, Selection::All);
        // Without "*", the local not-ready endpoint stays visible (filtered by the same key).
        let sel = choose(
            &keys(&["location"]),
            n.get("bj-1"),
            &n,
            &[ep("bj-2", false), ep("gz-1", true)],
        );
        assert_eq!(
            sel,
            Selection::Site {
                key: "location".into(),
                value: "beijing".into()
            }
        );
    }

    #[test]
    fn unknown_local_node_sees_nothing_unless_star() {
        let n = nodes();
        assert_eq!(
            choose(&keys(&["location"]), None, &n, &[ep("bj-2", true)]),
            Selection::Nothing
        );
        assert_eq!(
            choose(&keys(&["location", "*"]), None, &n, &[ep("bj-2", true)]),
            Selection::All
        );
    }

    #[test]
    fn endpoints_projection_filters_ready_and_not_ready_and_drops_empty_subsets() {
        let n = nodes();
        let mut obj = json!({"metadata":{"name":"s"},"subsets":[
            {"addresses":[{"ip":"1","nodeName":"bj-1"},{"ip":"2","nodeName":"gz-1"}],
             "notReadyAddresses":[{"ip":"3","nodeName":"gz-1"},{"ip":"4","nodeName":"bj-2"}],
             "ports":[{"port":80}]},
            {"addresses":[{"ip":"5","nodeName":"gz-1"}],"ports":[{"port":81}]}]});
        let sel = Selection::Site {
            key: "location".into(),
            value: "beijing".into(),
        };
        project_endpoints(&mut obj, std::slice::from_ref(&sel), &n);
        assert_eq!(
            obj["subsets"],
            json!([{"addresses":[{"ip":"1","nodeName":"bj-1"}],"notReadyAddresses":[{"ip":"4","nodeName":"bj-2"}],"ports":[{"port":80}]}])
        );
    }

    #[test]
    fn slice_projection_reads_v1_and_v1beta1_node_fields() {
        let n = nodes();
        let mut obj = json!({"endpoints":[
            {"addresses":["1"],"nodeName":"bj-1"},
            {"addresses":["2"],"topology":{"kubernetes.io/hostname":"gz-1"}},
            {"addresses":["3"],"topology":{"kubernetes.io/hostname":"bj-2"},"conditions":{"ready":false}}]});
        let refs = slice_refs(&obj);
        assert_eq!(refs[1], ep("gz-1", true));
        assert_eq!(refs[2], ep("bj-2", false));
        let sel = Selection::Site {
            key: "location".into(),
            value: "beijing".into(),
        };
        project_slice(&mut obj, std::slice::from_ref(&sel), &n);
        let ips: Vec<_> = obj["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["addresses"][0].clone())
            .collect();
        assert_eq!(ips, vec![json!("1"), json!("3")]);
    }

    #[test]
    fn annotation_parsing() {
        let a = BTreeMap::from([(
            TOPOLOGY_KEYS_ANNOTATION.to_string(),
            r#"["location"]"#.to_string(),
        )]);
        assert_eq!(
            TopologyKeys::from_annotations(Some(&a)),
            Ok(Some(keys(&["location"])))
        );
        assert_eq!(TopologyKeys::from_annotations(None), Ok(None));
        let bad = BTreeMap::from([(TOPOLOGY_KEYS_ANNOTATION.to_string(), "location".to_string())]);
        assert!(TopologyKeys::from_annotations(Some(&bad)).is_err());
    }
}
