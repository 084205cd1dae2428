//! sitegrid-api: the resources sitegrid serves, as SuperEdge defines them.
//!
//! Shared by `sitegrid-controller`, which runs them, and `sitegrid-dnsd`,
//! which finds what the controller made; neither links the other.
//!
//! - the `superedge.io/v1` grids (DeploymentGrid, StatefulSetGrid,
//!   ServiceGrid), field for field as SuperEdge serializes them so existing
//!   YAML applies unchanged ([`keys`]: the strings they are made of); the two
//!   that run a workload per site are one definition, seen through
//!   [`WorkloadGrid`] and [`WorkloadGridSpec`];
//! - SuperEdge site-manager's `site.superedge.io/v1alpha2` NodeUnit and
//!   NodeGroup ([`site_manager`]);
//! - their CustomResourceDefinitions ([`crd`]), generated from these types
//!   with the real Kubernetes schemas of `DeploymentSpec`, `StatefulSetSpec`
//!   and `ServiceSpec` embedded;
//! - what the objects a grid generates are named ([`names`]) and labelled
//!   ([`labels`]): the contract between the controller that makes them and
//!   whoever looks them up.
#![warn(missing_docs)]

mod cluster_status;
pub mod crd;
pub mod keys;
pub mod labels;
pub mod names;
mod service_grid;
pub mod site_manager;
mod template;
mod workload_grid;

pub use cluster_status::ClusterStatus;
pub use keys::{GridUniqKey, SiteName, TemplateName};
pub use service_grid::{ServiceGrid, ServiceGridSpec, ServiceGridStatus};
pub use template::Template;
pub use workload_grid::{
    DeploymentGrid, DeploymentGridSpec, DeploymentGridStatus, StatefulSetGrid, StatefulSetGridSpec,
    StatefulSetGridStatus, TemplateError, WorkloadGrid, WorkloadGridSpec,
};

/// The API group of every grid resource.
pub const GROUP: &str = "superedge.io";
/// The API version of every grid resource.
pub const VERSION: &str = "v1";
