//! What is kept, per resource: the objects, the scopes the kubelet listed
//! (each with the resourceVersion the API server gave it and its members),
//! and the objects it read one by one (GET). Pure data and the rules that
//! change it; [`crate::NodeCache`] holds it behind a lock.
//!
//! The rules:
//!
//! - **A list replaces its scope** (members and resourceVersion), a
//!   watch-list's initial events likewise once they end.
//! - **A watch event applies to its scope only when it is newer** than the
//!   scope's resourceVersion: a second watch of the same scope (the kubelet
//!   reconnecting while the old stream drains) changes nothing twice.
//! - **A watch is followed only from where the scope is**: one that starts
//!   from another resourceVersion than the scope's could have seen events
//!   the node cache did not ([`ResourceState::continues`]; the proxy then
//!   ends it with `410 Gone`, so the kubelet relists through the proxy).
//! - **Bookmarks move a scope's version in memory only**: a list answered
//!   offline with the last event's version instead is still true, and
//!   bookmarks then cost no disk write.
//! - **An object is kept while a scope holds it or it was read alone**,
//!   and, for Secrets, ConfigMaps, claims and volumes, while a kept pod
//!   references it ([`State::retain`]).

use std::collections::{BTreeMap, BTreeSet};

use sitegrid_apimachinery::watch::EventType;

use crate::{
    resource::{KeptResource, Retention},
    scope::Scope,
    token::Tokens,
    wire::{Format, Item},
};

/// An object's key: namespace (empty when cluster-scoped) and name.
pub type Key = (String, String);

/// Whether resourceVersion `a` is newer than `b`. kube-apiserver's versions
/// are numbers (etcd revisions); clients treat them as opaque, so two that
/// are not both numbers compare as "newer" whenever they differ.
pub fn newer(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => a != b,
    }
}

/// One scope as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeState {
    /// The resourceVersion of the last list, event or bookmark.
    pub resource_version: String,
    /// The objects the scope holds.
    pub members: BTreeSet<Key>,
    /// The format its answers came in.
    pub format: Format,
}

/// Everything kept of one resource.
#[derive(Debug, Clone, Default)]
pub struct ResourceState {
    /// The objects, by key.
    pub objects: BTreeMap<Key, Item>,
    /// The listed scopes.
    pub scopes: BTreeMap<Scope, ScopeState>,
    /// Objects read alone (GET), kept while retained.
    pub gotten: BTreeSet<Key>,
    /// Why nothing of this resource is served (its file was refused);
    /// cleared by the next list.
    pub refused: Option<String>,
    /// Changed since it was last written.
    pub dirty: bool,
}

/// How an object lookup ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// The object.
    Found(&'a Item),
    /// A kept scope that would hold it does not: it does not exist (404).
    Absent,
    /// Nothing kept says (503).
    Unknown,
}

impl ResourceState {
    /// Replaces `scope` with a list's answer.
    ///
    /// Returns false when the answer is the one kept (same version, same
    /// objects byte for byte): nothing changes, nothing is written again.
    pub fn replace(
        &mut self,
        scope: &Scope,
        format: Format,
        resource_version: &str,
        items: Vec<Item>,
    ) -> bool {
        if let Some(old) = self.scopes.get(scope) {
            let same = old.resource_version == resource_version
                && old.format == format
                && old.members.len() == items.len()
                && items.iter().all(|i| {
                    let key = key_of(i);
                    old.members.contains(&key)
                        && self.objects.get(&key).is_some_and(|o| o.bytes == i.bytes)
                });
            if same && self.refused.is_none() {
                return false;
            }
        }
        let mut members = BTreeSet::new();
        for item in items {
            let key = key_of(&item);
            members.insert(key.clone());
            self.upsert(key, item);
        }
        let old = self.scopes.insert(
            scope.clone(),
            ScopeState {
                resource_version: resource_version.to_owned(),
                members,
                format,
            },
        );
        if let Some(old) = old {
            for key in old.members {
                self.collect(&key);
            }
        }
        self.refused = None;
        self.dirty = true;
        true
    }

