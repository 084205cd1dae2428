//! Open-loop churn: changes written to the in-memory API server at a fixed
//! rate, each scheduled by its send time (`start + i / rate`), never by the
//! previous change's completion, so a slow receiver cannot slow the load
//! down and hide its own latency. Each change is stamped with the time it is
//! written (the upstream write is in memory and never waits on a watcher);
//! how far the writer fell behind its schedule is reported on its own, so
//! the timer's millisecond granularity does not count as propagation.
//!
//! The changes rotate over what a cluster's EndpointSlices see: an endpoint
//! added, a pod's IP changed, an endpoint removed, a readiness flip, and a
//! node relabelled (a label no topology uses, so views stay the same).

use std::{sync::Arc, time::Duration};

use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use sitegrid_fakeapi::ApiServer;
use tokio::time::Instant;

use super::{
    ledger::Ledger,
    stamp::{stamp, unix_ns},
};

/// The label a node relabel writes.
pub const RELABEL: &str = "loadtest.sitegrid.io/rev";

/// Endpoints a slice may hold (the EndpointSlice controller's default).
const MAX_PER_SLICE: usize = 100;

/// One kind of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// A new ready endpoint in a slice.
    EndpointAdd,
    /// An endpoint's address replaced (the pod came back with a new IP).
    PodIpChange,
    /// A slice's last endpoint removed.
    EndpointRemove,
    /// An endpoint's `ready` condition flipped.
    ReadinessFlip,
    /// A node's label changed.
    NodeRelabel,
}

/// The rotation of changes.
const ROTATION: [ChangeKind; 5] = [
    ChangeKind::EndpointAdd,
    ChangeKind::PodIpChange,
    ChangeKind::EndpointRemove,
    ChangeKind::ReadinessFlip,
    ChangeKind::NodeRelabel,
];

/// What a churn run did.
#[derive(Debug, Clone, Default)]
pub struct ChurnOutcome {
    /// Changes written (slices and nodes).
    pub sent: u64,
    /// Of which EndpointSlice changes (the ones watchers see).
    pub slice_changes: u64,
    /// How far the writer fell behind its schedule at worst.
    pub max_behind: Duration,
    /// Wall time from the first change to the last.
    pub elapsed: Duration,
}

/// Writes churn to an [`ApiServer`]; keeps its own copy of every object it
/// changes, and a [`Ledger`] of the EndpointSlice changes.
#[derive(Debug)]
pub struct Churner {
    api: ApiServer,
    ledger: Arc<Ledger>,
    slices: Vec<Value>,
    nodes: Vec<Value>,
    node_names: Vec<String>,
    /// The last sequence number handed out (0: none yet).
    seq: u64,
    /// Changes made, for the rotation and the round-robin over nodes.
    made: u64,
    /// Slice changes made, for the round-robin over slices.
    slice_changes: u64,
    /// Whether the rotation relabels nodes.
    relabel: bool,
    /// Whether changes carry their stamp (sequence number and send time).
    stamped: bool,
}

impl Churner {
    /// A churner over `api`'s EndpointSlices and Nodes as they are now.
    pub fn new(api: &ApiServer) -> Result<Self> {
        let slices = api.list("endpointslices");
        let nodes = api.list("nodes");
        if slices.is_empty() {
            return Err(anyhow!("the cluster has no EndpointSlices to change"));
        }
        let keys = slices.iter().map(key).collect();
        let node_names = nodes
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        Ok(Churner {
            api: api.clone(),
            ledger: Arc::new(Ledger::new(keys)),
            slices,
            nodes,
            node_names,
            seq: 0,
            made: 0,
            slice_changes: 0,
            relabel: true,
            stamped: true,
        })
    }

    /// The same churner changing EndpointSlices only (the rotation without
    /// [`ChangeKind::NodeRelabel`]), and without stamps: each change is
    /// only what a cluster's controllers write, so a site whose view of the
    /// slice stays the same sees nothing.
    pub fn endpoints_only(mut self) -> Self {
        self.relabel = false;
        self.stamped = false;
        self
    }

    /// The ledger watchers judge against.
    pub fn ledger(&self) -> Arc<Ledger> {
        Arc::clone(&self.ledger)
    }

