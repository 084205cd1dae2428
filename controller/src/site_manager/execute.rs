//! Executing one pass of the site-manager controller: [`decide::decide`]
//! over what the stores hold, then its [`Actions`] written to the API server,
//! each write counted and the version it made remembered (the next pass
//! waits until the watches have brought them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use sitegrid_api::site_manager::{NodeGroup, NodeUnit};

use super::decide::{self, Actions, Target, Warning, World, FINALIZER};
use super::membership::{node_info, NodeInfo};
use super::SiteManagerOptions;
use crate::metrics::Metrics;
use crate::shared::{finalizers_with, FIELD_MANAGER};

/// Where events about NodeUnits and NodeGroups (cluster-scoped) go.
const EVENT_NAMESPACE: &str = "default";
/// Node patches in flight at once.
const NODE_WRITES_AT_ONCE: usize = 8;

/// Executes a pass's writes, counting each.
pub(super) struct Executor {
    client: Client,
    metrics: Arc<Metrics>,
    /// The resourceVersion each write of the last pass returned, by kind and
    /// name.
    written: Mutex<BTreeMap<(&'static str, String), String>>,
}

impl Executor {
    /// Writes through `client`, counting each write in `metrics`.
    pub(super) fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        Self {
            client,
            metrics,
            written: Mutex::default(),
        }
    }

