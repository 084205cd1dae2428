//! The `status` a grid reports, built from what the reconcile observed.
//!
//! Pure functions from the children's statuses and the per-site failures to
//! the grid's status JSON. Timestamps of unchanged conditions are carried over
//! from the previous status, so a reconcile that changes nothing computes the
//! same status and writes nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use sitegrid_api::keys::SiteName;

pub mod budget;

/// The condition type the controller adds to a site's state when it could
/// not reconcile that site (its other conditions are the workload's own).
pub const SITE_CONDITION: &str = "SiteReconciled";

/// The condition type of a ServiceGrid's status.
pub const SERVICE_CONDITION: &str = "Synced";

/// Why one site (or a ServiceGrid's Service) could not be reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// A CamelCase reason, also the reason of the Warning event.
    pub reason: &'static str,
    /// A human-readable message naming the site.
    pub message: String,
}

/// Reasons a site fails.
pub mod reason {
    /// `templates[site]` / `defaultTemplateName` names no `templatePool` entry.
    pub const TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
    /// The API server refused the site's object.
    pub const APPLY_FAILED: &str = "ApplyFailed";
    /// The site's workload was made by someone else (SuperEdge) and differs
    /// from the grid where a change restarts pods: left alone.
    pub const ADOPTION_WOULD_RESTART: &str = "AdoptionWouldRestart";
    /// The site's object was applied (ServiceGrid condition).
    pub const APPLIED: &str = "Applied";
    /// The site's `templatePool` entry is not a workload spec.
    pub const INVALID_TEMPLATE: &str = "InvalidTemplate";
    /// The grid's name does not fit the label its children carry it in.
    pub const NAME_TOO_LONG: &str = "NameTooLong";
    /// `gridUniqKey` cannot be a label value.
    pub const INVALID_GRID_UNIQ_KEY: &str = "InvalidGridUniqKey";
    /// The summary event of sites failing beyond the ones given an event each.
    pub const SITES_FAILED: &str = "SitesFailed";
    /// `status.states` lists only some sites (see [`super::budget`]).
    pub const TRUNCATED: &str = "Truncated";
}

/// The status of a DeploymentGrid / StatefulSetGrid.
///
/// `children` holds the live status of each site's workload (sites that have
/// one), `ready` the sites whose workload has all replicas available,
/// `failures` the sites that could not be reconciled. `states[site]` is the
/// workload's status plus, for a failed site, a `SiteReconciled=False`
/// condition.
pub fn workload_status(
    children: &BTreeMap<SiteName, Value>,
    ready: &BTreeSet<SiteName>,
    failures: &BTreeMap<SiteName, Failure>,
    previous: Option<&Value>,
    now: &str,
) -> Value {
    let sites: BTreeSet<&SiteName> = children.keys().chain(failures.keys()).collect();
    let mut states = Map::new();
    for site in sites {
        let mut state = match children.get(site) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        if let Some(failure) = failures.get(site) {
            let previous = previous
                .and_then(|p| p.pointer(&format!("/states/{}", escape(site.as_str()))))
                .and_then(|s| find_condition(s, SITE_CONDITION));
            let since = transition_time(previous, "False", failure.reason, now);
            let condition = json!({
                "type": SITE_CONDITION,
                "status": "False",
                "reason": failure.reason,
                "message": failure.message,
                // Only fields both DeploymentCondition and StatefulSetCondition
                // have: the API server prunes the others, and the status read
                // back must equal the one computed, or every resync would write.
                "lastTransitionTime": since,
            });
            let conditions = state
                .entry("conditions")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Some(list) = conditions.as_array_mut() {
                list.retain(|c| c.get("type").and_then(Value::as_str) != Some(SITE_CONDITION));
                list.push(condition);
            }
        }
        states.insert(site.to_string(), Value::Object(state));
    }
    let mut status = Map::new();
    if !states.is_empty() {
        status.insert("states".into(), Value::Object(states));
    }
    status.insert("sites".into(), json!(children.len()));
    status.insert("readySites".into(), json!(ready.len()));
    Value::Object(status)
}

