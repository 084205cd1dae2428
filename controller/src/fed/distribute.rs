//! Control-cluster side, per original grid: a copy in the dedicated
//! namespace of each managed cluster of the [`Fleet`], kept to the
//! original's spec, and the original's status aggregated from what the
//! copies report ([`super::aggregate`]). An original being deleted, or no
//! longer labelled for distribution, loses its copies, then its finalizer.

use std::collections::BTreeMap;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use super::aggregate::{self, ClusterReport};
use super::fleet::{Fleet, ManagedCluster};
use super::object;
use super::{
    copy_labels, Role, DIS_LABEL, FINALIZER, LOCAL_CLUSTER, ORIGINAL_UID_ANNOTATION,
    TARGET_NAMESPACE_LABEL, YES,
};
use crate::metrics::Metrics;
use crate::shared::{finalizers_with, Error, GridKind};

/// Maps a copy (as the control cluster's watch sees it) to its original.
pub fn original_of<K: GridKind>(copy: &K) -> Option<ObjectRef<K>> {
    match Role::of(copy.meta().labels.as_ref()) {
        Role::Copy { target_namespace } => {
            Some(ObjectRef::new(&copy.name_any()).within(&target_namespace))
        }
        _ => None,
    }
}

/// The watcher config that sees only copies.
pub fn copies_config() -> watcher::Config {
    watcher::Config::default().labels(&format!("{DIS_LABEL}={YES}"))
}

/// Distributes an original and returns its status: `local` (what this
/// cluster rendered itself, `None` for a ServiceGrid) aggregated with what
/// each managed cluster reported. Also the clean-up paths: an original being
/// deleted, or no longer labelled for distribution, loses its copies and
/// then the finalizer. Returns `Ok(None)` when the grid is gone or going.
pub async fn distribute<K: GridKind>(
    grid: &K,
    client: &Client,
    fleet: &Fleet,
    metrics: &Metrics,
    local: Option<&Value>,
    previous: Option<&Value>,
    now: &str,
) -> Result<Option<Value>, Error> {
    let original = Role::of(grid.meta().labels.as_ref()) == Role::Original;
    let has_finalizer = grid.finalizers().iter().any(|f| f == FINALIZER);
    if grid.meta().deletion_timestamp.is_some() || !original {
        if has_finalizer {
            withdraw(grid, client, metrics).await?;
        }
        return Ok(None);
    }
    if !has_finalizer {
        set_finalizer(grid, client, metrics, true).await?;
    }
    let Some(clusters) = fleet.clusters() else {
        // Not listed yet: touch no copy (the fleet's first list triggers
        // every grid again).
        return Ok(None);
    };
    let (namespace, name) = (grid.namespace().unwrap_or_default(), grid.name_any());
    let mut copies = list_copies::<K>(client, &namespace, &name).await?;
    let desired = CopySpec::of(grid)?;
    let mut reports: Vec<ClusterReport> = local_report(local).into_iter().collect();
    for cluster in &clusters {
        let existing = copies.remove(&cluster.namespace);
        let report = sync_copy(grid, client, metrics, cluster, existing, &desired).await?;
        reports.push(report);
    }
    // Copies left are in namespaces that are no longer a cluster's.
    for (ns, _) in copies {
        delete_copy::<K>(client, metrics, &ns, &name).await?;
    }
    Ok(Some(aggregate::workload_status(&reports, previous, now)))
}

/// What every copy of one original carries.
struct CopySpec {
    /// The original's whole spec.
    spec: Value,
    /// The original's labels plus the two distribution labels.
    labels: BTreeMap<String, String>,
    /// The original's uid ([`ORIGINAL_UID_ANNOTATION`]).
    annotations: BTreeMap<String, String>,
}

impl CopySpec {
    fn of<K: GridKind>(original: &K) -> Result<Self, Error> {
        let namespace = original.namespace().unwrap_or_default();
        let spec = serde_json::to_value(original)?
            .get("spec")
            .cloned()
            .unwrap_or(Value::Null);
        let uid = original.uid().unwrap_or_default();
        Ok(Self {
            spec,
            labels: copy_labels(original.meta().labels.as_ref(), &namespace),
            annotations: BTreeMap::from([(ORIGINAL_UID_ANNOTATION.to_owned(), uid)]),
        })
    }
}

/// This cluster's own sites, as cluster [`LOCAL_CLUSTER`], if it has any.
fn local_report(local: Option<&Value>) -> Option<ClusterReport> {
    let states = local?.get("states")?.as_object()?;
    (!states.is_empty()).then(|| ClusterReport {
        name: LOCAL_CLUSTER.into(),
        states: states.clone(),
        reachable: true,
        ..ClusterReport::default()
    })
}