    /// Whether a store still holds an older version of an object the last
    /// pass wrote (a deleted object, or a version that is not a number, is
    /// never waited for).
    pub(super) fn behind(
        &self,
        nodes: &Store<Node>,
        units: &Store<NodeUnit>,
        groups: &Store<NodeGroup>,
    ) -> bool {
        fn older<K: Resource<DynamicType = ()> + Clone>(
            store: &Store<K>,
            name: &str,
            wrote: u64,
        ) -> bool {
            store
                .get(&ObjectRef::new(name))
                .and_then(|o| o.resource_version())
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|seen| seen < wrote)
        }
        let written = self.written.lock().expect("not poisoned");
        written.iter().any(|((kind, name), version)| {
            let Ok(wrote) = version.parse::<u64>() else {
                return false;
            };
            match *kind {
                "Node" => older(nodes, name, wrote),
                "NodeUnit" => older(units, name, wrote),
                "NodeGroup" => older(groups, name, wrote),
                _ => false,
            }
        })
    }

    /// Forgets the versions the last pass wrote (the stores have them).
    pub(super) fn forget_writes(&self) {
        self.written.lock().expect("not poisoned").clear();
    }

    /// One pass; whether every write succeeded.
    pub(super) async fn pass(
        &self,
        options: &SiteManagerOptions,
        nodes: &Store<Node>,
        units: &Store<NodeUnit>,
        groups: &Store<NodeGroup>,
    ) -> bool {
        let nodes = nodes.state();
        let infos: Vec<NodeInfo> = nodes.iter().map(|n| node_info(n)).collect();
        let units: Vec<NodeUnit> = units.state().iter().map(|u| (**u).clone()).collect();
        let groups: Vec<NodeGroup> = groups.state().iter().map(|g| (**g).clone()).collect();
        let world = World {
            nodes: &infos,
            units: &units,
            groups: &groups,
        };
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let actions = decide::decide(world, options.default_unit, &now);
        if actions.is_empty() {
            return true;
        }
        let versions: BTreeMap<String, Option<String>> = nodes
            .iter()
            .map(|n| (n.name_any(), n.resource_version()))
            .collect();
        self.execute(actions, &versions, &units, &groups).await
    }

    /// Makes the writes of `actions` in their order; whether all succeeded.
    async fn execute(
        &self,
        actions: Actions,
        node_versions: &BTreeMap<String, Option<String>>,
        units: &[NodeUnit],
        groups: &[NodeGroup],
    ) -> bool {
        let mut ok = self.write_units(&actions, units, groups).await;
        let nodes_ok = self.patch_nodes(&actions, node_versions).await;
        ok &= nodes_ok;
        if nodes_ok {
            for target in &actions.release {
                ok &= self.finalizer(target, units, groups, false).await;
            }
        }
        ok &= self.write_statuses(&actions).await;
        for warning in &actions.warnings {
            self.warn(warning, units, groups).await;
        }
        ok
    }

    /// Creates and deletes units, adds finalizers, patches units' specs.
    async fn write_units(
        &self,
        actions: &Actions,
        units: &[NodeUnit],
        groups: &[NodeGroup],
    ) -> bool {
        let unit_api = Api::<NodeUnit>::all(self.client.clone());
        let mut ok = true;
        for unit in &actions.create_units {
            let done = unit_api.create(&PostParams::default(), unit).await;
            ok &= self.count(version(done), "create", "NodeUnit", &unit.name_any());
        }
        for name in &actions.delete_units {
            let done = unit_api.delete(name, &DeleteParams::default()).await;
            ok &= self.count(done.map(|_| None), "delete", "NodeUnit", name);
        }
        for target in &actions.add_finalizers {
            ok &= self.finalizer(target, units, groups, true).await;
        }
        for (name, patch) in &actions.unit_patches {
            let done = unit_api.patch(name, &params(), &Patch::Merge(patch)).await;
            ok &= self.count(version(done), "patch", "NodeUnit", name);
        }
        ok
    }

    /// Patches the nodes, a few at a time.
    async fn patch_nodes(
        &self,
        actions: &Actions,
        node_versions: &BTreeMap<String, Option<String>>,
    ) -> bool {
        let node_api = Api::<Node>::all(self.client.clone());
        let node_writes = actions.node_patches.iter().map(|(name, change)| {
            let mut patch = change.merge_patch();
            if change.taints.is_some() {
                // The taint list is replaced whole: only over what was read.
                let version = node_versions.get(name).cloned().flatten();
                patch["metadata"]["resourceVersion"] = json!(version);
            }
            let node_api = &node_api;
            async move {
                let done = node_api.patch(name, &params(), &Patch::Merge(&patch)).await;
                self.count(version(done), "patch", "Node", name)
            }
        });
        futures::stream::iter(node_writes)
            .buffer_unordered(NODE_WRITES_AT_ONCE)
            .fold(true, |all, ok| async move { all && ok })
            .await
    }

    /// Patches the units' and groups' status.
    async fn write_statuses(&self, actions: &Actions) -> bool {
        let unit_api = Api::<NodeUnit>::all(self.client.clone());
        let group_api = Api::<NodeGroup>::all(self.client.clone());
        let mut ok = true;
        for (name, status) in &actions.unit_status {
            let body = json!({"status": {
                "readyRate": status.ready_rate,
                "readyNodes": list_or_null(&status.ready_nodes),
                "notReadyNodes": list_or_null(&status.not_ready_nodes),
                "conditions": status.conditions,
            }});
            let done = unit_api
                .patch_status(name, &params(), &Patch::Merge(&body))
                .await;
            ok &= self.count(version(done), "patch-status", "NodeUnit", name);
        }
        for (name, status) in &actions.group_status {
            let body = json!({"status": {
                "unitNumber": status.unit_number,
                "nodeUnits": list_or_null(&status.node_units),
                "conditions": status.conditions,
            }});
            let done = group_api
                .patch_status(name, &params(), &Patch::Merge(&body))
                .await;
            ok &= self.count(version(done), "patch-status", "NodeGroup", name);
        }
        ok
    }

    /// Adds (`add`) or removes [`FINALIZER`], guarded by the object's
    /// resourceVersion (a concurrent change fails it; the next pass retries).
    async fn finalizer(
        &self,
        target: &Target,
        units: &[NodeUnit],
        groups: &[NodeGroup],
        add: bool,
    ) -> bool {
        let Some(Found { kind, meta, .. }) = find(target, units, groups) else {
            return true;
        };
        let current = meta.finalizers.as_deref().unwrap_or_default();
        let finalizers = finalizers_with(current, FINALIZER, add);
        let patch = Patch::Merge(json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": meta.resource_version,
        }}));
        let name = meta.name.clone().unwrap_or_default();
        let verb = if add {
            "add-finalizer"
        } else {
            "remove-finalizer"
        };
        let done = match target {
            Target::Unit(_) => version(
                Api::<NodeUnit>::all(self.client.clone())
                    .patch(&name, &params(), &patch)
                    .await,
            ),
            Target::Group(_) => version(
                Api::<NodeGroup>::all(self.client.clone())
                    .patch(&name, &params(), &patch)
                    .await,
            ),
        };
        self.count(done, verb, kind, &name)
    }

    /// Publishes a Warning event on a unit or group. A core/v1 Event in
    /// `default`: the one shape every supported API server accepts for a
    /// cluster-scoped object (kube-apiserver 1.20 refuses an events.k8s.io
    /// Event about one outside `kube-system`), and the one `kubectl describe`
    /// shows. Each is sent once per new condition, so no series is kept.
    async fn warn(&self, warning: &Warning, units: &[NodeUnit], groups: &[NodeGroup]) {
        let Some(found) = find(&warning.target, units, groups) else {
            return;
        };
        let reference = found.reference;
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = CoreEvent {
            metadata: kube::api::ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    reference.name.as_deref().unwrap_or("site"),
                    now.as_nanosecond()
                )),
                namespace: Some(EVENT_NAMESPACE.to_owned()),
                ..Default::default()
            },
            involved_object: reference,
            reason: Some(warning.reason.to_owned()),
            message: Some(warning.note.chars().take(1024).collect()),
            type_: Some("Warning".to_owned()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            source: Some(EventSource {
                component: Some(FIELD_MANAGER.to_owned()),
                host: None,
            }),
            reporting_component: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        let api = Api::<CoreEvent>::namespaced(self.client.clone(), EVENT_NAMESPACE);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => self.metrics.wrote("create", "Event"),
            Err(err) => tracing::warn!(%err, reason = warning.reason, "sites: publishing an event"),
        }
    }

    /// Counts a write that happened, remembering the version it made;
    /// logs one that failed.
    fn count(
        &self,
        done: Result<Option<String>, kube::Error>,
        verb: &str,
        kind: &'static str,
        name: &str,
    ) -> bool {
        match done {
            Ok(made) => {
                self.metrics.wrote(verb, kind);
                if let Some(made) = made {
                    let mut written = self.written.lock().expect("not poisoned");
                    written.insert((kind, name.to_owned()), made);
                }
                true
            }
            Err(err) => {
                tracing::warn!(%err, verb, kind, name, "sites: write failed; retried by the next pass");
                false
            }
        }
    }
}