/// The status of a ServiceGrid: one `Synced` condition.
pub fn service_status(
    outcome: &Result<(), Failure>,
    generation: Option<i64>,
    previous: Option<&Value>,
    now: &str,
) -> Value {
    let (status, reason, message) = match outcome {
        Ok(()) => (
            "True",
            reason::APPLIED,
            "the Service is up to date".to_owned(),
        ),
        Err(f) => ("False", f.reason, f.message.clone()),
    };
    let previous = previous.and_then(|p| find_condition(p, SERVICE_CONDITION));
    let mut condition = json!({
        "type": SERVICE_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition_time(previous, status, reason, now),
    });
    if let Some(generation) = generation {
        condition["observedGeneration"] = json!(generation);
    }
    json!({ "conditions": [condition] })
}

/// The grid condition present (`False`) while a workload grid cannot be
/// rendered at all (its name or `gridUniqKey` cannot label its children).
pub const RENDERED_CONDITION: &str = "Rendered";

/// Sets the grid-level condition `kind` in `status.conditions` to
/// `(status, reason, message)`, its time carried over from `previous` while
/// status and reason stay; `None` removes it. Other conditions (the
/// multi-cluster ones) are left as they are.
pub fn set_grid_condition(
    status: &mut Value,
    previous: Option<&Value>,
    kind: &str,
    condition: Option<(&str, &str, String)>,
    now: &str,
) {
    let Some(map) = status.as_object_mut() else {
        return;
    };
    let mut list = match map.remove("conditions") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    list.retain(|c| c.get("type").and_then(Value::as_str) != Some(kind));
    if let Some((cond_status, reason, message)) = condition {
        let before = previous.and_then(|p| find_condition(p, kind));
        list.push(json!({
            "type": kind,
            "status": cond_status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition_time(before, cond_status, reason, now),
        }));
    }
    if !list.is_empty() {
        map.insert("conditions".into(), Value::Array(list));
    }
}

/// Whether the grid condition `kind` newly became `False` with `reason`:
/// the moment for a Warning event.
pub fn grid_condition_is_new(
    status: &Value,
    previous: Option<&Value>,
    kind: &str,
) -> Option<(String, String)> {
    let now = find_condition(status, kind)?;
    let reason = now.get("reason").and_then(Value::as_str)?;
    let before = previous.and_then(|p| find_condition(p, kind));
    if now.get("status").and_then(Value::as_str) != Some("False")
        || same_condition(before, "False", reason)
    {
        return None;
    }
    let message = now
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some((reason.to_owned(), message.to_owned()))
}

/// Sites failing now that were not failing for the same reason before: the
/// ones that deserve a Warning event (repeating it every resync would only
/// add API writes).
pub fn new_failures<'a>(
    failures: &'a BTreeMap<SiteName, Failure>,
    previous: Option<&Value>,
) -> Vec<(&'a SiteName, &'a Failure)> {
    failures
        .iter()
        .filter(|(site, failure)| {
            let before = previous
                .and_then(|p| p.pointer(&format!("/states/{}", escape(site.as_str()))))
                .and_then(|s| find_condition(s, SITE_CONDITION));
            !same_condition(before, "False", failure.reason)
        })
        .collect()
}

/// Whether a ServiceGrid's failure is new (see [`new_failures`]).
pub fn service_failure_is_new(failure: &Failure, previous: Option<&Value>) -> bool {
    let before = previous.and_then(|p| find_condition(p, SERVICE_CONDITION));
    !same_condition(before, "False", failure.reason)
}

fn find_condition<'a>(holder: &'a Value, kind: &str) -> Option<&'a Value> {
    holder
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn same_condition(condition: Option<&Value>, status: &str, reason: &str) -> bool {
    condition.is_some_and(|c| {
        c.get("status").and_then(Value::as_str) == Some(status)
            && c.get("reason").and_then(Value::as_str) == Some(reason)
    })
}

/// The previous transition time if the condition keeps its status and reason, else `now`.
fn transition_time(previous: Option<&Value>, status: &str, reason: &str, now: &str) -> Value {
    match previous {
        Some(c) if same_condition(Some(c), status, reason) => c
            .get("lastTransitionTime")
            .cloned()
            .unwrap_or_else(|| json!(now)),
        _ => json!(now),
    }
}

