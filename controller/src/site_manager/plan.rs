//! The change to one node: from what sitegrid wants on it ([`Desired`]) and
//! what sitegrid set there before ([`Owned`], kept in an annotation on the
//! node so it survives restarts), the labels, annotations and taints to set
//! and remove, and the cordon — touching only what sitegrid owns.
//!
//! - A key sitegrid wants and owns is set to the wanted value.
//! - A key sitegrid owns and no longer wants is removed.
//! - A key someone else set is never touched: with the wanted value already,
//!   it is left alone and not taken over (so it stays when the unit goes);
//!   with another value, it is reported as a conflict.
//! - `unschedulable`: sitegrid cordons a node only if it was schedulable,
//!   and uncordons only a node it cordoned itself.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Taint;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::membership::{taint_id, Desired, NodeInfo, Want};

/// The node annotation that records what sitegrid set on the node.
pub const OWNED_ANNOTATION: &str = "sitegrid.io/site-owned";

/// What sitegrid set on a node (and may therefore change or remove).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owned {
    /// Label keys.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub labels: BTreeSet<String>,
    /// Annotation keys.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub annotations: BTreeSet<String>,
    /// Taints, as `key:effect`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub taints: BTreeSet<String>,
    /// Whether sitegrid cordoned the node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cordoned: bool,
}

impl Owned {
    /// The record on `node` (empty when absent or unreadable: sitegrid then
    /// owns nothing there, which is the safe reading).
    pub fn of(node: &NodeInfo) -> Owned {
        Owned::from_annotations(&node.annotations)
    }

    /// The record in an object's `annotations` (empty when absent or unreadable).
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Owned {
        annotations
            .get(OWNED_ANNOTATION)
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default()
    }

    fn is_empty(&self) -> bool {
        *self == Owned::default()
    }
}

/// The change to one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePlan {
    /// Labels to set (`Some`) or remove (`None`).
    pub labels: BTreeMap<String, Option<String>>,
    /// Annotations to set or remove (the ownership record included).
    pub annotations: BTreeMap<String, Option<String>>,
    /// The node's whole new taint list, when it changes.
    pub taints: Option<Vec<Taint>>,
    /// The new `spec.unschedulable`, when it changes.
    pub unschedulable: Option<bool>,
    /// Keys someone else set to another value than a unit wants
    /// (`label K`, `annotation K`, `taint K:EFFECT`).
    pub foreign: Vec<String>,
}

impl NodePlan {
    /// Whether the node needs no write.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
            && self.annotations.is_empty()
            && self.taints.is_none()
            && self.unschedulable.is_none()
    }

    /// The JSON merge patch that makes the change (`null` removes a key).
    pub fn merge_patch(&self) -> Value {
        let pairs = |m: &BTreeMap<String, Option<String>>| -> Map<String, Value> {
            m.iter()
                .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                .collect()
        };
        let mut meta = Map::new();
        if !self.labels.is_empty() {
            meta.insert("labels".into(), Value::Object(pairs(&self.labels)));
        }
        if !self.annotations.is_empty() {
            meta.insert(
                "annotations".into(),
                Value::Object(pairs(&self.annotations)),
            );
        }
        let mut spec = Map::new();
        if let Some(taints) = &self.taints {
            spec.insert("taints".into(), json!(taints));
        }
        if let Some(u) = self.unschedulable {
            spec.insert("unschedulable".into(), json!(u));
        }
        let mut patch = Map::new();
        if !meta.is_empty() {
            patch.insert("metadata".into(), Value::Object(meta));
        }
        if !spec.is_empty() {
            patch.insert("spec".into(), Value::Object(spec));
        }
        Value::Object(patch)
    }
}