/// A unit or group the controller sees.
struct Found<'a> {
    kind: &'static str,
    meta: &'a kube::api::ObjectMeta,
    /// For events about it.
    reference: ObjectReference,
}

/// The object `target` names, among those the pass read.
fn find<'a>(target: &Target, units: &'a [NodeUnit], groups: &'a [NodeGroup]) -> Option<Found<'a>> {
    fn found<'a, K: Resource<DynamicType = ()>>(kind: &'static str, obj: &'a K) -> Found<'a> {
        Found {
            kind,
            meta: obj.meta(),
            reference: obj.object_ref(&()),
        }
    }
    match target {
        Target::Unit(name) => units
            .iter()
            .find(|u| u.name_any() == *name)
            .map(|u| found("NodeUnit", u)),
        Target::Group(name) => groups
            .iter()
            .find(|g| g.name_any() == *name)
            .map(|g| found("NodeGroup", g)),
    }
}

/// A list for a status merge patch: `null` removes an empty one, as the
/// status reads when it is created without it.
fn list_or_null(names: &[String]) -> serde_json::Value {
    if names.is_empty() {
        serde_json::Value::Null
    } else {
        json!(names)
    }
}

/// The resourceVersion a write returned.
fn version<K: Resource>(done: Result<K, kube::Error>) -> Result<Option<String>, kube::Error> {
    done.map(|o| o.resource_version())
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}
