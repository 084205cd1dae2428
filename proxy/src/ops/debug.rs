//! `/debug/cache`: what the cache holds and how far behind each watch is.

use serde_json::{json, Value};

use super::watchers::WatcherSnapshot;
use crate::{cache::Cache, resource::ResourceKind};

/// The cache summary served at `/debug/cache`.
///
/// A watch's `lag` is its resource's newest resourceVersion minus the last one
/// the watch has dealt with (`null` until it has dealt with one, and for
/// resources the cache does not hold): 0 means caught up.
pub fn cache_summary(cache: &Cache, watchers: &[WatcherSnapshot]) -> Value {
    let resources: Vec<Value> = ResourceKind::ALL
        .into_iter()
        .map(|kind| {
            let store = cache.store(kind);
            let (objects, logged) = store.sizes();
            json!({
                "resource": kind.plural(),
                "objects": objects,
                "loggedEvents": logged,
                "lastResourceVersion": store.last_rv().to_string(),
                "synced": store.is_synced(),
            })
        })
        .collect();
    let watches: Vec<Value> = watchers
        .iter()
        .map(|w| {
            let last_rv = ResourceKind::ALL
                .into_iter()
                .find(|k| k.plural() == w.info.resource)
                .map(|k| cache.store(k).last_rv());
            let lag = match (last_rv, w.sent_rv) {
                (Some(last), Some(sent)) => Some(last.saturating_sub(sent)),
                _ => None,
            };
            json!({
                "id": w.id,
                "resource": w.info.resource,
                "namespace": w.info.namespace,
                "labelSelector": w.info.label_selector,
                "fieldSelector": w.info.field_selector,
                "lastSentResourceVersion": w.sent_rv.map(|rv| rv.to_string()),
                "lag": lag,
                "openSeconds": w.age.as_secs(),
            })
        })
        .collect();
    json!({
        // Strings, as Kubernetes spells resourceVersions (opaque to clients).
        "currentResourceVersion": cache.current_rv().to_string(),
        "startResourceVersion": cache.start_rv.to_string(),
        "synced": cache.is_synced(),
        "resources": resources,
        "watchers": watches,
    })
}
