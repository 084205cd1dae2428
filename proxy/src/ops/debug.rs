//! `/debug/cache`: what the cache holds and how far behind each watch is.

use serde_json::{json, Value};

use sitegrid_cache::{Cache, ResourceKind};

/// The cache summary served at `/debug/cache`.
///
/// A watch's `lag` is its resource's newest resourceVersion minus the last one
/// the watch has dealt with (`null` until it has dealt with one): 0 means
/// caught up.
pub fn cache_summary(cache: &Cache) -> Value {
    let resources: Vec<Value> = ResourceKind::ALL
        .into_iter()
        .map(|kind| {
            let store = cache.store(kind);
            let sizes = store.sizes();
            json!({
                "resource": kind.plural(),
                "objects": sizes.objects,
                "loggedEvents": sizes.log_events,
                "loggedBytes": sizes.log_bytes,
                "lastResourceVersion": store.last_rv().to_string(),
                "synced": cache.readiness().is_served(kind),
            })
        })
        .collect();
    let watches: Vec<Value> = cache
        .watchers()
        .snapshot()
        .iter()
        .map(|w| {
            let last_rv = cache.store(w.info.resource).last_rv();
            json!({
                "id": w.id,
                "resource": w.info.resource.plural(),
                "namespace": w.info.namespace,
                "labelSelector": w.info.label_selector,
                "fieldSelector": w.info.field_selector,
                "lastSentResourceVersion": w.sent_rv.map(|rv| rv.to_string()),
                "lag": w.sent_rv.map(|sent| last_rv.saturating_sub(sent)),
                "openSeconds": w.age.as_secs(),
            })
        })
        .collect();
    json!({
        // Strings, as Kubernetes spells resourceVersions (opaque to clients).
        "currentResourceVersion": cache.current_rv().to_string(),
        "startResourceVersion": cache.start_rv().to_string(),
        "synced": cache.readiness().is_ready(),
        "resources": resources,
        // The node scopes the Nodes store holds: label key → the values
        // whose nodes are watched (`key in (values)`), once listed.
        "nodeScopes": cache.node_scopes(),
        "watchers": watches,
    })
}
