//! Managed-cluster side: pull the copies from the dedicated namespace in the
//! control cluster, keep one local grid per copy while a local node carries
//! its `gridUniqKey`, report the local status back, renew the heartbeat.
//!
//! Nothing local is deleted because the control cluster cannot be reached:
//! a local grid goes only when its copy is seen terminating or is absent
//! from a complete list of the dedicated namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{future, FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};
use sitegrid_api::keys::{GridUniqKey, SiteName};
use sitegrid_api::{DeploymentGrid, ServiceGrid, StatefulSetGrid};
use tokio::sync::watch;

use super::object;
use super::parent::Parent;
use super::{local_labels, Role, HEARTBEAT_LEASE, TARGET_NAMESPACE_LABEL};
use crate::metrics::Metrics;
use crate::shared::retry::RETRY_AFTER;
use crate::shared::trigger::{on_change, TriggerBackoff};
use crate::shared::{Error, GridKind, FIELD_MANAGER};

/// Managed-cluster settings.
#[derive(Clone, Debug)]
pub struct ManagedOptions {
    /// `namespace/name` of the parent Secret.
    pub secret: (String, String),
    /// How often the heartbeat is renewed and orphans are looked for.
    pub heartbeat: Duration,
    /// Copies reconciled at once, per kind.
    pub concurrency: u16,
    /// This controller's identity (the heartbeat's holder).
    pub identity: String,
}

/// What the managed reconcilers share.
struct Session {
    local: Client,
    parent: Client,
    namespace: String,
    nodes: Store<PartialObjectMeta<Node>>,
    metrics: Arc<Metrics>,
}

/// Watches the parent Secret and runs a session for as long as it is valid;
/// a changed Secret restarts the session, a removed one ends it (local grids
/// stay: removing clusternet's credentials is not a request to delete
/// workloads).
pub async fn run(
    local: Client,
    options: ManagedOptions,
    nodes: Store<PartialObjectMeta<Node>>,
    sites: watch::Receiver<u64>,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + Clone + 'static,
) {
    let (ns, name) = options.secret.clone();
    let secrets = watcher(
        Api::<Secret>::namespaced(local.clone(), &ns),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .applied_objects();
    let mut secrets = std::pin::pin!(secrets.take_until(stop.clone()));
    let mut current: Option<(Parent, tokio::task::JoinHandle<()>)> = None;
    let mut last_error = None;
    while let Some(event) = secrets.next().await {
        let parent = match event {
            Ok(secret) if secret.metadata.deletion_timestamp.is_none() => {
                Parent::from_secret(&secret).map_err(|e| e.to_string())
            }
            Ok(_) => continue,
            Err(err) => {
                let err = err.to_string();
                if last_error.as_ref() != Some(&err) {
                    tracing::warn!(%err, secret = %format!("{ns}/{name}"), "cannot watch the parent-cluster Secret; multi-cluster (managed) mode waits");
                    last_error = Some(err);
                }
                continue;
            }
        };
        let parent = match parent {
            Ok(parent) => parent,
            Err(err) => {
                tracing::warn!(%err, "parent-cluster Secret unusable");
                continue;
            }
        };
        if current.as_ref().is_some_and(|(p, _)| *p == parent) {
            continue;
        }
        let client = match parent.client().await {
            Ok(client) => client,
            Err(err) => {
                tracing::warn!(%err, ?parent, "parent-cluster Secret unusable");
                continue;
            }
        };
        if let Some((_, task)) = current.take() {
            task.abort();
        }
        tracing::info!(url = %parent.url, namespace = %parent.namespace, "managed cluster: following the control cluster");
        let session = Arc::new(Session {
            local: local.clone(),
            parent: client,
            namespace: parent.namespace.clone(),
            nodes: nodes.clone(),
            metrics: metrics.clone(),
        });
        let task = tokio::spawn(run_session(session, options.clone(), sites.clone()));
        current = Some((parent, task));
    }
    if let Some((_, task)) = current {
        task.abort();
    }
}

async fn run_session(session: Arc<Session>, options: ManagedOptions, sites: watch::Receiver<u64>) {
    let deployments = Pulled::<DeploymentGrid>::start(&session, &options, sites.clone());
    let statefulsets = Pulled::<StatefulSetGrid>::start(&session, &options, sites.clone());
    let services = Pulled::<ServiceGrid>::start(&session, &options, sites);
    let mut tick = tokio::time::interval(options.heartbeat);
    let mut healthy = true;
    loop {
        tick.tick().await;
        let beat = heartbeat(&session, &options.identity).await;
        match (&beat, healthy) {
            (Err(err), true) => tracing::warn!(%err, "heartbeat to the control cluster failed"),
            (Ok(()), false) => tracing::info!("heartbeat to the control cluster works again"),
            _ => {}
        }
        healthy = beat.is_ok();
        deployments.sweep(&session).await;
        statefulsets.sweep(&session).await;
        services.sweep(&session).await;
    }
}

/// Renews the Lease in the dedicated namespace, but only while this
/// cluster's own API server answers: a cluster whose control plane is down
/// must look unreachable.
async fn heartbeat(session: &Session, identity: &str) -> Result<(), kube::Error> {
    session.local.apiserver_version().await?;
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(session.parent.clone(), &session.namespace);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": HEARTBEAT_LEASE},
        "spec": {"holderIdentity": identity, "renewTime": now},
    });
    api.patch(
        HEARTBEAT_LEASE,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&lease),
    )
    .await?;
    session.metrics.wrote("apply", "Lease");
    Ok(())
}

