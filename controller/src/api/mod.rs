//! The `superedge.io/v1` API: the grid resource types, field for field as
//! SuperEdge serializes them so existing YAML applies unchanged ([`keys`]:
//! the strings they are made of), and their CustomResourceDefinitions
//! ([`crd`]), generated from these types with the real Kubernetes schemas of
//! `DeploymentSpec`, `StatefulSetSpec` and `ServiceSpec` embedded.

mod canary;
mod cluster_status;
pub mod crd;
mod deployment_grid;
pub mod keys;
mod service_grid;
pub mod site;
mod statefulset_grid;
mod template;

pub use canary::{GridTemplates, TemplateError};
pub use cluster_status::ClusterStatus;
pub use deployment_grid::{DeploymentGrid, DeploymentGridSpec, DeploymentGridStatus};
pub use service_grid::{ServiceGrid, ServiceGridSpec, ServiceGridStatus};
pub use statefulset_grid::{StatefulSetGrid, StatefulSetGridSpec, StatefulSetGridStatus};
pub use template::Template;

/// The API group of every grid resource.
pub const GROUP: &str = "superedge.io";
/// The API version of every grid resource.
pub const VERSION: &str = "v1";
