//! The status of a distributed grid in the control cluster, from what each
//! managed cluster reported.
//!
//! Pure: reports in, status JSON out. `status.clusters[<cluster>]` keeps each
//! cluster's report as it came; `status.states[<site>]` is the seed's
//! drop-in view — a site one cluster has is that cluster's state verbatim; a
//! site two clusters have (SuperEdge let one silently overwrite the other) is
//! their sum, and the `SitesUnique` condition says so. Condition times are
//! carried over while a condition keeps its status and reason, so a
//! reconcile that sees nothing new computes the same status and writes
//! nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

/// Condition type: every managed cluster reported recently.
pub const CLUSTERS_REACHABLE: &str = "ClustersReachable";
/// Condition type: no site name is in more than one cluster.
pub const SITES_UNIQUE: &str = "SitesUnique";
/// Reason of a merged condition in a site several clusters have.
pub const IN_SEVERAL_CLUSTERS: &str = "InSeveralClusters";

/// Integer fields of a Deployment's or StatefulSet's status that add up
/// across clusters.
const SUMMED: [&str; 6] = [
    "replicas",
    "readyReplicas",
    "updatedReplicas",
    "availableReplicas",
    "unavailableReplicas",
    "currentReplicas",
];

/// What one cluster reported on its copy of the grid.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterReport {
    /// The cluster's name (see [`super::cluster_name`]).
    pub name: String,
    /// Its per-site states (`status.states` of its copy).
    pub states: Map<String, Value>,
    /// Whether its heartbeat is recent.
    pub reachable: bool,
    /// When it last reported, if it stopped (RFC 3339, seconds).
    pub last_report: Option<String>,
    /// Anything else worth saying about this cluster (e.g. the copy could
    /// not be written).
    pub message: Option<String>,
}

/// The status of an original DeploymentGrid or StatefulSetGrid.
///
/// `reports` in any order (one per cluster name); `previous` is the status
/// the original has now.
pub fn workload_status(reports: &[ClusterReport], previous: Option<&Value>, now: &str) -> Value {
    let mut reports: Vec<&ClusterReport> = reports.iter().collect();
    reports.sort_by(|a, b| a.name.cmp(&b.name));

    // site -> [(cluster, state)] in cluster-name order.
    let mut by_site: BTreeMap<&str, Vec<(&str, &Value)>> = BTreeMap::new();
    for report in &reports {
        for (site, state) in &report.states {
            by_site.entry(site).or_default().push((&report.name, state));
        }
    }

    let mut states = Map::new();
    let mut ready = 0;
    let mut shared = Vec::new();
    for (site, holders) in &by_site {
        let state = match holders.as_slice() {
            [(_, only)] => (*only).clone(),
            many => {
                let names: Vec<&str> = many.iter().map(|(name, _)| *name).collect();
                shared.push(format!(
                    "site {site} is in clusters {}: states.{site} sums them; status.clusters keeps each",
                    names.join(", ")
                ));
                merge_site(many)
            }
        };
        if state_ready(&state) {
            ready += 1;
        }
        states.insert((*site).to_owned(), state);
    }

    let mut clusters = Map::new();
    for report in &reports {
        let mut entry = Map::new();
        if !report.states.is_empty() {
            entry.insert("states".into(), Value::Object(report.states.clone()));
        }
        entry.insert("reachable".into(), json!(report.reachable));
        if let Some(at) = &report.last_report {
            entry.insert("lastReportTime".into(), json!(at));
        }
        if let Some(message) = &report.message {
            entry.insert("message".into(), json!(message));
        }
        clusters.insert(report.name.clone(), Value::Object(entry));
    }

    let unreachable: Vec<String> = reports
        .iter()
        .filter(|r| !r.reachable)
        .map(|r| match &r.last_report {
            Some(at) => format!("{}: no report since {at}", r.name),
            None => format!("{}: never reported", r.name),
        })
        .collect();
    let reachable = if unreachable.is_empty() {
        condition(
            previous,
            CLUSTERS_REACHABLE,
            true,
            "AllReachable",
            format!("all {} cluster(s) report", reports.len()),
            now,
        )
    } else {
        condition(
            previous,
            CLUSTERS_REACHABLE,
            false,
            "Unreachable",
            unreachable.join("; "),
            now,
        )
    };
    let unique = if shared.is_empty() {
        condition(
            previous,
            SITES_UNIQUE,
            true,
            SITES_UNIQUE,
            "every site is in one cluster".into(),
            now,
        )
    } else {
        condition(
            previous,
            SITES_UNIQUE,
            false,
            "SiteInSeveralClusters",
            shared.join("; "),
            now,
        )
    };

    let mut status = Map::new();
    if !states.is_empty() {
        status.insert("states".into(), Value::Object(states));
    }
    status.insert("sites".into(), json!(by_site.len()));
    status.insert("readySites".into(), json!(ready));
    if !clusters.is_empty() {
        status.insert("clusters".into(), Value::Object(clusters));
    }
    status.insert("conditions".into(), json!([reachable, unique]));
    Value::Object(status)
}

