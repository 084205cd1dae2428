//! Node heartbeats at the kubelet's real rate, for scale simulations.
//!
//! A kubelet 1.20 with NodeLease writes its Node's status when something
//! changes and otherwise every `nodeStatusReportFrequency` (5 min); its
//! liveness goes to a Lease every 10 s, which list/watch clients of Nodes
//! never see. Each status write is a new resourceVersion and a MODIFIED
//! event to every watcher of Nodes: `status.conditions[*].lastHeartbeatTime`
//! moves to now (the kubelet's conditions; `NetworkUnavailable` belongs to
//! the network plugin) and so does the `time` of the kubelet's
//! `managedFields` entry. Labels, spec and everything else stay.
//!
//! [`ApiServer::start_heartbeats`] plays that for every Node, spread evenly
//! over the period: node `i` of `n` (by name) writes at `period·(i+1)/n`
//! into each cycle, so the cluster writes `n / period` Nodes a second and
//! every node once a period. Nodes created or deleted meanwhile join or
//! leave at the next cycle. The timestamps come from tokio's clock (the
//! wall clock when the driver started, plus tokio's elapsed time), so a test
//! with paused time sees the times it advanced to.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::object::{now_rfc3339, rfc3339, Obj};
use super::resource::ResourceType;
use super::store::{EventType, Store};
use super::{ApiServer, Shared};

/// The shortest period: timestamps have a resolution of one second, so a
/// node written twice within one would not change.
const MIN_PERIOD: Duration = Duration::from_secs(1);

/// A running heartbeat driver; dropping it stops the heartbeats.
#[derive(Debug)]
pub struct Heartbeats {
    period: Duration,
    task: JoinHandle<()>,
}

