//! The reconcilers: apply each grid's rendered children, delete the ones of
//! sites that went away, and report status and events.
//!
//! Every write is a server-side apply under [`FIELD_MANAGER`] (children, grid
//! status), skipped when the live object already matches (see
//! [`crate::drift`]), so a resync that finds nothing to do writes nothing.

mod service;
mod workload;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use sitegrid_api::keys::{GridUniqKey, SiteName};

pub use service::reconcile_service;
pub use workload::{reconcile_workload, WorkloadGridKind};

use crate::drift;
use crate::fed::fleet::Fleet;
use crate::fed::Role;
use crate::metrics::Metrics;
use crate::shared::retry::retry_after;
use crate::shared::time::now;
use crate::shared::{Error, GridKind, FIELD_MANAGER};

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// A metadata-only reflector of all nodes.
    pub nodes: Store<PartialObjectMeta<Node>>,
    /// Publishes events on grids.
    pub recorder: Recorder,
    /// Counters and gauges.
    pub metrics: Arc<Metrics>,
    /// How often a grid is reconciled when nothing triggers it.
    pub resync: Duration,
    /// The resourceVersion of each grid when its last reconcile started
    /// (kind/namespace/name → version), for the queue-depth gauge.
    pub reconciled_versions: Mutex<HashMap<String, String>>,
    /// The managed clusters, for grids distributed from this cluster.
    pub fleet: Arc<Fleet>,
    /// Consecutive failed reconciles of each grid (same keys as
    /// [`Self::reconciled_versions`]), for the retry backoff; absent after a success.
    pub failure_counts: Mutex<HashMap<String, u32>>,
}

impl Context {
    /// The grid's sites, from the nodes' labels.
    pub fn sites(&self, key: &GridUniqKey) -> BTreeSet<SiteName> {
        let nodes = self.nodes.state();
        crate::grid_sites::sites_of(key, nodes.iter().map(|n| n.metadata.labels.as_ref()))
    }

    /// Key under which [`Self::reconciled_versions`] and the metrics know a grid.
    pub fn grid_key<K: Resource<DynamicType = ()>>(grid: &K) -> String {
        format!(
            "{}/{}/{}",
            K::kind(&()),
            grid.meta().namespace.as_deref().unwrap_or_default(),
            grid.meta().name.as_deref().unwrap_or_default()
        )
    }

    /// Passes a reconcile's result on; a success forgets the grid's
    /// failures, so that its next failure is retried soon again.
    fn settle<K: Resource<DynamicType = ()>>(
        &self,
        grid: &K,
        result: Result<Action, Error>,
    ) -> Result<Action, Error> {
        if result.is_ok() {
            self.failure_counts.lock().remove(&Self::grid_key(grid));
        }
        result
    }

    fn note_reconcile<K: Resource<DynamicType = ()>>(&self, grid: &K) {
        self.metrics.reconciled(&K::kind(&()));
        let version = grid.meta().resource_version.clone().unwrap_or_default();
        self.reconciled_versions
            .lock()
            .insert(Self::grid_key(grid), version);
    }

    /// Applies `desired` unless `live` already matches it; returns the object
    /// as the API server now has it.
    async fn apply_child<C>(&self, api: &Api<C>, desired: &C, live: Option<&C>) -> Result<C, Error>
    where
        C: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Serialize
            + DeserializeOwned
            + Debug,
    {
        let mut desired = serde_json::to_value(desired)?;
        drift::fill_port_protocols(&mut desired);
        drift::stamp(&mut desired);
        if let Some(live) = live {
            if drift::up_to_date(&desired, &serde_json::to_value(live)?) {
                return Ok(live.clone());
            }
        }
        let name = desired
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let applied = api.patch(&name, &params, &Patch::Apply(&desired)).await?;
        self.metrics.wrote("apply", &C::kind(&()));
        Ok(applied)
    }

    /// Server-side applies `status` as the grid's whole status, unless it is unchanged.
    async fn apply_status<K>(
        &self,
        grid: &K,
        previous: Option<&Value>,
        status: Value,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        if previous == Some(&status) {
            return Ok(());
        }
        let api: Api<K> =
            Api::namespaced(self.client.clone(), &grid.namespace().unwrap_or_default());
        let body = serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "status": status,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api
            .patch_status(&grid.name_any(), &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => {}
            // A grid deleted meanwhile is NotFound by name; a path the API
            // server does not serve at all is this generic message.
            Err(kube::Error::Api(status))
                if status.code == 404
                    && status
                        .message
                        .contains("could not find the requested resource") =>
            {
                return Err(Error::NoStatusSubresource {
                    crd: format!("{}.{}", K::plural(&()), K::group(&())),
                });
            }
            Err(err) => return Err(err.into()),
        }
        self.metrics.wrote("apply-status", &K::kind(&()));
        Ok(())
    }

    /// A copy waiting in a dedicated namespace (never rendered where it
    /// lies: its status is its managed cluster's to write) or a grid being
    /// deleted (its copies go first, then the finalizer; garbage collection
    /// removes its children) needs nothing more: the action to return.
    async fn copy_or_deleted<K: GridKind>(&self, grid: &K) -> Result<Option<Action>, Error> {
        if matches!(Role::of(grid.meta().labels.as_ref()), Role::Copy { .. }) {
            return Ok(Some(Action::await_change()));
        }
        if grid.meta().deletion_timestamp.is_none() {
            return Ok(None);
        }
        self.distribute(grid, None, None, &now()).await?;
        Ok(Some(Action::await_change()))
    }

    /// See [`crate::fed::distribute::distribute`].
    async fn distribute<K: GridKind>(
        &self,
        grid: &K,
        local: Option<&Value>,
        previous: Option<&Value>,
        now: &str,
    ) -> Result<Option<Value>, Error> {
        crate::fed::distribute::distribute(
            grid,
            &self.client,
            &self.fleet,
            &self.metrics,
            local,
            previous,
            now,
        )
        .await
    }

    /// Publishes a Warning event on `grid`.
    async fn warn<K: Resource<DynamicType = ()>>(&self, grid: &K, reason: &str, note: String) {
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        match self.recorder.publish(&event, &grid.object_ref(&())).await {
            Ok(()) => self.metrics.wrote("create", "Event"),
            Err(err) => tracing::warn!(%err, reason, "publishing an event"),
        }
    }
}

/// Whether `child` is controlled by the object with `uid`.
fn controlled_by<C: Resource>(child: &C, uid: &str) -> bool {
    child
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The error policy of every controller: count, log, retry later, waiting
/// longer each time the same grid fails again ([`retry_after`]).
pub fn error_policy<K: Resource<DynamicType = ()>>(
    grid: Arc<K>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    ctx.metrics.failed(&K::kind(&()));
    let failures = {
        let mut all = ctx.failure_counts.lock();
        let count = all.entry(Context::grid_key(&*grid)).or_default();
        *count = count.saturating_add(1);
        *count
    };
    let wait = retry_after(failures);
    tracing::warn!(kind = %K::kind(&()), grid = %grid.name_any(), namespace = %grid.namespace().unwrap_or_default(), %error, failures, retry_in = ?wait, "reconcile failed; retrying");
    Action::requeue(wait)
}