/// The change that brings `node` to `want`, given what sitegrid `owned`.
pub fn plan(node: &NodeInfo, want: &Desired) -> NodePlan {
    let owned = Owned::of(node);
    let mut out = NodePlan::default();
    let mut now = Owned::default();
    plan_map(
        &node.labels,
        &want.labels,
        &owned.labels,
        &mut now.labels,
        &mut out.labels,
        &mut out.foreign,
        "label",
    );
    let mut current_annotations = node.annotations.clone();
    current_annotations.remove(OWNED_ANNOTATION);
    plan_map(
        &current_annotations,
        &want.annotations,
        &owned.annotations,
        &mut now.annotations,
        &mut out.annotations,
        &mut out.foreign,
        "annotation",
    );

    // Taints, by key:effect.
    let mut taints: Vec<Taint> = Vec::new();
    let mut changed = false;
    for t in &node.taints {
        let id = taint_id(t);
        match want.taints.get(&id) {
            Some(w) if owned.taints.contains(&id) => {
                now.taints.insert(id);
                if w.value != t.value {
                    changed = true;
                }
                taints.push(w.clone());
            }
            Some(w) => {
                if w.value != t.value {
                    out.foreign.push(format!("taint {id}"));
                }
                taints.push(t.clone());
            }
            None if owned.taints.contains(&id) => changed = true,
            None => taints.push(t.clone()),
        }
    }
    for (id, w) in &want.taints {
        if !node.taints.iter().any(|t| taint_id(t) == *id) {
            now.taints.insert(id.clone());
            taints.push(w.clone());
            changed = true;
        }
    }
    if changed {
        out.taints = Some(taints);
    }

    // The cordon.
    now.cordoned = owned.cordoned;
    if want.unschedulable && !node.unschedulable {
        out.unschedulable = Some(true);
        now.cordoned = true;
    } else if !want.unschedulable && owned.cordoned {
        if node.unschedulable {
            out.unschedulable = Some(false);
        }
        now.cordoned = false;
    }

    if now != owned {
        let record = (!now.is_empty())
            .then(|| serde_json::to_string(&now).expect("a set of strings serializes"));
        out.annotations.insert(OWNED_ANNOTATION.to_owned(), record);
    }
    out.foreign.sort();
    out
}