impl Heartbeats {
    /// How often each node writes its status.
    pub fn period(&self) -> Duration {
        self.period
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ApiServer {
    /// Start writing every Node's status once per `period` (kubelet 1.20's
    /// `nodeStatusReportFrequency` is 5 min), the nodes spread evenly over
    /// the period (see the module doc); periods under 1 s count as 1 s.
    /// Runs on the current tokio runtime until the handle is dropped.
    pub fn start_heartbeats(&self, period: Duration) -> Heartbeats {
        let period = period.max(MIN_PERIOD);
        let task = tokio::spawn(drive(Arc::clone(&self.inner), period));
        Heartbeats { period, task }
    }

    /// One status write of Node `name` now, as its kubelet makes it; returns
    /// the Node written, `None` if there is no such Node.
    pub fn heartbeat(&self, name: &str) -> Option<Value> {
        let store = &self.inner.store;
        let rt = store.resources.by_id("nodes")?;
        beat(store, rt, name, &now_rfc3339()).map(|o| o.to_typed_value(rt))
    }

    /// One cycle of [`ApiServer::start_heartbeats`], starting now: every
    /// Node writes its status once, spread evenly over `period` (at least
    /// 1 s), the last at its end. Returns the Nodes written (a node deleted
    /// meanwhile is skipped). For a measurement window that holds exactly
    /// one kubelet period.
    pub async fn status_period(&self, period: Duration) -> u64 {
        let Some(nodes) = self.inner.store.resources.by_id("nodes").cloned() else {
            return 0;
        };
        let cycle = Instant::now();
        one_cycle(
            &self.inner,
            &nodes,
            &Clock::start(),
            cycle,
            period.max(MIN_PERIOD),
        )
        .await
    }
}

/// The heartbeat loop: one cycle per period, each node once per cycle.
async fn drive(shared: Arc<Shared>, period: Duration) {
    let Some(nodes) = shared.store.resources.by_id("nodes").cloned() else {
        return;
    };
    let clock = Clock::start();
    let mut cycle = Instant::now();
    loop {
        one_cycle(&shared, &nodes, &clock, cycle, period).await;
        cycle += period;
        // With no nodes, wait out the cycle instead of spinning.
        tokio::time::sleep_until(cycle).await;
    }
}

/// The cycle starting at `cycle`: node `i` of `n` (by name) writes at
/// `cycle + period·(i+1)/n`; returns the Nodes written.
async fn one_cycle(
    shared: &Shared,
    nodes: &ResourceType,
    clock: &Clock,
    cycle: Instant,
    period: Duration,
) -> u64 {
    let names: Vec<String> = shared
        .store
        .read(|s| s.objects[nodes.idx].keys().cloned().collect());
    let n = u32::try_from(names.len()).unwrap_or(u32::MAX);
    let mut written = 0;
    for (i, name) in (1..=n).zip(&names) {
        let offset = period.checked_mul(i).map_or(period, |d| d / n);
        let due = cycle + offset;
        tokio::time::sleep_until(due).await;
        // A node deleted since the cycle began is skipped.
        written += u64::from(beat(&shared.store, nodes, name, &clock.at(due)).is_some());
    }
    written
}

/// Wall-clock time read through tokio's clock.
struct Clock {
    /// Seconds since the epoch when the driver started.
    wall: u64,
    /// tokio's instant at the same moment.
    start: Instant,
}

impl Clock {
    fn start() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Clock {
            wall,
            start: Instant::now(),
        }
    }

    /// `t` as an RFC 3339 timestamp.
    fn at(&self, t: Instant) -> String {
        rfc3339(self.wall + t.saturating_duration_since(self.start).as_secs())
    }
}

/// Write Node `name`'s heartbeat at `time`; `None` if it does not exist. A
/// write that would change nothing writes nothing (as kube-apiserver).
fn beat(store: &Store, nodes: &ResourceType, name: &str, time: &str) -> Option<Arc<Obj>> {
    store.write(|txn| {
        let current = txn.current(nodes, name)?;
        let mut body = current.body.clone();
        stamp(&mut body, time);
        if body == current.body {
            return Some(current);
        }
        Some(txn.commit(nodes, EventType::Modified, "", name, body, Some(current)))
    })
}

/// What a kubelet's status write changes in a Node body (module doc).
fn stamp(body: &mut Map<String, Value>, time: &str) {
    let conditions = body
        .get_mut("status")
        .and_then(|s| s.get_mut("conditions"))
        .and_then(Value::as_array_mut);
    for c in conditions.into_iter().flatten() {
        if c.get("type").and_then(Value::as_str) == Some("NetworkUnavailable") {
            continue;
        }
        if let Some(c) = c.as_object_mut() {
            c.insert("lastHeartbeatTime".into(), time.into());
        }
    }
    let managed = body
        .get_mut("metadata")
        .and_then(|m| m.get_mut("managedFields"))
        .and_then(Value::as_array_mut);
    for entry in managed.into_iter().flatten() {
        if entry.get("manager").and_then(Value::as_str) != Some("kubelet") {
            continue;
        }
        if let Some(entry) = entry.as_object_mut() {
            entry.insert("time".into(), time.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stamps_the_kubelets_fields_only() {
        let mut body = json!({
            "metadata": {"name": "n1", "labels": {"location": "a"}, "managedFields": [
                {"manager": "kubeadm", "time": "2026-01-01T00:00:00Z"},
                {"manager": "kubelet", "time": "2026-01-01T00:00:00Z"}
            ]},
            "status": {"conditions": [
                {"type": "NetworkUnavailable", "lastHeartbeatTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
            ]}
        });
        let before = body.clone();
        let Value::Object(map) = &mut body else {
            unreachable!()
        };
        stamp(map, "2026-11-23T10:00:00Z");
        let mut want = before;
        want["metadata"]["managedFields"][1]["time"] = json!("2026-11-23T10:00:00Z");
        want["status"]["conditions"][1]["lastHeartbeatTime"] = json!("2026-11-23T10:00:00Z");
        assert_eq!(body, want);
    }
}
