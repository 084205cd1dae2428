//! The `superedge.io/v1` resource types, field for field as SuperEdge
//! serializes them, so existing YAML applies unchanged.
//!
//! The CRD schemas are generated from these types and embed the real
//! Kubernetes schemas of `DeploymentSpec`, `StatefulSetSpec` and `ServiceSpec`.

mod canary;
mod deployment_grid;
mod service_grid;
mod statefulset_grid;

pub use canary::GridTemplates;
pub use deployment_grid::{DeploymentGrid, DeploymentGridSpec, DeploymentGridStatus};
pub use service_grid::{ServiceGrid, ServiceGridSpec, ServiceGridStatus};
pub use statefulset_grid::{StatefulSetGrid, StatefulSetGridSpec, StatefulSetGridStatus};

/// The API group of every grid resource.
pub const GROUP: &str = "superedge.io";
/// The API version of every grid resource.
pub const VERSION: &str = "v1";
