//! The labels and annotations a grid puts on the objects it generates.

/// Label on every generated object: the name of the grid that owns it.
pub const GRID_SELECTOR_LABEL: &str = "superedge.io/grid-selector";
/// Label on every generated object: the grid's `gridUniqKey`.
pub const GRID_UNIQ_KEY_LABEL: &str = "superedge.io/grid-uniq-key";
/// Label on every per-site workload (Deployment, StatefulSet): the site (its
/// [`SiteName`](crate::keys::SiteName)) it runs. Only on the workload's own metadata, never on its pod template, so
/// adding it to an existing workload restarts no pod. sitegrid-dnsd selects
/// the StatefulSets of its node's sites with it instead of watching every
/// site's.
pub const SITE_LABEL: &str = "sitegrid.io/node-unit";
/// Annotation on the generated Service: the JSON list of topology keys
/// (`["<gridUniqKey>"]`) that keeps traffic inside a site.
pub const TOPOLOGY_KEYS_ANNOTATION: &str = "topologyKeys";