    /// Writes `rate` changes a second for `duration`; `tick` is called about
    /// every 100 ms with the changes written so far.
    pub async fn run(
        &mut self,
        rate: f64,
        duration: Duration,
        tick: impl FnMut(u64),
    ) -> Result<ChurnOutcome> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(anyhow!("churn rate must be above 0, got {rate}"));
        }
        let total = (rate * duration.as_secs_f64()).round() as u64;
        self.schedule(total, rate, tick, |c, sent_ns| {
            Ok(c.change(sent_ns)? != ChangeKind::NodeRelabel)
        })
        .await
    }

    /// A rolling update of `pods` pods over `duration`, as kube-proxy sees
    /// one: pod after pod, its endpoint comes back with a new address, not
    /// ready, then turns ready — two EndpointSlice changes per pod, the pods
    /// taken round-robin over the slices, at an even open-loop pace.
    pub async fn rolling_update(
        &mut self,
        pods: u64,
        duration: Duration,
        tick: impl FnMut(u64),
    ) -> Result<ChurnOutcome> {
        if pods == 0 || duration.is_zero() {
            return Err(anyhow!("a rolling update needs pods and time"));
        }
        let total = 2 * pods;
        let rate = total as f64 / duration.as_secs_f64();
        let mut step = 0;
        self.schedule(total, rate, tick, |c, sent_ns| {
            let r = c.roll(step, sent_ns);
            step += 1;
            r
        })
        .await
    }

    /// Makes `total` changes with `next` at `rate` a second, each due at
    /// `start + i / rate`; `next` says whether it changed an EndpointSlice.
    async fn schedule(
        &mut self,
        total: u64,
        rate: f64,
        mut tick: impl FnMut(u64),
        mut next: impl FnMut(&mut Self, u64) -> Result<bool>,
    ) -> Result<ChurnOutcome> {
        let start = Instant::now();
        let mut out = ChurnOutcome::default();
        let mut last_tick = start;
        for i in 0..total {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            out.max_behind = out
                .max_behind
                .max(Instant::now().saturating_duration_since(due));
            if next(self, unix_ns())? {
                out.slice_changes += 1;
            }
            out.sent += 1;
            if last_tick.elapsed() >= Duration::from_millis(100) {
                last_tick = Instant::now();
                tick(out.sent);
            }
        }
        out.elapsed = start.elapsed();
        tick(out.sent);
        Ok(out)
    }

    /// Step `step` of a rolling update (see [`Churner::rolling_update`]).
    fn roll(&mut self, step: u64, sent_ns: u64) -> Result<bool> {
        let pod = step / 2;
        let slices = self.slices.len() as u64;
        let id = (pod % slices) as usize;
        self.seq += 1;
        let seq = self.seq;
        let slice = &mut self.slices[id];
        let Some(eps) = slice["endpoints"].as_array_mut().filter(|e| !e.is_empty()) else {
            return Ok(false);
        };
        let at = ((pod / slices) as usize) % eps.len();
        if step.is_multiple_of(2) {
            eps[at]["addresses"] = json!([pod_ip(seq)]);
            eps[at]["conditions"]["ready"] = json!(false);
        } else {
            eps[at]["conditions"]["ready"] = json!(true);
        }
        self.write_slice(id, seq, sent_ns)?;
        Ok(true)
    }

    /// Writes slice `id` as edited, as change `seq` (stamped unless
    /// unstamped, recorded in the ledger first).
    fn write_slice(&mut self, id: usize, seq: u64, sent_ns: u64) -> Result<()> {
        let slice = &mut self.slices[id];
        if self.stamped {
            stamp(slice, seq, sent_ns);
        }
        self.ledger.record(id, seq);
        *slice = self
            .api
            .try_apply(slice.clone())
            .map_err(|s| anyhow!("changing EndpointSlice {}: {s}", key(slice)))?;
        Ok(())
    }

    /// Writes `n` changes at once (a burst), stamped now.
    pub fn burst(&mut self, n: u64) -> Result<u64> {
        let mut slice_changes = 0;
        for _ in 0..n {
            if self.change(unix_ns())? != ChangeKind::NodeRelabel {
                slice_changes += 1;
            }
        }
        Ok(slice_changes)
    }

    /// Makes the next change of the rotation, stamped `sent_ns`.
    fn change(&mut self, sent_ns: u64) -> Result<ChangeKind> {
        // Every fifth change relabels a node (when relabelling is on).
        let relabel = self.relabel && self.made % ROTATION.len() as u64 == 4;
        let round = self.made / ROTATION.len() as u64;
        self.made += 1;
        self.seq += 1;
        let seq = self.seq;
        if relabel && !self.nodes.is_empty() {
            let i = (round % self.nodes.len() as u64) as usize;
            let node = &mut self.nodes[i];
            node["metadata"]["labels"][RELABEL] = json!(seq.to_string());
            stamp(node, seq, sent_ns);
            *node = self
                .api
                .try_apply(node.clone())
                .map_err(|s| anyhow!("relabelling a node: {s}"))?;
            return Ok(ChangeKind::NodeRelabel);
        }
        // Slices in turn: consecutive changes go to different slices. Each
        // slice goes through the four slice changes in turn, pass after
        // pass, so its endpoint count stays where it started: were a
        // slice's kind fixed by its position (with 1,000 slices, slice k
        // got kind k mod 4 every time), a quarter of the slices would only
        // grow, to 100 endpoints, and the cost of a change would rise with
        // the length of the run.
        let slices = self.slices.len() as u64;
        let id = (self.slice_changes % slices) as usize;
        let pass = self.slice_changes / slices;
        self.slice_changes += 1;
        let slice_kinds = &ROTATION[..ROTATION.len() - 1];
        let kind = slice_kinds[((id as u64 + pass) % slice_kinds.len() as u64) as usize];
        let node = self.pick_node(seq);
        edit_slice(&mut self.slices[id], kind, seq, node);
        self.write_slice(id, seq, sent_ns)?;
        Ok(kind)
    }

    fn pick_node(&self, seq: u64) -> Option<String> {
        if self.node_names.is_empty() {
            return None;
        }
        Some(self.node_names[(seq % self.node_names.len() as u64) as usize].clone())
    }
}