/// One grid kind pulled from the control cluster; its tasks end with it
/// (a changed Secret drops the session and everything it started).
struct Pulled<K: GridKind> {
    copies: Store<K>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl<K: GridKind> Drop for Pulled<K> {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl<K: GridKind> Pulled<K> {
    fn start(
        session: &Arc<Session>,
        options: &ManagedOptions,
        sites: watch::Receiver<u64>,
    ) -> Self {
        let parent_ns = session.namespace.clone();
        let controller = Controller::new(
            Api::<K>::namespaced(session.parent.clone(), &session.namespace),
            watcher::Config::default(),
        )
        .with_config(controller::Config::default().concurrency(options.concurrency))
        .trigger_backoff(TriggerBackoff::default())
        .watches(
            Api::<K>::all(session.local.clone()),
            watcher::Config::default().labels(TARGET_NAMESPACE_LABEL),
            move |local: K| Some(ObjectRef::new(&local.name_any()).within(&parent_ns)),
        )
        .reconcile_all_on(on_change(sites));
        let copies = controller.store();
        let run = tokio::spawn(controller.run(pull::<K>, retry, session.clone()).for_each(
            |result| {
                if let Err(err) = result {
                    tracing::debug!(%err, "managed controller");
                }
                future::ready(())
            },
        ));
        Self {
            copies,
            tasks: vec![run],
        }
    }

    /// Deletes local grids whose copy is no longer in the dedicated namespace
    /// (only once that namespace has been listed completely).
    async fn sweep(&self, session: &Session) {
        // Polled, not awaited: kube-runtime's readiness wakes only its
        // latest waiter (the controller's own), but a completed first list
        // is visible to any poll.
        if !matches!(self.copies.wait_until_ready().now_or_never(), Some(Ok(()))) {
            return;
        }
        let api: Api<K> = Api::all(session.local.clone());
        let locals = match api
            .list(&ListParams::default().labels(TARGET_NAMESPACE_LABEL))
            .await
        {
            Ok(list) => list.items,
            Err(err) => {
                tracing::debug!(%err, "listing local grids");
                return;
            }
        };
        let copies: BTreeSet<(String, String)> = self
            .copies
            .state()
            .iter()
            .filter_map(|c| match Role::of(c.meta().labels.as_ref()) {
                Role::Copy { target_namespace } => Some((target_namespace, c.name_any())),
                _ => None,
            })
            .collect();
        for grid in locals {
            let Role::Local { target_namespace } = Role::of(grid.meta().labels.as_ref()) else {
                continue;
            };
            if grid.namespace().as_deref() != Some(target_namespace.as_str())
                || copies.contains(&(target_namespace.clone(), grid.name_any()))
            {
                continue;
            }
            tracing::info!(kind = %K::kind(&()), namespace = %target_namespace, grid = %grid.name_any(), "its original is gone from the control cluster; deleting the local grid");
            if let Err(err) = delete_local::<K>(session, &target_namespace, &grid.name_any()).await
            {
                tracing::warn!(%err, "deleting a local grid");
            }
        }
    }
}

/// Reconciles one copy: the local grid follows it.
async fn pull<K: GridKind>(copy: Arc<K>, session: Arc<Session>) -> Result<Action, Error> {
    let Role::Copy { target_namespace } = Role::of(copy.meta().labels.as_ref()) else {
        return Ok(Action::await_change());
    };
    let name = copy.name_any();
    let local_api: Api<K> = Api::namespaced(session.local.clone(), &target_namespace);
    let local = local_api.get_opt(&name).await?;
    let ours = local
        .as_ref()
        .is_some_and(|l| matches!(Role::of(l.meta().labels.as_ref()), Role::Local { .. }));
    if local.is_some() && !ours {
        tracing::warn!(kind = %K::kind(&()), namespace = %target_namespace, grid = %name, "a local grid of that name exists and was not made from the control cluster; left alone");
        return Ok(Action::await_change());
    }
    if copy.meta().deletion_timestamp.is_some() {
        if local.is_some() {
            delete_local::<K>(&session, &target_namespace, &name).await?;
        }
        return Ok(Action::await_change());
    }
    let copy_json = serde_json::to_value(&*copy)?;
    let spec = copy_json.get("spec").cloned().unwrap_or(Value::Null);
    let nodes = session.nodes.state();
    let sites = local_sites(&spec, nodes.iter().map(|n| n.metadata.labels.as_ref()));
    let hosted = !sites.is_empty();

    let local = match (hosted, local) {
        (true, Some(local)) => Some(update_local(&session, &local_api, &copy, local, &spec).await?),
        (true, None) => {
            Some(create_local(&session, &local_api, &copy, &target_namespace, &spec).await?)
        }
        (false, Some(_)) => {
            tracing::info!(kind = %K::kind(&()), namespace = %target_namespace, grid = %name, "no local node has the grid's gridUniqKey; deleting the local grid");
            delete_local::<K>(&session, &target_namespace, &name).await?;
            None
        }
        (false, None) => None,
    };

    // Report: the local grid's status as it is (empty without one).
    let reported = match &local {
        Some(local) => serde_json::to_value(local)?
            .get("status")
            .cloned()
            .unwrap_or_else(|| json!({})),
        None => json!({}),
    };
    let current = copy_json
        .get("status")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if current != reported {
        // The whole status replaced (PUT /status, guarded by the copy's
        // resourceVersion): a merge patch would keep fields the local grid no
        // longer reports inside a site's state.
        let mut body = copy_json;
        body["status"] = reported;
        let body: K = serde_json::from_value(body)?;
        let api: Api<K> = Api::namespaced(session.parent.clone(), &session.namespace);
        match api
            .replace_status(&name, &PostParams::default(), &body)
            .await
        {
            Ok(_) => session.metrics.wrote("update-status", &K::kind(&())),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(Action::await_change())
}

/// The sites this cluster has for a copy's spec: the distinct non-empty
/// values of its `gridUniqKey` on local nodes. The local grid exists while
/// there is at least one, and renders exactly these (as any grid does).
pub fn local_sites<'a>(
    spec: &Value,
    nodes: impl IntoIterator<Item = Option<&'a std::collections::BTreeMap<String, String>>>,
) -> BTreeSet<SiteName> {
    match spec.get("gridUniqKey").and_then(Value::as_str) {
        Some(key) if !key.is_empty() => {
            crate::grid_sites::sites_of(&GridUniqKey(key.to_owned()), nodes)
        }
        _ => BTreeSet::new(),
    }
}

async fn create_local<K: GridKind>(
    session: &Session,
    api: &Api<K>,
    copy: &K,
    namespace: &str,
    spec: &Value,
) -> Result<K, Error> {
    ensure_namespace(session, namespace).await?;
    let labels = local_labels(copy.meta().labels.as_ref());
    let grid: K = object::new_grid(&copy.name_any(), namespace, &labels, &BTreeMap::new(), spec)?;
    let created = api.create(&PostParams::default(), &grid).await?;
    session.metrics.wrote("create", &K::kind(&()));
    tracing::info!(kind = %K::kind(&()), %namespace, grid = %copy.name_any(), "created the local grid from the control cluster");
    Ok(created)
}

async fn update_local<K: GridKind>(
    session: &Session,
    api: &Api<K>,
    copy: &K,
    local: K,
    spec: &Value,
) -> Result<K, Error> {
    let labels = local_labels(copy.meta().labels.as_ref());
    let Some(replaced) = object::respecced(&local, spec, &labels, &BTreeMap::new())? else {
        return Ok(local);
    };
    let updated = api
        .replace(&local.name_any(), &PostParams::default(), &replaced)
        .await?;
    session.metrics.wrote("update", &K::kind(&()));
    tracing::info!(kind = %K::kind(&()), namespace = %local.namespace().unwrap_or_default(), grid = %local.name_any(), "local grid set to the control cluster's spec");
    Ok(updated)
}

async fn delete_local<K: GridKind>(
    session: &Session,
    namespace: &str,
    name: &str,
) -> Result<(), Error> {
    object::delete_grid::<K>(&session.local, &session.metrics, namespace, name).await?;
    Ok(())
}

/// The target namespace exists in the control cluster; here it may not yet.
async fn ensure_namespace(session: &Session, name: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(session.local.clone());
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {
            session.metrics.wrote("create", "Namespace");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(err) => Err(err.into()),
    }
}

fn retry<K: GridKind>(copy: Arc<K>, error: &Error, session: Arc<Session>) -> Action {
    session.metrics.failed(&K::kind(&()));
    tracing::warn!(kind = %K::kind(&()), grid = %copy.name_any(), %error, "pulling from the control cluster failed; retrying");
    Action::requeue(RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::fixtures::labels as node;

    fn sites(spec: &Value, nodes: &[BTreeMap<String, String>]) -> Vec<String> {
        local_sites(spec, nodes.iter().map(Some))
            .into_iter()
            .map(|u| u.0)
            .collect()
    }

    /// The seed's example: cluster A has a `zone: zone1` node, B none until
    /// one of its nodes is labelled `zone: zone2`.
    #[test]
    fn a_managed_cluster_creates_only_the_sites_its_nodes_have() {
        let spec =
            json!({"gridUniqKey": "zone", "templates": {"zone1": "test1", "zone2": "test2"}});
        let a = [
            node(&[("zone", "zone1")]),
            node(&[("kubernetes.io/hostname", "a-2")]),
        ];
        let mut b = vec![node(&[("kubernetes.io/hostname", "b-1")])];
        assert_eq!(sites(&spec, &a), ["zone1"]);
        assert!(
            sites(&spec, &b).is_empty(),
            "B hosts nothing: no local grid"
        );
        b[0].insert("zone".into(), "zone2".into());
        assert_eq!(sites(&spec, &b), ["zone2"]);
        // A site named in `templates` that no local node has is not created here.
        assert!(!sites(&spec, &a).contains(&"zone2".to_owned()));
    }

    #[test]
    fn an_empty_label_value_or_key_hosts_nothing() {
        let spec = json!({"gridUniqKey": "zone"});
        assert!(sites(&spec, &[node(&[("zone", "")])]).is_empty());
        let no_key = json!({"gridUniqKey": ""});
        assert!(sites(&no_key, &[node(&[("zone", "zone1")])]).is_empty());
        assert!(sites(&json!({}), &[node(&[("zone", "zone1")])]).is_empty());
    }
}