/// One site's state from several clusters (in cluster-name order): counts
/// summed, revisions and generations dropped, conditions merged per type.
pub fn merge_site(holders: &[(&str, &Value)]) -> Value {
    let mut merged = Map::new();
    for field in SUMMED {
        let values: Vec<i64> = holders
            .iter()
            .filter_map(|(_, state)| state.get(field).and_then(Value::as_i64))
            .collect();
        if !values.is_empty() {
            merged.insert(field.into(), json!(values.iter().sum::<i64>()));
        }
    }
    // Condition types in type order (as deploy/karmada's aggregation).
    let types: BTreeSet<&str> = holders
        .iter()
        .flat_map(|(_, state)| conditions(state))
        .filter_map(|c| c.get("type").and_then(Value::as_str))
        .collect();
    let mut merged_conditions = Vec::new();
    for kind in types {
        let mut parts = Vec::new();
        let (mut all_true, mut any_false) = (true, false);
        let mut transition: Option<&str> = None;
        let mut update: Option<&str> = None;
        for (cluster, state) in holders {
            let found = conditions(state)
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind));
            let Some(c) = found else {
                all_true = false;
                continue;
            };
            let status = c.get("status").and_then(Value::as_str).unwrap_or("Unknown");
            all_true &= status == "True";
            any_false |= status == "False";
            match c.get("reason").and_then(Value::as_str) {
                Some(reason) if !reason.is_empty() => {
                    parts.push(format!("{cluster}: {status} ({reason})"));
                }
                _ => parts.push(format!("{cluster}: {status}")),
            }
            transition = latest(transition, c.get("lastTransitionTime"));
            update = latest(update, c.get("lastUpdateTime"));
        }
        let status = if any_false {
            "False"
        } else if all_true {
            "True"
        } else {
            "Unknown"
        };
        let mut condition = Map::new();
        condition.insert("type".into(), json!(kind));
        condition.insert("status".into(), json!(status));
        condition.insert("reason".into(), json!(IN_SEVERAL_CLUSTERS));
        condition.insert("message".into(), json!(parts.join(", ")));
        if let Some(t) = transition {
            condition.insert("lastTransitionTime".into(), json!(t));
        }
        if let Some(t) = update {
            condition.insert("lastUpdateTime".into(), json!(t));
        }
        merged_conditions.push(Value::Object(condition));
    }
    if !merged_conditions.is_empty() {
        merged.insert("conditions".into(), Value::Array(merged_conditions));
    }
    Value::Object(merged)
}

/// Whether a site's state (as reported or merged) counts as ready: all its
/// replicas ready and no `Available` condition `False`. (A site whose
/// template is missing keeps running what it has, as in one cluster.)
pub fn state_ready(state: &Value) -> bool {
    let count = |field: &str| state.get(field).and_then(Value::as_i64).unwrap_or(0);
    let failing = conditions(state).iter().any(|c| {
        c.get("type").and_then(Value::as_str) == Some("Available")
            && c.get("status").and_then(Value::as_str) == Some("False")
    });
    count("readyReplicas") >= count("replicas") && !failing
}

/// Sites the reports name more than once (for tests and logs).
pub fn shared_sites(reports: &[ClusterReport]) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut shared = BTreeSet::new();
    for report in reports {
        for site in report.states.keys() {
            if !seen.insert(site.clone()) {
                shared.insert(site.clone());
            }
        }
    }
    shared
}

