//! Local truth: while the API server is unreachable, the node's kubelet is
//! the one component that knows where its pods run now. After an offline
//! reboot they come back with new addresses (the CNI plugin hands out new
//! ones), and the endpoints the cache serves would keep the old ones —
//! where nothing listens — until the API server is back. The kubelet
//! reports each pod's status through the node cache
//! (`sitegrid-nodecache`'s `local`); the writer serves it:
//!
//! - An endpoint whose `targetRef.uid` is a reported pod and whose node
//!   (`nodeName`; v1beta1 slices: the `kubernetes.io/hostname` topology) is
//!   the reporting node takes the pod's address of the
//!   endpoint's family and its readiness: ready, or not ready (in Endpoints:
//!   moved to `notReadyAddresses`; in EndpointSlices: `ready` and `serving`
//!   false). A pod that stopped (`Succeeded`, `Failed`) is removed. Nothing
//!   else changes: other endpoints, ports, labels, annotations.
//! - The result is an ordinary change of the served view: a new
//!   resourceVersion, a MODIFIED event, persisted in the snapshot like any
//!   other.
//! - **The API server wins when it is back.** The reports are let go when
//!   the node cache finds the API server reachable: the views are computed
//!   again from what the API server last sent (a cache restored from a
//!   snapshot has none: its views keep the reports until the relist, which
//!   replaces every view). The kubelet's next status sync and the
//!   endpoints controller then bring the API server up to date, and its
//!   changes arrive as usual. A client sees each step as a MODIFIED event
//!   with a higher resourceVersion; nothing is replayed, no version goes
//!   back.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sitegrid_apimachinery::protobuf::to_json::SliceMessage;

/// A pod as its kubelet last reported it while the API server was unreachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPod {
    /// Its uid (what endpoints' `targetRef` name).
    pub uid: String,
    /// The node it runs on (the reporting kubelet's).
    pub node: String,
    /// Its addresses (`status.podIPs`).
    pub ips: Vec<String>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// Its phase is neither `Succeeded` nor `Failed`.
    pub running: bool,
}

/// The reports in force, by reporting node and pod uid: a node claiming
/// another node's pod neither moves nor hides that node's report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct LocalPods(BTreeMap<(String, String), LocalPod>);

