//! Which endpoints a node's proxy serves, and why: pure, tested by value.
//!
//! The verdicts are sitegrid-proxy's own: the selection is
//! `topology::choose` over every endpoint of every EndpointSlice of the
//! Service, as the proxy's writer chooses it, and an endpoint is served when
//! `topology::project_slice` keeps it in the slice. This module only reads
//! the difference between a slice and its projection and puts words to it.

use k8s_openapi::api::core::v1::Service;
use serde::Serialize;
use serde_json::Value;
use sitegrid_cache::topology::{self, EndpointRef, NodeLabels, Selection, TopologyKeys, ANY};

/// What the filter did with the Service as a whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Filter {
    /// Whether the proxy filters this Service at all.
    pub filtered: bool,
    /// The `topologyKeys` annotation, when it is a valid one.
    pub topology_keys: Option<Vec<String>>,
    /// The key that matched: `location=beijing`, `*`; `None` when none did
    /// (or the Service is not filtered).
    pub matched: Option<String>,
    /// One sentence saying the above.
    pub summary: String,
    /// Each key in order, with what the node has under it.
    pub keys: Vec<KeyStep>,
}

/// One topology key as the filter sees it from the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyStep {
    /// The key (`"*"` for any endpoint).
    pub key: String,
    /// The node's value for it (`None`: the node lacks the label, or `"*"`).
    pub node_value: Option<String>,
    /// Endpoints in the node's site under this key.
    pub endpoints: usize,
    /// Of which ready.
    pub ready: usize,
    /// Whether this is the key that won.
    pub matched: bool,
}

/// One endpoint and what the node's proxy does with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The EndpointSlice holding it.
    pub slice: String,
    /// Its addresses.
    pub addresses: Vec<String>,
    /// The node it runs on.
    pub node: Option<String>,
    /// The pod behind it (`targetRef`).
    pub pod: Option<String>,
    /// Whether it is ready (unset counts as ready, as in the proxy).
    pub ready: bool,
    /// Whether the node's proxy serves it.
    pub served: bool,
    /// Why.
    pub reason: String,
}

/// What is explained: one Service, as seen by one node.
pub struct Inputs<'a> {
    /// The Service (its `topologyKeys` annotation).
    pub service: &'a Service,
    /// The node whose proxy's view this is.
    pub node: &'a str,
    /// Every node's labels.
    pub nodes: &'a NodeLabels,
    /// The Service's EndpointSlices, as the API server sends them.
    pub slices: &'a [Value],
}

/// The filter and the verdict on every endpoint.
pub fn explain(inputs: &Inputs<'_>) -> (Filter, Vec<Verdict>) {
    let annotations = inputs.service.metadata.annotations.as_ref();
    match TopologyKeys::from_annotations(annotations) {
        Ok(Some(keys)) => filtered(inputs, &keys),
        Ok(None) => unfiltered(
            inputs,
            "the Service has no topologyKeys annotation: sitegrid-proxy does not filter it, every endpoint is served".into(),
        ),
        Err(reason) => unfiltered(
            inputs,
            format!("{reason}; sitegrid-proxy ignores it and serves every endpoint"),
        ),
    }
}

fn unfiltered(inputs: &Inputs<'_>, summary: String) -> (Filter, Vec<Verdict>) {
    let verdicts = inputs
        .slices
        .iter()
        .flat_map(|slice| {
            let refs = topology::slice_refs(slice);
            endpoints(slice)
                .zip(refs)
                .map(|(ep, r)| verdict(slice, ep, &r, true, "not filtered".into()))
                .collect::<Vec<_>>()
        })
        .collect();
    let filter = Filter {
        filtered: false,
        topology_keys: None,
        matched: None,
        summary,
        keys: Vec::new(),
    };
    (filter, verdicts)
}

