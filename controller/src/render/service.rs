//! ServiceGrid → one Service shared by all sites.

use k8s_openapi::api::core::v1::Service;
use sitegrid_api::labels::TOPOLOGY_KEYS_ANNOTATION;
use sitegrid_api::names;
use sitegrid_api::ServiceGrid;

use super::{child_meta, GridError};

/// The Service `{grid}-svc` of `grid`.
///
/// It carries the grid's template, the grid labels, the grid's own
/// annotations plus `topologyKeys: '["<gridUniqKey>"]'` (which keeps traffic
/// inside the caller's site), and is controlled by the grid.
pub fn render_service(grid: &ServiceGrid) -> Result<Service, GridError> {
    let grid_name = grid
        .metadata
        .name
        .as_deref()
        .ok_or(GridError::NotPersisted)?;
    let name = names::service_name(grid_name);
    let key = &grid.spec.grid_uniq_key;
    let mut metadata = child_meta(grid, name, key)?;
    let mut annotations = grid.metadata.annotations.clone().unwrap_or_default();
    // serde_json renders a list of one string exactly as SuperEdge writes it: ["location"].
    let topology_keys = serde_json::Value::from(vec![key.to_string()]).to_string();
    annotations.insert(TOPOLOGY_KEYS_ANNOTATION.to_owned(), topology_keys);
    metadata.annotations = Some(annotations);
    Ok(Service {
        metadata,
        spec: Some(grid.spec.template.clone()),
        status: None,
    })
}