/// Creates or updates the copy in `cluster`'s dedicated namespace; what the
/// cluster reported on it, with what went wrong writing it, if anything.
async fn sync_copy<K: GridKind>(
    grid: &K,
    client: &Client,
    metrics: &Metrics,
    cluster: &ManagedCluster,
    existing: Option<K>,
    desired: &CopySpec,
) -> Result<ClusterReport, Error> {
    let api: Api<K> = Api::namespaced(client.clone(), &cluster.namespace);
    let mut report = ClusterReport {
        name: cluster.name.clone(),
        reachable: cluster.reachable,
        last_report: (!cluster.reachable)
            .then(|| cluster.last_report.clone())
            .flatten(),
        ..ClusterReport::default()
    };
    let outcome = match &existing {
        Some(copy) => {
            if let Some(states) = serde_json::to_value(copy)?
                .pointer("/status/states")
                .and_then(Value::as_object)
            {
                report.states = states.clone();
            }
            update_copy(&api, metrics, copy, desired).await
        }
        None => create_copy(&api, metrics, grid, &cluster.namespace, desired).await,
    };
    if let Err(message) = outcome {
        let (name, namespace) = (grid.name_any(), grid.namespace().unwrap_or_default());
        tracing::warn!(grid = %name, %namespace, cluster = %cluster.name, "{message}");
        report.message = Some(message);
    }
    Ok(report)
}

/// Creates the copy in `namespace`, unless the slot holds another
/// namespace's grid of the same name.
async fn create_copy<K: GridKind>(
    api: &Api<K>,
    metrics: &Metrics,
    grid: &K,
    namespace: &str,
    desired: &CopySpec,
) -> Result<(), String> {
    let name = grid.name_any();
    match api.get_opt(&name).await {
        Ok(Some(other)) => {
            return Err(format!(
                "{namespace}/{name} there belongs to {} (same grid name in two namespaces); not distributed to this cluster",
                match Role::of(other.meta().labels.as_ref()) {
                    Role::Copy { target_namespace } => format!("namespace {target_namespace}"),
                    _ => "a grid that is not a copy".to_owned(),
                }
            ))
        }
        Ok(None) => {}
        Err(err) => return Err(err.to_string()),
    }
    let copy: K = object::new_grid(
        &name,
        namespace,
        &desired.labels,
        &desired.annotations,
        &desired.spec,
    )
    .map_err(|e| e.to_string())?;
    match api.create(&PostParams::default(), &copy).await {
        Ok(_) => {
            metrics.wrote("create", &K::kind(&()));
            tracing::info!(grid = %name, %namespace, "distributed a copy");
            Ok(())
        }
        // Created meanwhile: the next reconcile compares it.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(err) => Err(format!("creating the copy in {namespace}: {err}")),
    }
}

async fn update_copy<K: GridKind>(
    api: &Api<K>,
    metrics: &Metrics,
    copy: &K,
    desired: &CopySpec,
) -> Result<(), String> {
    let replaced = object::respecced(copy, &desired.spec, &desired.labels, &desired.annotations)
        .map_err(|e| e.to_string())?;
    let Some(replaced) = replaced else {
        return Ok(());
    };
    match api
        .replace(&copy.name_any(), &PostParams::default(), &replaced)
        .await
    {
        Ok(_) => {
            metrics.wrote("update", &K::kind(&()));
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(err) => Err(format!(
            "updating the copy in {}: {err}",
            copy.namespace().unwrap_or_default()
        )),
    }
}

/// The copies of the original `namespace/name`, by the dedicated namespace
/// they are in.
async fn list_copies<K: GridKind>(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, K>, Error> {
    let all: Api<K> = Api::all(client.clone());
    let selector = format!("{DIS_LABEL}={YES},{TARGET_NAMESPACE_LABEL}={namespace}");
    Ok(all
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|c| c.name_any() == name)
        .filter_map(|c| Some((c.namespace()?, c)))
        .collect())
}

/// Deletes every copy of `grid`, then removes its finalizer.
async fn withdraw<K: GridKind>(grid: &K, client: &Client, metrics: &Metrics) -> Result<(), Error> {
    let (namespace, name) = (grid.namespace().unwrap_or_default(), grid.name_any());
    for (ns, _) in list_copies::<K>(client, &namespace, &name).await? {
        delete_copy::<K>(client, metrics, &ns, &name).await?;
    }
    set_finalizer(grid, client, metrics, false).await
}

async fn delete_copy<K: GridKind>(
    client: &Client,
    metrics: &Metrics,
    namespace: &str,
    name: &str,
) -> Result<(), Error> {
    if object::delete_grid::<K>(client, metrics, namespace, name).await? {
        tracing::info!(grid = %name, %namespace, "deleted a copy");
    }
    Ok(())
}

/// Adds or removes [`FINALIZER`], guarded by the grid's resourceVersion so a
/// concurrent change of the list is never overwritten (a conflict is retried
/// by the next reconcile, which that change triggers).
async fn set_finalizer<K: GridKind>(
    grid: &K,
    client: &Client,
    metrics: &Metrics,
    present: bool,
) -> Result<(), Error> {
    let finalizers = finalizers_with(grid.finalizers(), FINALIZER, present);
    let patch = json!({
        "metadata": {
            "resourceVersion": grid.meta().resource_version,
            "finalizers": finalizers,
        }
    });
    let api: Api<K> = Api::namespaced(client.clone(), &grid.namespace().unwrap_or_default());
    match api
        .patch(
            &grid.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            metrics.wrote("patch", &K::kind(&()));
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(err) => Err(err.into()),
    }
}