fn conditions(state: &Value) -> &[Value] {
    state
        .get("conditions")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The later of two RFC 3339 UTC times (they order as strings).
fn latest<'a>(current: Option<&'a str>, candidate: Option<&'a Value>) -> Option<&'a str> {
    match (current, candidate.and_then(Value::as_str)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A grid-level condition, keeping the previous transition time while its
/// status and reason stay.
fn condition(
    previous: Option<&Value>,
    kind: &str,
    ok: bool,
    reason: &str,
    message: String,
    now: &str,
) -> Value {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .and_then(|p| p.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        })
        .filter(|c| {
            c.get("status").and_then(Value::as_str) == Some(status)
                && c.get("reason").and_then(Value::as_str) == Some(reason)
        })
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn available(since: &str) -> Value {
        json!({
            "type": "Available", "status": "True",
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
            "lastTransitionTime": since, "lastUpdateTime": since,
        })
    }

    fn report(name: &str, states: Value) -> ClusterReport {
        ClusterReport {
            name: name.into(),
            states: states.as_object().cloned().unwrap_or_default(),
            reachable: true,
            ..ClusterReport::default()
        }
    }

    fn cond<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .unwrap()
    }

    /// The seed's example: zone1 in cluster A (2/2), zone2 in B (3/3).
    #[test]
    fn the_seeds_example_shows_both_sites_as_each_cluster_reported_them() {
        let zone1 = json!({"replicas": 2, "readyReplicas": 2, "conditions": [available("2021-06-17T07:33:50Z")]});
        let zone2 = json!({"replicas": 3, "readyReplicas": 3, "conditions": [available("2021-06-17T07:37:12Z")]});
        let reports = [
            report("cluster-b", json!({"zone2": zone2})),
            report("cluster-a", json!({"zone1": zone1})),
        ];
        let status = workload_status(&reports, None, "T1");
        assert_eq!(status["states"]["zone1"], zone1);
        assert_eq!(status["states"]["zone2"], zone2);
        assert_eq!(status["sites"], 2);
        assert_eq!(status["readySites"], 2);
        assert_eq!(status["clusters"]["cluster-a"]["states"]["zone1"], zone1);
        assert_eq!(status["clusters"]["cluster-b"]["reachable"], true);
        assert_eq!(cond(&status, SITES_UNIQUE)["status"], "True");
        assert_eq!(cond(&status, CLUSTERS_REACHABLE)["status"], "True");
        // Recomputed later with nothing new: identical, so nothing is written.
        assert_eq!(workload_status(&reports, Some(&status), "T2"), status);
    }

    #[test]
    fn one_site_in_two_clusters_is_summed_and_never_overwritten() {
        let a = json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 4,
                       "conditions": [available("2026-11-23T10:00:00Z")]});
        let b = json!({"replicas": 3, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 9,
                       "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                                       "message": "Deployment does not have minimum availability.",
                                       "lastTransitionTime": "2026-11-23T11:00:00Z", "lastUpdateTime": "2026-11-23T11:00:00Z"}]});
        let reports = [
            report("edge-a", json!({"zone1": a.clone()})),
            report("edge-b", json!({"zone1": b.clone()})),
        ];
        let status = workload_status(&reports, None, "T1");
        let zone1 = &status["states"]["zone1"];
        assert_eq!(zone1["replicas"], 5);
        assert_eq!(zone1["readyReplicas"], 3);
        assert_eq!(zone1["availableReplicas"], 3);
        assert!(zone1.get("observedGeneration").is_none());
        let available = &zone1["conditions"][0];
        assert_eq!(available["status"], "False");
        assert_eq!(available["reason"], IN_SEVERAL_CLUSTERS);
        assert_eq!(
            available["message"],
            "edge-a: True (MinimumReplicasAvailable), edge-b: False (MinimumReplicasUnavailable)"
        );
        assert_eq!(available["lastTransitionTime"], "2026-11-23T11:00:00Z");
        // Each cluster's own view is kept as it came.
        assert_eq!(status["clusters"]["edge-a"]["states"]["zone1"], a);
        assert_eq!(status["clusters"]["edge-b"]["states"]["zone1"], b);
        assert_eq!(status["sites"], 1);
        assert_eq!(status["readySites"], 0);
        let unique = cond(&status, SITES_UNIQUE);
        assert_eq!(unique["status"], "False");
        assert_eq!(
            unique["message"],
            "site zone1 is in clusters edge-a, edge-b: states.zone1 sums them; status.clusters keeps each"
        );
        assert_eq!(shared_sites(&reports), BTreeSet::from(["zone1".to_owned()]));
    }

    /// What the API server hands back (typed, pruned to the kind's schema)
    /// must be what was computed, or every reconcile would write again.
    #[test]
    fn a_merged_state_reads_back_unchanged_as_its_kinds_status() {
        use k8s_openapi::api::apps::v1::{DeploymentStatus, StatefulSetStatus};
        let a = json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                       "conditions": [available("2026-11-23T10:00:00Z")]});
        let b = json!({"replicas": 2, "updatedReplicas": 2});
        let merged = merge_site(&[("a", &a), ("b", &b)]);
        assert_eq!(
            merged["conditions"][0]["status"], "Unknown",
            "b has no Available condition"
        );
        let d: DeploymentStatus = serde_json::from_value(merged.clone()).unwrap();
        assert_eq!(d.replicas, Some(3));
        assert_eq!(serde_json::to_value(d).unwrap(), merged);

        let ready = json!({"type": "Ready", "status": "True", "reason": "AllReady", "message": "",
                           "lastTransitionTime": "2026-11-23T10:00:00Z"});
        let a =
            json!({"replicas": 2, "readyReplicas": 2, "currentReplicas": 2, "conditions": [ready]});
        let b = json!({"replicas": 1, "readyReplicas": 0, "currentReplicas": 1});
        let merged = merge_site(&[("a", &a), ("b", &b)]);
        let s: StatefulSetStatus = serde_json::from_value(merged.clone()).unwrap();
        assert_eq!((s.current_replicas, s.ready_replicas), (Some(3), Some(2)));
        assert_eq!(serde_json::to_value(s).unwrap(), merged);
    }

    #[test]
    fn an_unreachable_cluster_keeps_its_last_states_and_says_since_when() {
        let zone2 = json!({"replicas": 3, "readyReplicas": 3});
        let mut b = report("cluster-b", json!({"zone2": zone2}));
        b.reachable = false;
        b.last_report = Some("2026-11-23T12:00:00Z".into());
        let mut c = report("cluster-c", json!({}));
        c.reachable = false;
        let reports = [report("cluster-a", json!({})), b, c];
        let status = workload_status(&reports, None, "T1");
        assert_eq!(
            status["states"]["zone2"], zone2,
            "workloads keep running there"
        );
        assert_eq!(status["clusters"]["cluster-b"]["reachable"], false);
        assert_eq!(
            status["clusters"]["cluster-b"]["lastReportTime"],
            "2026-11-23T12:00:00Z"
        );
        assert!(status["clusters"]["cluster-a"].get("states").is_none());
        let reachable = cond(&status, CLUSTERS_REACHABLE);
        assert_eq!(reachable["status"], "False");
        assert_eq!(reachable["reason"], "Unreachable");
        assert_eq!(
            reachable["message"],
            "cluster-b: no report since 2026-11-23T12:00:00Z; cluster-c: never reported"
        );
        assert_eq!(reachable["lastTransitionTime"], "T1");
        // Back: the condition flips and its time moves.
        let back = [
            report("cluster-a", json!({})),
            report("cluster-b", json!({"zone2": zone2})),
            report("cluster-c", json!({})),
        ];
        let after = workload_status(&back, Some(&status), "T2");
        assert_eq!(cond(&after, CLUSTERS_REACHABLE)["status"], "True");
        assert_eq!(cond(&after, CLUSTERS_REACHABLE)["lastTransitionTime"], "T2");
        assert_eq!(cond(&after, SITES_UNIQUE)["lastTransitionTime"], "T1");
        assert!(after["clusters"]["cluster-b"]
            .get("lastReportTime")
            .is_none());
    }

    #[test]
    fn a_site_is_ready_with_all_replicas_ready_and_not_unavailable() {
        assert!(state_ready(&json!({"replicas": 2, "readyReplicas": 2})));
        assert!(!state_ready(&json!({"replicas": 2, "readyReplicas": 1})));
        assert!(!state_ready(&json!({"replicas": 1, "readyReplicas": 1,
            "conditions": [{"type": "Available", "status": "False"}]})));
        assert!(state_ready(&json!({"replicas": 1, "readyReplicas": 1,
            "conditions": [{"type": "SiteReconciled", "status": "False"}]})));
        assert!(state_ready(&json!({})), "a site scaled to zero is ready");
    }

    #[test]
    fn no_clusters_no_sites() {
        let status = workload_status(&[], None, "T1");
        assert_eq!(status["sites"], 0);
        assert!(status.get("states").is_none() && status.get("clusters").is_none());
        assert_eq!(cond(&status, CLUSTERS_REACHABLE)["status"], "True");
    }
}
