//! Upstream reflectors: exactly one list+watch per cached kind.
//!
//! kube-runtime's watcher is the state machine: paginated LIST (500 per
//! page), WATCH with bookmarks from the list's resourceVersion, resume from
//! the last seen version after a dropped connection, and a relist on 410 Gone
//! announced as `Init … InitApply … InitDone`, which the projector buffers and
//! swaps in atomically.

use futures::StreamExt;
use kube::{
    core::ApiResource,
    runtime::{watcher, WatchStreamExt},
    Api, Client,
};
use tokio::{sync::mpsc, task::JoinHandle};
use tracing::{debug, warn};

use std::sync::Arc;

use crate::{
    cache::UpstreamEvent,
    object::UpstreamObject,
    ops::Metrics,
    resource::{ApiVersion, ResourceKind},
};

/// Which EndpointSlice version the upstream serves: `v1` when it has it,
/// else `v1beta1` (Kubernetes 1.20).
pub async fn discover_slice_version(client: &Client) -> Result<ApiVersion, kube::Error> {
    let groups = client.list_api_groups().await?;
    let has_v1 = groups
        .groups
        .iter()
        .filter(|g| g.name == "discovery.k8s.io")
        .flat_map(|g| g.versions.iter())
        .any(|v| v.version == "v1");
    Ok(if has_v1 {
        ApiVersion::V1
    } else {
        ApiVersion::V1beta1
    })
}

/// The API resource the reflector for `kind` watches.
pub fn api_resource(kind: ResourceKind, slice_version: ApiVersion) -> ApiResource {
    let version = match kind {
        ResourceKind::EndpointSlices => slice_version.as_str(),
        _ => "v1",
    };
    let group = kind.group();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.kind().into(),
        plural: kind.plural().into(),
    }
}

/// Starts one reflector per kind, each feeding `tx`.
pub fn spawn_all(
    client: &Client,
    slice_version: ApiVersion,
    tx: mpsc::Sender<UpstreamEvent>,
    metrics: Arc<Metrics>,
) -> Vec<JoinHandle<()>> {
    ResourceKind::ALL
        .into_iter()
        .map(|kind| {
            tokio::spawn(reflect(
                client.clone(),
                kind,
                api_resource(kind, slice_version),
                tx.clone(),
                metrics.clone(),
            ))
        })
        .collect()
}

async fn reflect(
    client: Client,
    kind: ResourceKind,
    ar: ApiResource,
    tx: mpsc::Sender<UpstreamEvent>,
    metrics: Arc<Metrics>,
) {
    let api: Api<UpstreamObject> = Api::all_with(client, &ar);
    let config = watcher::Config::default().page_size(500);
    let mut events = watcher(api, config).default_backoff().boxed();
    while let Some(item) = events.next().await {
        match item {
            Ok(event) => {
                if tx.send((kind, event)).await.is_err() {
                    debug!(resource = %kind, "projector gone; reflector stops");
                    return;
                }
            }
            // The backoff stream retries by itself; the cache keeps serving meanwhile.
            Err(err) => {
                metrics.upstream_error(kind.plural());
                warn!(resource = %kind, error = %err, "upstream list/watch failed; retrying")
            }
        }
    }
}