/// `namespace/name` of an object.
pub fn key(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["metadata"]["namespace"].as_str().unwrap_or(""),
        obj["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// Applies `kind` to the slice's endpoints. An add on a full slice and a
/// remove on a slice of one endpoint flip readiness instead, so every change
/// changes the object.
/// A new pod's address for change `seq` (10.200.0.0 and up, unused by the samples).
pub fn pod_ip(seq: u64) -> String {
    format!(
        "10.{}.{}.{}",
        200 + (seq >> 16) % 50,
        (seq >> 8) % 256,
        seq % 256
    )
}

fn edit_slice(slice: &mut Value, kind: ChangeKind, seq: u64, node: Option<String>) {
    if !slice["endpoints"].is_array() {
        slice["endpoints"] = json!([]);
    }
    let Some(eps) = slice["endpoints"].as_array_mut() else {
        return;
    };
    let ip = pod_ip(seq);
    match kind {
        ChangeKind::EndpointAdd if eps.len() < MAX_PER_SLICE => {
            let mut ep = json!({
                "addresses": [ip],
                "conditions": {"ready": true, "serving": true, "terminating": false}
            });
            if let Some(n) = node {
                ep["nodeName"] = json!(n);
            }
            eps.push(ep);
        }
        ChangeKind::EndpointRemove if eps.len() > 1 => {
            eps.pop();
        }
        ChangeKind::PodIpChange if !eps.is_empty() => {
            let at = (seq as usize) % eps.len();
            eps[at]["addresses"] = json!([ip]);
        }
        _ if !eps.is_empty() => {
            let at = (seq as usize) % eps.len();
            let ready = eps[at]["conditions"]["ready"].as_bool().unwrap_or(true);
            eps[at]["conditions"]["ready"] = json!(!ready);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use sitegrid_fakeapi::{ApiServer, ApiServerConfig};

    use super::*;
    use crate::report::env::Scale;

    fn endpoint_counts(api: &ApiServer) -> Vec<usize> {
        let mut slices = api.list("endpointslices");
        slices.sort_by_key(key);
        slices
            .iter()
            .map(|s| s["endpoints"].as_array().map_or(0, Vec::len))
            .collect()
    }

    #[test]
    fn a_long_run_leaves_every_slice_the_size_it_had() {
        let api = ApiServer::new(ApiServerConfig::default());
        api.load(Scale::Tiny.size(2).objects("v1"));
        let before = endpoint_counts(&api);
        let mut churner = Churner::new(&api).unwrap();
        let slices = before.len() as u64;
        assert!(slices >= 4, "{slices} slices");
        // 25 passes over every slice (and a relabel every fifth change).
        let mut kinds = std::collections::HashMap::new();
        while churner.slice_changes < 25 * slices {
            *kinds.entry(churner.change(0).unwrap()).or_insert(0u64) += 1;
        }
        let after = endpoint_counts(&api);
        for (i, (b, a)) in before.iter().zip(&after).enumerate() {
            assert!(a.abs_diff(*b) <= 1, "slice {i}: {b} endpoints, then {a}");
        }
        assert_eq!(
            kinds.len(),
            ROTATION.len(),
            "every kind of change: {kinds:?}"
        );
        assert_eq!(kinds[&ChangeKind::NodeRelabel], churner.made / 5);
    }
}