impl LocalPods {
    pub(super) fn new(pods: Vec<LocalPod>) -> LocalPods {
        LocalPods(
            pods.into_iter()
                .map(|p| ((p.node.clone(), p.uid.clone()), p))
                .collect(),
        )
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a report applies to an endpoint of `slice` (read from
    /// protobuf; the same endpoints [`LocalPods::of`] finds in its JSON).
    pub(super) fn concerns(&self, slice: &SliceMessage) -> bool {
        !self.is_empty()
            && slice.endpoints().any(|e| match (e.node, e.pod_uid) {
                (Some(node), Some(uid)) => self.0.contains_key(&(node.to_owned(), uid.to_owned())),
                _ => false,
            })
    }

    /// The report for the endpoint `e` (`targetRef`, and its node under
    /// `node`, a JSON pointer from the endpoint), if one applies: only to
    /// an endpoint that names the reporting node, so that a node (through
    /// a site proxy, any node of the site) moves its own pods' endpoints
    /// and no other.
    fn of(&self, e: &Value, node: &str) -> Option<&LocalPod> {
        let uid = e.pointer("/targetRef/uid")?.as_str()?;
        let node = e.pointer(node)?.as_str()?;
        self.0.get(&(node.to_owned(), uid.to_owned()))
    }

    /// Applies the reports to a v1 Endpoints object; true if it changed.
    pub(super) fn apply_endpoints(&self, obj: &mut Value) -> bool {
        if self.is_empty() {
            return false;
        }
        let Some(subsets) = obj.get_mut("subsets").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut changed = false;
        for subset in subsets.iter_mut() {
            let Some(subset) = subset.as_object_mut() else {
                continue;
            };
            let mut ready = Vec::new();
            let mut not_ready = Vec::new();
            for (list, was_ready) in [("addresses", true), ("notReadyAddresses", false)] {
                let Some(Value::Array(addresses)) = subset.remove(list) else {
                    continue;
                };
                for mut a in addresses {
                    let Some(pod) = self.of(&a, "/nodeName") else {
                        if was_ready {
                            ready.push(a);
                        } else {
                            not_ready.push(a);
                        }
                        continue;
                    };
                    if !pod.running {
                        changed = true;
                        continue;
                    }
                    let old = a["ip"].as_str().unwrap_or_default().to_owned();
                    if let Some(ip) = same_family(&pod.ips, &old) {
                        if ip != old {
                            a["ip"] = Value::String(ip.to_owned());
                            changed = true;
                        }
                    }
                    changed |= pod.ready != was_ready;
                    if pod.ready {
                        ready.push(a);
                    } else {
                        not_ready.push(a);
                    }
                }
            }
            // As the endpoints controller writes them: empty lists left out.
            if !ready.is_empty() {
                subset.insert("addresses".into(), Value::Array(ready));
            }
            if !not_ready.is_empty() {
                subset.insert("notReadyAddresses".into(), Value::Array(not_ready));
            }
        }
        subsets.retain(|s| s.get("addresses").is_some() || s.get("notReadyAddresses").is_some());
        if subsets.is_empty() {
            if let Some(obj) = obj.as_object_mut() {
                obj.remove("subsets");
            }
        }
        changed
    }

    /// Applies the reports to an EndpointSlice (discovery v1 or v1beta1);
    /// true if it changed.
    pub(super) fn apply_slice(&self, obj: &mut Value) -> bool {
        if self.is_empty() {
            return false;
        }
        let family = obj["addressType"].as_str().unwrap_or_default().to_owned();
        let Some(endpoints) = obj.get_mut("endpoints").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut changed = false;
        let mut kept = Vec::with_capacity(endpoints.len());
        for mut e in std::mem::take(endpoints) {
            // v1 names the node in nodeName, v1beta1 in the hostname topology label.
            let node = if e.get("nodeName").is_some() {
                "/nodeName"
            } else {
                "/topology/kubernetes.io~1hostname"
            };
            let pod = self.of(&e, node);
            let Some(pod) = pod else {
                kept.push(e);
                continue;
            };
            if !pod.running {
                changed = true;
                continue;
            }
            let wanted: Vec<Value> = pod
                .ips
                .iter()
                .filter(|ip| family_of(ip) == Some(family.as_str()))
                .take(1)
                .map(|ip| Value::String(ip.clone()))
                .collect();
            if !wanted.is_empty() && e.get("addresses") != Some(&Value::Array(wanted.clone())) {
                e["addresses"] = Value::Array(wanted);
                changed = true;
            }
            changed |= set_condition(&mut e, "ready", pod.ready);
            if e.pointer("/conditions/serving").is_some() {
                changed |= set_condition(&mut e, "serving", pod.ready);
            }
            kept.push(e);
        }
        *endpoints = kept;
        changed
    }
}

/// Sets `conditions.<name>` of an endpoint; true if it changed.
fn set_condition(e: &mut Value, name: &str, value: bool) -> bool {
    if !e["conditions"].is_object() {
        e["conditions"] = Value::Object(Map::new());
    }
    if e["conditions"][name].as_bool() == Some(value) {
        return false;
    }
    e["conditions"][name] = Value::Bool(value);
    true
}

/// An EndpointSlice's `addressType` for an address.
fn family_of(ip: &str) -> Option<&'static str> {
    match ip.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) => Some("IPv4"),
        std::net::IpAddr::V6(_) => Some("IPv6"),
    }
}

