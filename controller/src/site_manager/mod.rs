//! The site-manager controller: SuperEdge site-manager's NodeUnits and
//! NodeGroups (`sitegrid_api::site_manager`), sites as resources that group
//! nodes and label them with the key grids use as `gridUniqKey` (a grid's
//! sites themselves come from those labels, [`crate::grid_sites`]).
//!
//! NodeUnit and NodeGroup membership and the node
//! labels, annotations, taints and cordon they imply ([`membership`]), the
//! change to one node that touches only what sitegrid set there ([`plan`]),
//! every write of one pass of the controller ([`decide`]), the shell that
//! watches ([`sync`]) and the one that writes them (`execute`).

pub mod decide;
mod execute;
pub mod membership;
pub mod plan;
pub mod sync;

/// How the site-manager controller runs.
#[derive(Clone, Copy, Debug)]
pub struct SiteManagerOptions {
    /// Keep the default unit `unit-node-all`.
    pub default_unit: bool,
}
