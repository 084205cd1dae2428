//! sitegrid-controller: the SuperEdge `superedge.io/v1` grid resources.
//!
//! A grid (DeploymentGrid, StatefulSetGrid, ServiceGrid) is one workload
//! template that should run once per site. A site — a [`NodeUnit`] — is a
//! distinct value of the node label named by the grid's [`GridUniqKey`].
//!
//! This crate holds the resource types ([`crd`]), their CustomResourceDefinitions
//! ([`crds`]) and the pure expansion from a grid to its per-site children
//! ([`render`]). The reconciler that applies them is not built yet.
#![warn(missing_docs)]

pub mod crd;
pub mod crds;
pub mod names;
pub mod render;

pub use crd::{
    DeploymentGrid, DeploymentGridSpec, DeploymentGridStatus, ServiceGrid, ServiceGridSpec,
    ServiceGridStatus, StatefulSetGrid, StatefulSetGridSpec, StatefulSetGridStatus,
};
pub use names::{GridUniqKey, NodeUnit, TemplateName};