/// The first of `ips` of `old`'s family (any when `old` is not an address).
fn same_family<'a>(ips: &'a [String], old: &str) -> Option<&'a str> {
    let want = family_of(old);
    ips.iter()
        .map(String::as_str)
        .find(|ip| want.is_none() || family_of(ip) == want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, ips: &[&str], ready: bool, running: bool) -> LocalPod {
        LocalPod {
            uid: uid.into(),
            node: "sh-1".into(),
            ips: ips.iter().map(|s| s.to_string()).collect(),
            ready,
            running,
        }
    }

    fn slice() -> Value {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-abc", "namespace": "shop", "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
               "endpoints": [
                 {"addresses": ["10.0.31.5"], "conditions": {"ready": true, "serving": true, "terminating": false},
                  "nodeName": "sh-1", "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-1", "uid": "u1"}},
                 {"addresses": ["10.0.31.6"], "conditions": {"ready": true, "serving": true, "terminating": false},
                  "nodeName": "sh-1", "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-2", "uid": "u2"}},
                 {"addresses": ["10.0.11.7"], "conditions": {"ready": true},
                  "nodeName": "bj-1", "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-3", "uid": "u3"}}]})
    }

    #[test]
    fn a_reported_pods_endpoint_takes_its_new_address_and_readiness_and_nothing_else_changes() {
        let local = LocalPods::new(vec![
            pod("u1", &["fd00::9", "10.0.31.9"], true, true),
            pod("u2", &["10.0.31.10"], false, true),
        ]);
        let mut s = slice();
        assert!(local.apply_slice(&mut s));
        let mut want = slice();
        want["endpoints"][0]["addresses"] = json!(["10.0.31.9"]);
        want["endpoints"][1]["addresses"] = json!(["10.0.31.10"]);
        want["endpoints"][1]["conditions"]["ready"] = json!(false);
        want["endpoints"][1]["conditions"]["serving"] = json!(false);
        assert_eq!(s, want);
        // Applied again: nothing more to change.
        assert!(!local.apply_slice(&mut s));
    }

    #[test]
    fn a_stopped_pod_is_removed_and_another_nodes_pod_or_an_unreported_one_is_left() {
        // u3 runs on bj-1: a report naming sh-1 for it is not applied.
        let local = LocalPods::new(vec![
            pod("u1", &["10.0.31.9"], true, false),
            pod("u3", &["10.0.31.11"], true, true),
        ]);
        let mut s = slice();
        assert!(local.apply_slice(&mut s));
        let names: Vec<&str> = s["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["targetRef"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["web-2", "web-3"]);
        assert_eq!(s["endpoints"][1]["addresses"], json!(["10.0.11.7"]));
        assert!(!LocalPods::default().apply_slice(&mut slice()));
        // An endpoint that names no node is moved by no node's report.
        let mut s = slice();
        s["endpoints"][0]
            .as_object_mut()
            .unwrap()
            .remove("nodeName");
        let before = s.clone();
        assert!(!LocalPods::new(vec![pod("u1", &["10.0.31.9"], true, true)]).apply_slice(&mut s));
        assert_eq!(s, before);
        // Another node claiming u1 neither moves nor hides sh-1's report of it.
        let mut claim = pod("u1", &["10.0.99.9"], true, true);
        claim.node = "bj-1".into();
        let mut s = slice();
        assert!(
            LocalPods::new(vec![pod("u1", &["10.0.31.9"], true, true), claim]).apply_slice(&mut s)
        );
        assert_eq!(s["endpoints"][0]["addresses"], json!(["10.0.31.9"]));
    }

    #[test]
    fn a_v1beta1_slice_names_the_node_in_its_topology() {
        let mut s = json!({"addressType": "IPv4", "endpoints": [
            {"addresses": ["10.0.31.5"], "conditions": {"ready": true},
             "topology": {"kubernetes.io/hostname": "sh-1"}, "targetRef": {"uid": "u1"}},
            {"addresses": ["10.0.11.5"], "conditions": {"ready": true},
             "topology": {"kubernetes.io/hostname": "bj-1"}, "targetRef": {"uid": "u9"}}]});
        let local = LocalPods::new(vec![
            pod("u1", &["10.0.31.9"], true, true),
            pod("u9", &["10.0.31.99"], true, true),
        ]);
        assert!(local.apply_slice(&mut s));
        assert_eq!(s["endpoints"][0]["addresses"], json!(["10.0.31.9"]));
        assert_eq!(
            s["endpoints"][1]["addresses"],
            json!(["10.0.11.5"]),
            "a pod of bj-1"
        );
    }

    #[test]
    fn endpoints_move_between_ready_and_not_ready_addresses() {
        let mut e = json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "web", "namespace": "shop"},
            "subsets": [{"addresses": [
                {"ip": "10.0.31.5", "nodeName": "sh-1", "targetRef": {"kind": "Pod", "uid": "u1"}},
                {"ip": "10.0.11.7", "nodeName": "bj-1", "targetRef": {"kind": "Pod", "uid": "u3"}}],
              "notReadyAddresses": [
                {"ip": "10.0.31.6", "nodeName": "sh-1", "targetRef": {"kind": "Pod", "uid": "u2"}}],
              "ports": [{"port": 8080, "protocol": "TCP"}]}]});
        let local = LocalPods::new(vec![
            pod("u1", &["10.0.31.9"], false, true),
            pod("u2", &["10.0.31.10"], true, true),
        ]);
        assert!(local.apply_endpoints(&mut e));
        assert_eq!(
            e["subsets"][0]["addresses"],
            json!([
                {"ip": "10.0.11.7", "nodeName": "bj-1", "targetRef": {"kind": "Pod", "uid": "u3"}},
                {"ip": "10.0.31.10", "nodeName": "sh-1", "targetRef": {"kind": "Pod", "uid": "u2"}}])
        );
        assert_eq!(
            e["subsets"][0]["notReadyAddresses"],
            json!([{"ip": "10.0.31.9", "nodeName": "sh-1", "targetRef": {"kind": "Pod", "uid": "u1"}}])
        );
        assert_eq!(
            e["subsets"][0]["ports"],
            json!([{"port": 8080, "protocol": "TCP"}])
        );
        // Every pod stopped: no subset left, as the endpoints controller writes it.
        let gone = LocalPods::new(vec![
            pod("u1", &[], false, false),
            pod("u2", &[], false, false),
            {
                let mut p = pod("u3", &[], false, false);
                p.node = "bj-1".into();
                p
            },
        ]);
        assert!(gone.apply_endpoints(&mut e));
        assert!(e.get("subsets").is_none(), "{e}");
    }
}