/// One map (labels or annotations): sets, removals, ownership and conflicts.
fn plan_map(
    current: &BTreeMap<String, String>,
    want: &BTreeMap<String, Want>,
    owned: &BTreeSet<String>,
    now: &mut BTreeSet<String>,
    changes: &mut BTreeMap<String, Option<String>>,
    foreign: &mut Vec<String>,
    kind: &str,
) {
    for (key, w) in want {
        let have = current.get(key);
        match w {
            Want::Hold => {
                if owned.contains(key) && have.is_some() {
                    now.insert(key.clone());
                }
            }
            Want::Set(v) => match have {
                Some(h) if !owned.contains(key) => {
                    // Someone else's: never touched.
                    if h != v {
                        foreign.push(format!("{kind} {key}"));
                    }
                }
                Some(h) => {
                    now.insert(key.clone());
                    if h != v {
                        changes.insert(key.clone(), Some(v.clone()));
                    }
                }
                None => {
                    now.insert(key.clone());
                    changes.insert(key.clone(), Some(v.clone()));
                }
            },
        }
    }
    for key in owned {
        if !want.contains_key(key) && current.contains_key(key) {
            changes.insert(key.clone(), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site_manager::membership::tests::map;

    fn wants(pairs: &[(&str, &str)]) -> BTreeMap<String, Want> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Want::Set(v.to_string())))
            .collect()
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Taint::default()
        }
    }

    /// Applies a plan to a node as the API server would apply its merge patch.
    fn apply(node: &mut NodeInfo, p: &NodePlan) {
        for (target, changes) in [
            (&mut node.labels, &p.labels),
            (&mut node.annotations, &p.annotations),
        ] {
            for (k, v) in changes {
                match v {
                    Some(v) => target.insert(k.clone(), v.clone()),
                    None => target.remove(k),
                };
            }
        }
        if let Some(t) = &p.taints {
            node.taints = t.clone();
        }
        if let Some(u) = p.unschedulable {
            node.unschedulable = u;
        }
    }

    #[test]
    fn joining_sets_and_leaving_removes_exactly_what_sitegrid_set() {
        let mut node = NodeInfo {
            name: "bj-3".into(),
            labels: map(&[("team", "edge")]),
            ..NodeInfo::default()
        };
        let join = Desired {
            labels: wants(&[
                ("beijing", "nodeunits.superedge.io"),
                ("location", "beijing"),
            ]),
            annotations: wants(&[("owner", "ops")]),
            taints: [(
                "edge:NoSchedule".to_owned(),
                taint("edge", "true", "NoSchedule"),
            )]
            .into(),
            ..Desired::default()
        };
        let p = plan(&node, &join);
        assert_eq!(
            p.labels,
            [
                (
                    "beijing".to_owned(),
                    Some("nodeunits.superedge.io".to_owned())
                ),
                ("location".to_owned(), Some("beijing".to_owned())),
            ]
            .into()
        );
        apply(&mut node, &p);
        assert_eq!(node.taints, [taint("edge", "true", "NoSchedule")]);
        // At rest: nothing to write.
        assert!(plan(&node, &join).is_empty(), "{:?}", plan(&node, &join));
        // Moving to guangzhou: the labels follow, the record with them.
        let moved = Desired {
            labels: wants(&[
                ("guangzhou", "nodeunits.superedge.io"),
                ("location", "guangzhou"),
            ]),
            ..Desired::default()
        };
        let p = plan(&node, &moved);
        assert_eq!(p.labels.get("beijing"), Some(&None));
        assert_eq!(
            p.labels.get("location"),
            Some(&Some("guangzhou".to_owned()))
        );
        apply(&mut node, &p);
        assert!(node.taints.is_empty() && !node.annotations.contains_key("owner"));
        // Leaving every unit: only what sitegrid set goes, and its record too.
        let p = plan(&node, &Desired::default());
        apply(&mut node, &p);
        assert_eq!(node.labels, map(&[("team", "edge")]));
        assert!(node.annotations.is_empty(), "{:?}", node.annotations);
        assert!(plan(&node, &Desired::default()).is_empty());
    }

    #[test]
    fn someone_elses_label_or_taint_is_never_touched() {
        let mut node = NodeInfo {
            name: "bj-1".into(),
            labels: map(&[("location", "lab"), ("zone", "a")]),
            taints: vec![taint("edge", "theirs", "NoSchedule")],
            ..NodeInfo::default()
        };
        let want = Desired {
            labels: wants(&[("location", "beijing"), ("zone", "a")]),
            taints: [(
                "edge:NoSchedule".to_owned(),
                taint("edge", "ours", "NoSchedule"),
            )]
            .into(),
            ..Desired::default()
        };
        let p = plan(&node, &want);
        assert!(!p.labels.contains_key("location"));
        assert!(p.taints.is_none());
        assert_eq!(p.foreign, ["label location", "taint edge:NoSchedule"]);
        apply(&mut node, &p);
        // `zone` already had the wanted value: left alone and not taken over,
        // so it stays when the unit goes.
        let p = plan(&node, &Desired::default());
        apply(&mut node, &p);
        assert_eq!(node.labels, map(&[("location", "lab"), ("zone", "a")]));
        assert_eq!(node.taints, [taint("edge", "theirs", "NoSchedule")]);
    }

    #[test]
    fn sitegrid_uncordons_only_what_it_cordoned() {
        let cordon = Desired {
            unschedulable: true,
            ..Desired::default()
        };
        let mut node = NodeInfo {
            name: "n".into(),
            ..NodeInfo::default()
        };
        let p = plan(&node, &cordon);
        assert_eq!(p.unschedulable, Some(true));
        apply(&mut node, &p);
        let p = plan(&node, &Desired::default());
        assert_eq!(p.unschedulable, Some(false));
        apply(&mut node, &p);
        assert!(!node.unschedulable && node.annotations.is_empty());
        // Cordoned by someone else: stays cordoned when the unit lets go.
        let mut theirs = NodeInfo {
            name: "m".into(),
            unschedulable: true,
            ..NodeInfo::default()
        };
        let p = plan(&theirs, &cordon);
        assert_eq!(p.unschedulable, None, "already cordoned: not taken over");
        apply(&mut theirs, &p);
        let p = plan(&theirs, &Desired::default());
        apply(&mut theirs, &p);
        assert!(theirs.unschedulable);
    }

    #[test]
    fn the_merge_patch_sets_and_removes() {
        let p = NodePlan {
            labels: [
                ("a".to_owned(), Some("1".to_owned())),
                ("b".to_owned(), None),
            ]
            .into(),
            unschedulable: Some(true),
            ..NodePlan::default()
        };
        assert_eq!(
            p.merge_patch(),
            json!({"metadata": {"labels": {"a": "1", "b": null}}, "spec": {"unschedulable": true}})
        );
        assert_eq!(NodePlan::default().merge_patch(), json!({}));
    }
}