fn filtered(inputs: &Inputs<'_>, keys: &TopologyKeys) -> (Filter, Vec<Verdict>) {
    let Inputs { node, nodes, .. } = *inputs;
    let local = nodes.get(node);
    let refs: Vec<EndpointRef> = inputs
        .slices
        .iter()
        .flat_map(topology::slice_refs)
        .collect();
    // Exactly the proxy's writer: one choice across all the Service's slices.
    let selection = topology::choose(keys, local, nodes, &refs);
    let mut verdicts = Vec::new();
    for slice in inputs.slices {
        let mut projected = slice.clone();
        topology::project_slice(&mut projected, std::slice::from_ref(&selection), nodes);
        let mut kept = endpoints(&projected).peekable();
        for (ep, r) in endpoints(slice).zip(topology::slice_refs(slice)) {
            // project_slice keeps endpoints in order: the next kept one is this one, or it was dropped.
            let served = kept.next_if(|k| *k == ep).is_some();
            let reason = reason(&selection, served, &r, inputs);
            verdicts.push(verdict(slice, ep, &r, served, reason));
        }
    }
    let steps = key_steps(keys, &selection, inputs, &refs);
    let filter = Filter {
        filtered: true,
        topology_keys: Some(keys.0.to_vec()),
        matched: matched(&selection),
        summary: summary(keys, &selection, inputs),
        keys: steps,
    };
    (filter, verdicts)
}

fn matched(selection: &Selection) -> Option<String> {
    match selection {
        Selection::All => Some(ANY.to_owned()),
        Selection::Site { key, value } => Some(format!("{key}={value}")),
        Selection::Nothing => None,
    }
}

fn summary(keys: &TopologyKeys, selection: &Selection, inputs: &Inputs<'_>) -> String {
    let keys_json = serde_json::to_string(&keys.0[..]).unwrap_or_default();
    let node = inputs.node;
    match selection {
        Selection::All => format!("topologyKeys {keys_json}: key \"*\" matched, every endpoint is served"),
        Selection::Site { key, value } => format!(
            "topologyKeys {keys_json}: key {key} matched ({node} has {key}={value}): endpoints on nodes with {key}={value} are served"
        ),
        Selection::Nothing => format!(
            "topologyKeys {keys_json}: no key matched ({node}'s site has no endpoint under any of them): no endpoint is served"
        ),
    }
}

/// Each key with the node's value and the endpoints in its site under it.
fn key_steps(
    keys: &TopologyKeys,
    selection: &Selection,
    inputs: &Inputs<'_>,
    refs: &[EndpointRef],
) -> Vec<KeyStep> {
    let local = inputs.nodes.get(inputs.node);
    keys.0
        .iter()
        .map(|key| {
            let (node_value, site) = if key == ANY {
                (None, Some(Selection::All))
            } else {
                let value = local.and_then(|l| l.get(key)).cloned();
                let site = value.clone().map(|value| Selection::Site {
                    key: key.clone(),
                    value,
                });
                (value, site)
            };
            let kept: Vec<&EndpointRef> = refs
                .iter()
                .filter(|r| {
                    site.as_ref()
                        .is_some_and(|s| s.keeps(r.node.as_deref(), inputs.nodes))
                })
                .collect();
            KeyStep {
                key: key.clone(),
                node_value,
                endpoints: kept.len(),
                ready: kept.iter().filter(|r| r.ready).count(),
                matched: site.as_ref() == Some(selection),
            }
        })
        .collect()
}

/// Why an endpoint is served or dropped under `selection`.
fn reason(selection: &Selection, served: bool, ep: &EndpointRef, inputs: &Inputs<'_>) -> String {
    let me = inputs.node;
    match selection {
        Selection::All => "key \"*\" matches any endpoint".into(),
        Selection::Site { key, value } if served => {
            let theirs = ep.node.as_deref().unwrap_or("?");
            format!("node {theirs} has {key}={value}, as {me} does")
        }
        Selection::Site { key, value } => {
            let theirs = match ep.node.as_deref() {
                None => return "dropped: the endpoint names no node".into(),
                Some(n) => match inputs.nodes.get(n) {
                    None => return format!("dropped: node {n} is not in the cluster"),
                    Some(labels) => match labels.get(key) {
                        Some(v) => format!("node {n} has {key}={v}"),
                        None => format!("node {n} has no label {key}"),
                    },
                },
            };
            format!("dropped: {theirs}, {me} has {key}={value}")
        }
        Selection::Nothing => format!("dropped: no topology key matched for {me}"),
    }
}

fn endpoints(slice: &Value) -> impl Iterator<Item = &Value> {
    slice
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn verdict(slice: &Value, ep: &Value, r: &EndpointRef, served: bool, reason: String) -> Verdict {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    Verdict {
        slice: text(slice.pointer("/metadata/name")).unwrap_or_default(),
        addresses: ep
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect(),
        node: r.node.clone(),
        pod: text(ep.pointer("/targetRef/name")),
        ready: r.ready,
        served,
        reason,
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
