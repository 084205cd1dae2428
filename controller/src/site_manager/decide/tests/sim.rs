//! A small simulated API server for the passes: merge patches applied as
//! RFC 7386 says, finalizers holding deletions, owner references collected.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use sitegrid_api::site_manager::NodeGroupSpec;

use super::super::*;

pub(super) fn named_unit(name: &str, nodes: &[&str]) -> NodeUnit {
    NodeUnit::new(
        name,
        NodeUnitSpec {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            ..NodeUnitSpec::default()
        },
    )
}

pub(super) fn selected_unit(name: &str, key: &str, values: &[&str]) -> NodeUnit {
    NodeUnit::new(
        name,
        NodeUnitSpec {
            selector: Some(Selector {
                match_expressions: vec![LabelSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(values.iter().map(|v| v.to_string()).collect()),
                }],
                ..Selector::default()
            }),
            ..NodeUnitSpec::default()
        },
    )
}

pub(super) fn group(name: &str, units: &[&str]) -> NodeGroup {
    NodeGroup::new(
        name,
        NodeGroupSpec {
            node_units: units.iter().map(|u| u.to_string()).collect(),
            ..NodeGroupSpec::default()
        },
    )
}

pub(super) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("time"))
}

/// RFC 7386.
pub(super) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let object = target.as_object_mut().expect("object");
    for (k, v) in patch {
        if v.is_null() {
            object.remove(k);
        } else {
            merge(object.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

pub(super) fn patched<K: serde::Serialize + serde::de::DeserializeOwned>(
    obj: &K,
    patch: &Value,
) -> K {
    let mut value = serde_json::to_value(obj).expect("to json");
    merge(&mut value, patch);
    serde_json::from_value(value).expect("from json")
}

/// The API server, as far as the site-manager controller can tell.
#[derive(Default)]
pub(super) struct Sim {
    pub(super) nodes: Vec<NodeInfo>,
    pub(super) units: Vec<NodeUnit>,
    pub(super) groups: Vec<NodeGroup>,
    pub(super) default_unit: bool,
    /// Every write of every pass, counted.
    pub(super) writes: usize,
    pub(super) warnings: Vec<Warning>,
}

impl Sim {
    pub(super) fn new(nodes: Vec<NodeInfo>, units: Vec<NodeUnit>, groups: Vec<NodeGroup>) -> Sim {
        let mut sim = Sim {
            nodes,
            default_unit: true,
            ..Sim::default()
        };
        for u in units {
            sim.create_unit(u);
        }
        for mut g in groups {
            g.metadata.uid = Some(format!("uid-{}", g.name_any()));
            sim.groups.push(g);
        }
        sim
    }

    pub(super) fn create_unit(&mut self, mut u: NodeUnit) {
        u.metadata.uid = Some(format!("uid-{}", u.name_any()));
        self.units.push(u);
    }

    pub(super) fn node(&self, name: &str) -> &NodeInfo {
        self.nodes.iter().find(|n| n.name == name).expect("node")
    }

    pub(super) fn node_mut(&mut self, name: &str) -> &mut NodeInfo {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .expect("node")
    }

    pub(super) fn unit(&self, name: &str) -> &NodeUnit {
        self.units
            .iter()
            .find(|u| u.name_any() == name)
            .unwrap_or_else(|| panic!("unit {name}"))
    }

    pub(super) fn unit_mut(&mut self, name: &str) -> &mut NodeUnit {
        self.units
            .iter_mut()
            .find(|u| u.name_any() == name)
            .expect("unit")
    }

    pub(super) fn label(&self, node: &str, key: &str) -> Option<&str> {
        self.node(node).labels.get(key).map(String::as_str)
    }

    pub(super) fn conflict(&self, unit: &str) -> String {
        let status = self.unit(unit).status.clone().unwrap_or_default();
        let c = status.conditions.iter().find(|c| c.type_ == "Conflict");
        c.filter(|c| c.status == "True")
            .map(|c| c.message.clone())
            .unwrap_or_default()
    }

    /// One pass, applied; what it wrote.
    pub(super) fn pass(&mut self) -> Actions {
        let actions = decide(
            World {
                nodes: &self.nodes,
                units: &self.units,
                groups: &self.groups,
            },
            self.default_unit,
            &now(),
        );
        self.apply(&actions);
        actions
    }

    /// Passes until one writes nothing; how many wrote something.
    pub(super) fn settle(&mut self) -> usize {
        for n in 0..10 {
            if self.pass().is_empty() {
                return n;
            }
        }
        panic!("no rest after 10 passes: {:#?}", self.pass());
    }

    pub(super) fn apply(&mut self, a: &Actions) {
        let count = a.create_units.len()
            + a.delete_units.len()
            + a.add_finalizers.len()
            + a.unit_patches.len()
            + a.node_patches.len()
            + a.release.len()
            + a.unit_status.len()
            + a.group_status.len()
            + a.warnings.len();
        self.writes += count;
        for u in &a.create_units {
            assert!(
                !self.units.iter().any(|e| e.name_any() == u.name_any()),
                "create of existing {}",
                u.name_any()
            );
            self.create_unit(u.clone());
        }
        for name in &a.delete_units {
            self.delete_unit(name);
        }
        for t in &a.add_finalizers {
            let meta = self.meta_mut(t);
            meta.finalizers
                .get_or_insert_with(Vec::new)
                .push(FINALIZER.to_owned());
        }
        for (name, patch) in &a.unit_patches {
            let unit = self.unit_mut(name);
            *unit = patched(unit, patch);
        }
        for (name, change) in &a.node_patches {
            let n = self.node_mut(name);
            for (k, v) in &change.labels {
                match v {
                    Some(v) => n.labels.insert(k.clone(), v.clone()),
                    None => n.labels.remove(k),
                };
            }
            for (k, v) in &change.annotations {
                match v {
                    Some(v) => n.annotations.insert(k.clone(), v.clone()),
                    None => n.annotations.remove(k),
                };
            }
            if let Some(t) = &change.taints {
                n.taints = t.clone();
            }
            if let Some(u) = change.unschedulable {
                n.unschedulable = u;
            }
        }
        for t in &a.release {
            self.meta_mut(t)
                .finalizers
                .as_mut()
                .expect("finalizers")
                .retain(|f| f != FINALIZER);
        }
        // kube-apiserver 1.20 refuses a condition without a message.
        let statuses = a.unit_status.iter().map(|(_, s)| &s.conditions);
        for c in statuses
            .chain(a.group_status.iter().map(|(_, s)| &s.conditions))
            .flatten()
        {
            assert!(!c.message.is_empty() && !c.reason.is_empty(), "{c:?}");
        }
        for (name, s) in &a.unit_status {
            self.unit_mut(name).status = Some(s.clone());
        }
        for (name, s) in &a.group_status {
            let g = self.groups.iter_mut().find(|g| g.name_any() == *name);
            g.expect("group").status = Some(s.clone());
        }
        self.warnings.extend(a.warnings.iter().cloned());
        self.collect();
    }

    pub(super) fn meta_mut(&mut self, t: &Target) -> &mut kube::api::ObjectMeta {
        match t {
            Target::Unit(n) => self.unit_mut(n).meta_mut(),
            Target::Group(n) => {
                let g = self.groups.iter_mut().find(|g| g.name_any() == *n);
                g.expect("group").meta_mut()
            }
        }
    }

    pub(super) fn delete_unit(&mut self, name: &str) {
        self.unit_mut(name).metadata.deletion_timestamp = Some(now());
        self.collect();
    }

    pub(super) fn delete_group(&mut self, name: &str) {
        let g = self.groups.iter_mut().find(|g| g.name_any() == name);
        g.expect("group").metadata.deletion_timestamp = Some(now());
        self.collect();
    }

    /// Deleted objects without finalizers go; units whose owner is gone
    /// are deleted (the garbage collector).
    pub(super) fn collect(&mut self) {
        let gone = |m: &kube::api::ObjectMeta| {
            m.deletion_timestamp.is_some() && m.finalizers.as_ref().is_none_or(Vec::is_empty)
        };
        self.units.retain(|u| !gone(&u.metadata));
        self.groups.retain(|g| !gone(&g.metadata));
        let uids: BTreeSet<String> = self
            .groups
            .iter()
            .filter_map(|g| g.metadata.uid.clone())
            .collect();
        let mut orphaned = false;
        for u in &mut self.units {
            let owners = u.owner_references();
            if !owners.is_empty()
                && owners.iter().all(|o| !uids.contains(&o.uid))
                && u.metadata.deletion_timestamp.is_none()
            {
                u.metadata.deletion_timestamp = Some(now());
                orphaned = true;
            }
        }
        if orphaned {
            self.collect();
        }
    }
}
