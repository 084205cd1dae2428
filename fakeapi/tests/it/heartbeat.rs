//! Node heartbeats: the kubelet's status writes, spread evenly over the
//! period, changing only what a kubelet's write changes. Time is paused, so
//! the schedule is exact.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use sitegrid_fakeapi::{sample, ApiServer, ApiServerConfig};

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ`.
fn epoch_secs(t: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

/// Each node's resourceVersion.
fn versions(server: &ApiServer) -> BTreeMap<String, String> {
    server
        .list("nodes")
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_owned(),
                n["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect()
}

fn changed(before: &BTreeMap<String, String>, server: &ApiServer) -> Vec<String> {
    versions(server)
        .into_iter()
        .filter(|(name, rv)| before.get(name) != Some(rv))
        .map(|(name, _)| name)
        .collect()
}

/// `(type, lastHeartbeatTime)` of each condition.
fn heartbeats(node: &Value) -> Vec<(String, String)> {
    node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_owned(),
                c["lastHeartbeatTime"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn kubelet_time(node: &Value) -> String {
    node["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["manager"] == "kubelet")
        .unwrap()["time"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Advance paused time to `secs` after `start`.
async fn at(start: tokio::time::Instant, secs: f64) {
    tokio::time::sleep_until(start + Duration::from_secs_f64(secs)).await;
}

#[tokio::test(start_paused = true)]
async fn every_node_writes_once_a_period_spread_evenly() {
    let server = ApiServer::new(ApiServerConfig::default());
    // 2 sites of 5 nodes: site-0-node-0 … site-1-node-4.
    server.load(sample::synthetic(2, 5, 0, 0, "v1"));
    let initial: BTreeMap<String, Value> = server
        .list("nodes")
        .into_iter()
        .map(|n| (n["metadata"]["name"].as_str().unwrap().to_owned(), n))
        .collect();
    let before = versions(&server);
    let rv0 = server.resource_version();
    let start = tokio::time::Instant::now();
    let beats = server.start_heartbeats(Duration::from_secs(100));
    assert_eq!(beats.period(), Duration::from_secs(100));
    // One node every 10 s, in name order: 10 nodes / 100 s.
    at(start, 9.5).await;
    assert!(changed(&before, &server).is_empty());
    at(start, 10.5).await;
    assert_eq!(changed(&before, &server), ["site-0-node-0"]);
    at(start, 50.5).await;
    assert_eq!(
        changed(&before, &server),
        [
            "site-0-node-0",
            "site-0-node-1",
            "site-0-node-2",
            "site-0-node-3",
            "site-0-node-4"
        ]
    );
    at(start, 100.5).await;
    assert_eq!(changed(&before, &server).len(), 10);
    assert_eq!(server.resource_version(), rv0 + 10, "one write per node");
    let first = server.get("nodes", None, "site-1-node-2").unwrap();
    let old = &initial["site-1-node-2"];
    // A heartbeat moves the kubelet's times and nothing else.
    assert_eq!(first["metadata"]["labels"], old["metadata"]["labels"]);
    assert_eq!(first["spec"], old["spec"]);
    assert_eq!(first["status"]["images"], old["status"]["images"]);
    let written = heartbeats(&first);
    let time = written[1].1.clone();
    assert_ne!(time, heartbeats(old)[1].1);
    for ((ty, t), (old_ty, old_t)) in written.iter().zip(heartbeats(old)) {
        assert_eq!(*ty, old_ty);
        if ty == "NetworkUnavailable" {
            assert_eq!(
                *t, old_t,
                "the network plugin's condition is not the kubelet's"
            );
        } else {
            assert_eq!(*t, time);
        }
    }
    assert_eq!(kubelet_time(&first), time);
    // The next period: each node once more, exactly one period later.
    let after_first = versions(&server);
    at(start, 200.5).await;
    assert_eq!(changed(&after_first, &server).len(), 10);
    assert_eq!(server.resource_version(), rv0 + 20);
    let second = server.get("nodes", None, "site-1-node-2").unwrap();
    assert_eq!(
        epoch_secs(&heartbeats(&second)[1].1) - epoch_secs(&time),
        100
    );
    // Dropping the handle stops the writes.
    drop(beats);
    at(start, 1000.0).await;
    assert_eq!(server.resource_version(), rv0 + 20);
}

#[tokio::test(start_paused = true)]
async fn nodes_added_later_join_the_next_cycle() {
    let server = ApiServer::new(ApiServerConfig::default());
    server.load(sample::synthetic(1, 2, 0, 0, "v1"));
    let start = tokio::time::Instant::now();
    let _beats = server.start_heartbeats(Duration::from_secs(60));
    at(start, 1.0).await;
    server.load(sample::synthetic(2, 2, 0, 0, "v1").split_off(2));
    server.delete("nodes", None, "site-0-node-1");
    let rv = server.resource_version();
    // This cycle: site-0-node-0 at 30 s; site-0-node-1 at 60 s is gone.
    at(start, 61.0).await;
    assert_eq!(server.resource_version(), rv + 1);
    // The next: three nodes, one every 20 s.
    at(start, 81.0).await;
    assert_eq!(server.resource_version(), rv + 2);
    at(start, 121.0).await;
    assert_eq!(server.resource_version(), rv + 4);
}

#[tokio::test]
async fn one_heartbeat_on_demand() {
    let server = ApiServer::new(ApiServerConfig::default());
    server.load(sample::two_sites("v1"));
    let before = server.get("nodes", None, "bj-2").unwrap();
    let after = server.heartbeat("bj-2").unwrap();
    assert_ne!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_ne!(heartbeats(&after), heartbeats(&before));
    assert_eq!(after["metadata"]["labels"], before["metadata"]["labels"]);
    assert!(server.heartbeat("nope").is_none());
}