    /// Applies one watch event of `scope`; returns whether anything changed.
    pub fn apply(
        &mut self,
        resource: KeptResource,
        scope: &Scope,
        event: EventType,
        item: Item,
    ) -> bool {
        let Some(state) = self.scopes.get_mut(scope) else {
            return false;
        };
        if !newer(&item.facts.resource_version, &state.resource_version) {
            return false;
        }
        if state.format != item.format {
            // Answers in two formats for one scope: keep neither half.
            self.forget(scope);
            return true;
        }
        state
            .resource_version
            .clone_from(&item.facts.resource_version);
        let key = key_of(&item);
        let stays =
            event != EventType::Deleted && scope.selects(resource, &item.facts) != Some(false);
        if stays {
            state.members.insert(key.clone());
            self.upsert(key, item);
        } else {
            state.members.remove(&key);
            self.collect(&key);
        }
        self.dirty = true;
        true
    }

    /// A bookmark of `scope`: its version moves on (in memory only).
    pub fn bookmark(&mut self, scope: &Scope, resource_version: &str) {
        if let Some(state) = self.scopes.get_mut(scope) {
            if newer(resource_version, &state.resource_version) {
                state.resource_version = resource_version.to_owned();
            }
        }
    }

    /// An object read alone.
    pub fn got(&mut self, item: Item) {
        let key = key_of(&item);
        self.gotten.insert(key.clone());
        self.upsert(key, item);
        self.dirty = true;
    }

    /// Drops `scope` (a paged list, answers in two formats): nothing of it is
    /// served until it is listed again.
    pub fn forget(&mut self, scope: &Scope) {
        if let Some(old) = self.scopes.remove(scope) {
            for key in old.members {
                self.collect(&key);
            }
            self.dirty = true;
        }
    }

    /// Whether a watch of `scope` from `resource_version` continues what is
    /// kept: the scope is kept, and at that version.
    pub fn continues(&self, scope: &Scope, resource_version: &str) -> bool {
        self.scopes
            .get(scope)
            .is_some_and(|s| s.resource_version == resource_version)
    }

    /// The kept scope that answers `request`: the same scope, else one that
    /// covers it.
    pub fn answering(&self, request: &Scope) -> Option<(&Scope, &ScopeState)> {
        self.scopes
            .get_key_value(request)
            .or_else(|| self.scopes.iter().find(|(s, _)| s.covers(request)))
    }

    /// The object `key`, or whether a kept scope says it does not exist.
    pub fn lookup(&self, key: &Key) -> Lookup<'_> {
        if let Some(item) = self.objects.get(key) {
            return Lookup::Found(item);
        }
        let holds_name = self
            .scopes
            .keys()
            .any(|s| s.holds_any_named(&key.0, &key.1));
        if holds_name {
            Lookup::Absent
        } else {
            Lookup::Unknown
        }
    }

    /// Keeps `item` unless a newer version of it is kept already.
    fn upsert(&mut self, key: Key, item: Item) {
        match self.objects.get(&key) {
            Some(old) if newer(&old.facts.resource_version, &item.facts.resource_version) => {}
            _ => {
                self.objects.insert(key, item);
            }
        }
    }

    /// Drops the object `key` if nothing keeps it any more.
    fn collect(&mut self, key: &Key) {
        let held =
            self.gotten.contains(key) || self.scopes.values().any(|s| s.members.contains(key));
        if !held {
            self.objects.remove(key);
        }
    }

    /// Drops what `keep` refuses: scopes pinned to one name, and objects
    /// read alone. A scope of a referenced-only resource that is not pinned
    /// to one name is never kept (the kubelet reads those objects by name).
    fn retain_referenced(&mut self, keep: impl Fn(&Key) -> bool) {
        let dropped: Vec<Scope> = self
            .scopes
            .keys()
            .filter(|s| match s.name() {
                Some(name) => !keep(&(s.namespace.clone().unwrap_or_default(), name.to_owned())),
                None => true,
            })
            .cloned()
            .collect();
        for scope in dropped {
            self.forget(&scope);
        }
        let unkept: Vec<Key> = self.gotten.iter().filter(|k| !keep(k)).cloned().collect();
        for key in unkept {
            self.gotten.remove(&key);
            self.collect(&key);
            self.dirty = true;
        }
    }
}

/// Everything kept.
#[derive(Debug, Default)]
pub struct State {
    /// Per resource.
    pub resources: BTreeMap<KeptResource, ResourceState>,
    /// Kept TokenRequest answers.
    pub tokens: Tokens,
    /// What the kubelet reported of its pods while the API server was unreachable.
    pub local: Local,
}

/// The kubelet's offline reports, by pod uid.
#[derive(Debug, Clone, Default)]
pub struct Local {
    /// By uid.
    pub pods: BTreeMap<String, crate::local::LocalPod>,
    /// Changed since last written.
    pub dirty: bool,
}

