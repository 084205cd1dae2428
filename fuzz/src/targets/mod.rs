//! The targets, grouped by where their bytes come from.

mod files;
mod node_cache;
mod request;
mod serve;
mod snapshot;
mod upstream;

pub use files::{certs, kubeconfig};
pub use node_cache::{node_cache_file, pod_status};
pub use request::{accept, api_path, continue_token, field_selector, label_selector, query};
pub use serve::serve;
pub use snapshot::snapshot;
pub use upstream::{projector, protobuf, protobuf_answer, watch_frames};

/// Every view the cache serves, encoded as each EndpointSlice version would
/// serve it, in JSON and protobuf (what a client could ask for).
fn encode_every_view(cache: &sitegrid_cache::Cache) {
    use sitegrid_cache::{ApiVersion, ResourceKind, Served};
    for kind in ResourceKind::ALL {
        let (views, _) = cache.store(kind).snapshot("");
        for view in views {
            for version in [ApiVersion::V1, ApiVersion::V1beta1] {
                let served = Served { kind, version };
                let _ = cache.body(&view, served);
                let _ = cache.message(&view, served);
            }
        }
    }
}