/// JSON pointer escaping of one reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(s: &str) -> SiteName {
        SiteName::from(s)
    }

    fn missing(site: &str) -> Failure {
        Failure {
            reason: reason::TEMPLATE_NOT_FOUND,
            message: format!("site {site}: template \"t9\" is not in templatePool"),
        }
    }

    #[test]
    fn states_copy_each_sites_workload_status_and_count_sites() {
        let children = BTreeMap::from([
            (
                site("beijing"),
                json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}),
            ),
            (
                site("guangzhou"),
                json!({"replicas": 2, "readyReplicas": 1}),
            ),
        ]);
        let ready = BTreeSet::from([site("beijing")]);
        let status = workload_status(&children, &ready, &BTreeMap::new(), None, "T1");
        assert_eq!(status["states"]["beijing"]["availableReplicas"], 2);
        assert_eq!(status["states"]["guangzhou"]["readyReplicas"], 1);
        assert_eq!(status["sites"], 2);
        assert_eq!(status["readySites"], 1);
    }

    #[test]
    fn a_failed_site_gets_a_condition_whose_time_survives_resyncs() {
        let children = BTreeMap::from([(site("beijing"), json!({"replicas": 1}))]);
        let failures = BTreeMap::from([(site("guangzhou"), missing("guangzhou"))]);
        let first = workload_status(&children, &BTreeSet::new(), &failures, None, "T1");
        let cond = &first["states"]["guangzhou"]["conditions"][0];
        assert_eq!(cond["type"], SITE_CONDITION);
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], reason::TEMPLATE_NOT_FOUND);
        assert_eq!(cond["lastTransitionTime"], "T1");
        assert_eq!(first["sites"], 1);
        // The next resync at T2 computes exactly the same status.
        let second = workload_status(&children, &BTreeSet::new(), &failures, Some(&first), "T2");
        assert_eq!(first, second);
        assert!(new_failures(&failures, Some(&first)).is_empty());
        assert_eq!(new_failures(&failures, None).len(), 1);
    }

    #[test]
    fn a_failed_sites_state_survives_the_round_trip_through_both_status_types() {
        use k8s_openapi::api::apps::v1::{DeploymentStatus, StatefulSetStatus};
        let children = BTreeMap::from([(site("beijing"), json!({"replicas": 1}))]);
        let failures = BTreeMap::from([(site("beijing"), missing("beijing"))]);
        let status = workload_status(
            &children,
            &BTreeSet::new(),
            &failures,
            None,
            "2026-11-21T20:00:00Z",
        );
        let state = &status["states"]["beijing"];
        let as_deployment: DeploymentStatus = serde_json::from_value(state.clone()).unwrap();
        let as_statefulset: StatefulSetStatus = serde_json::from_value(state.clone()).unwrap();
        assert_eq!(&serde_json::to_value(as_deployment).unwrap(), state);
        assert_eq!(&serde_json::to_value(as_statefulset).unwrap(), state);
    }

    #[test]
    fn a_failure_on_a_live_site_keeps_its_workload_conditions() {
        let children = BTreeMap::from([(
            site("beijing"),
            json!({"replicas": 1, "conditions": [{"type": "Available", "status": "True"}]}),
        )]);
        let failures = BTreeMap::from([(site("beijing"), missing("beijing"))]);
        let status = workload_status(&children, &BTreeSet::new(), &failures, None, "T1");
        let types: Vec<_> = status["states"]["beijing"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(types, ["Available", SITE_CONDITION]);
    }

    #[test]
    fn service_condition_flips_and_keeps_time_while_unchanged() {
        let ok = service_status(&Ok(()), Some(3), None, "T1");
        assert_eq!(ok["conditions"][0]["status"], "True");
        assert_eq!(ok["conditions"][0]["observedGeneration"], 3);
        assert_eq!(service_status(&Ok(()), Some(3), Some(&ok), "T2"), ok);
        let failure = Failure {
            reason: reason::APPLY_FAILED,
            message: "Service \"x-svc\" is invalid".into(),
        };
        let bad = service_status(&Err(failure.clone()), Some(4), Some(&ok), "T3");
        assert_eq!(bad["conditions"][0]["status"], "False");
        assert_eq!(bad["conditions"][0]["lastTransitionTime"], "T3");
        assert!(service_failure_is_new(&failure, Some(&ok)));
        assert!(!service_failure_is_new(&failure, Some(&bad)));
    }
}