impl State {
    /// An empty state with every resource.
    pub fn new() -> State {
        State {
            resources: KeptResource::ALL
                .into_iter()
                .map(|r| (r, ResourceState::default()))
                .collect(),
            tokens: Tokens::default(),
            local: Local::default(),
        }
    }

    /// One resource's state.
    pub fn resource(&self, resource: KeptResource) -> &ResourceState {
        // Every resource is inserted by `new` and none is ever removed.
        &self.resources[&resource]
    }

    /// One resource's state, to change.
    pub fn resource_mut(&mut self, resource: KeptResource) -> &mut ResourceState {
        self.resources.entry(resource).or_default()
    }

    /// Drops what no kept pod needs any more: Secrets, ConfigMaps and claims
    /// no kept pod references, volumes no kept claim is bound to, tokens
    /// of pods no longer kept or expired by `now_unix`. Nothing is dropped
    /// while no pod scope is kept (the pods are not known yet, or their
    /// file was refused).
    pub fn retain(&mut self, now_unix: i64) {
        let pods = self.resource(KeptResource::Pods);
        if pods.scopes.is_empty() {
            return;
        }
        let mut secrets = BTreeSet::new();
        let mut config_maps = BTreeSet::new();
        let mut claims = BTreeSet::new();
        let mut uids = BTreeSet::new();
        let live = pods.objects.iter().filter(|(k, _)| {
            pods.gotten.contains(*k) || pods.scopes.values().any(|s| s.members.contains(*k))
        });
        for ((ns, _), pod) in live {
            let refs = &pod.facts.refs;
            secrets.extend(refs.secrets.iter().map(|n| (ns.clone(), n.clone())));
            config_maps.extend(refs.config_maps.iter().map(|n| (ns.clone(), n.clone())));
            claims.extend(refs.claims.iter().map(|n| (ns.clone(), n.clone())));
            uids.insert(pod.facts.uid.clone());
        }
        self.resource_mut(KeptResource::Secrets)
            .retain_referenced(|k| secrets.contains(k));
        self.resource_mut(KeptResource::ConfigMaps)
            .retain_referenced(|k| config_maps.contains(k));
        self.resource_mut(KeptResource::PersistentVolumeClaims)
            .retain_referenced(|k| claims.contains(k));
        let volumes: BTreeSet<Key> = self
            .resource(KeptResource::PersistentVolumeClaims)
            .objects
            .values()
            .filter_map(|c| Some((String::new(), c.facts.refs.volume.clone()?)))
            .collect();
        self.resource_mut(KeptResource::PersistentVolumes)
            .retain_referenced(|k| volumes.contains(k));
        self.tokens
            .retain(|t| uids.contains(&t.pod_uid) && t.expires_unix > now_unix);
        debug_assert!(KeptResource::ALL
            .iter()
            .filter(|r| r.retention() == Retention::Referenced)
            .all(|r| self.resources.contains_key(r)));
    }
}

/// The key of an item.
pub fn key_of(item: &Item) -> Key {
    (item.facts.namespace.clone(), item.facts.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Facts, Refs};
    use bytes::Bytes;

    pub(crate) fn item(ns: &str, name: &str, rv: &str) -> Item {
        Item {
            bytes: Bytes::from(format!("{ns}/{name}@{rv}")),
            format: Format::Protobuf,
            facts: Facts {
                namespace: ns.into(),
                name: name.into(),
                uid: format!("uid-{name}"),
                resource_version: rv.into(),
                fields: vec![("spec.nodeName", "bj-1".into())],
                ..Facts::default()
            },
        }
    }

    fn pod(name: &str, rv: &str, secrets: &[&str]) -> Item {
        let mut p = item("shop", name, rv);
        p.facts.refs = Refs {
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            ..Refs::default()
        };
        p
    }

    fn node_pods() -> Scope {
        Scope::new(None, "", "spec.nodeName=bj-1").unwrap()
    }

    fn by_name(name: &str) -> Scope {
        Scope::new(Some("shop"), "", &format!("metadata.name={name}")).unwrap()
    }

    #[test]
    fn the_same_answer_again_changes_nothing_and_is_not_written_again() {
        let mut pods = ResourceState::default();
        let scope = node_pods();
        assert!(pods.replace(&scope, Format::Protobuf, "10", vec![item("shop", "a", "9")]));
        pods.dirty = false;
        assert!(!pods.replace(&scope, Format::Protobuf, "10", vec![item("shop", "a", "9")]));
        assert!(!pods.dirty);
        // A newer version, or another object: kept, to be written.
        assert!(pods.replace(&scope, Format::Protobuf, "11", vec![item("shop", "a", "9")]));
        assert!(pods.dirty);
        pods.dirty = false;
        assert!(pods.replace(&scope, Format::Protobuf, "11", vec![item("shop", "b", "9")]));
        assert!(pods.continues(&scope, "11"));
    }

    #[test]
    fn events_apply_once_and_in_order() {
        let mut pods = ResourceState::default();
        let scope = node_pods();
        pods.replace(&scope, Format::Protobuf, "10", vec![item("shop", "a", "9")]);
        assert!(pods.continues(&scope, "10"));
        assert!(!pods.continues(&scope, "9"), "a watch from before the list");
        assert!(pods.apply(
            KeptResource::Pods,
            &scope,
            EventType::Added,
            item("shop", "b", "11")
        ));
        assert!(
            !pods.apply(
                KeptResource::Pods,
                &scope,
                EventType::Added,
                item("shop", "b", "11")
            ),
            "the same event from a second stream"
        );
        assert!(pods.apply(
            KeptResource::Pods,
            &scope,
            EventType::Deleted,
            item("shop", "a", "12")
        ));
        let members: Vec<&str> = pods.scopes[&scope]
            .members
            .iter()
            .map(|k| k.1.as_str())
            .collect();
        assert_eq!(members, ["b"]);
        assert!(
            !pods.objects.contains_key(&("shop".into(), "a".into())),
            "nothing keeps it"
        );
        assert_eq!(pods.scopes[&scope].resource_version, "12");
        pods.bookmark(&scope, "20");
        pods.bookmark(&scope, "15");
        assert!(pods.continues(&scope, "20"));
    }

    #[test]
    fn an_event_that_leaves_the_scope_removes_the_member() {
        let mut pods = ResourceState::default();
        let scope = node_pods();
        pods.replace(&scope, Format::Protobuf, "10", vec![item("shop", "a", "9")]);
        let mut moved = item("shop", "a", "11");
        moved.facts.fields = vec![("spec.nodeName", "bj-2".into())];
        pods.apply(KeptResource::Pods, &scope, EventType::Modified, moved);
        assert!(pods.scopes[&scope].members.is_empty());
    }

    #[test]
    fn lookups_tell_absent_from_unknown() {
        let mut secrets = ResourceState::default();
        secrets.replace(&by_name("db"), Format::Protobuf, "5", vec![]);
        assert_eq!(
            secrets.lookup(&("shop".into(), "db".into())),
            Lookup::Absent
        );
        assert_eq!(
            secrets.lookup(&("shop".into(), "other".into())),
            Lookup::Unknown
        );
        let mut pods = ResourceState::default();
        pods.replace(
            &node_pods(),
            Format::Protobuf,
            "5",
            vec![item("shop", "a", "4")],
        );
        assert!(matches!(
            pods.lookup(&("shop".into(), "a".into())),
            Lookup::Found(_)
        ));
        assert_eq!(
            pods.lookup(&("shop".into(), "z".into())),
            Lookup::Unknown,
            "a pod of another node may exist"
        );
    }

    #[test]
    fn what_no_pod_references_is_let_go() {
        let mut state = State::new();
        state.resource_mut(KeptResource::Secrets).replace(
            &by_name("db"),
            Format::Protobuf,
            "3",
            vec![item("shop", "db", "2")],
        );
        state.retain(0);
        assert_eq!(
            state.resource(KeptResource::Secrets).scopes.len(),
            1,
            "pods not known yet: nothing is dropped"
        );
        state.resource_mut(KeptResource::Pods).replace(
            &node_pods(),
            Format::Protobuf,
            "10",
            vec![pod("web", "9", &["db"])],
        );
        state.retain(0);
        assert_eq!(state.resource(KeptResource::Secrets).objects.len(), 1);
        state.resource_mut(KeptResource::Pods).apply(
            KeptResource::Pods,
            &node_pods(),
            EventType::Deleted,
            pod("web", "11", &["db"]),
        );
        state.retain(0);
        let secrets = state.resource(KeptResource::Secrets);
        assert!(secrets.scopes.is_empty() && secrets.objects.is_empty());
        assert!(secrets.dirty, "its file is rewritten without it");
    }
}
