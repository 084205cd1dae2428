//! sitegrid-controller: the SuperEdge `superedge.io/v1` grid resources.
//!
//! A grid (DeploymentGrid, StatefulSetGrid, ServiceGrid) is one workload
//! template that should run once per site. A site (its [`SiteName`]) is a
//! distinct value of the node label named by the grid's [`GridUniqKey`].
//!
//! [`SiteName`]: sitegrid_api::keys::SiteName
//! [`GridUniqKey`]: sitegrid_api::keys::GridUniqKey
//!
//! The resource types and their CustomResourceDefinitions are the
//! `sitegrid-api` crate's. This crate holds three controllers side by side,
//! and [`run`], the one place that wires them together (leader election,
//! the node reflector, shutdown):
//!
//! - the grid controller, [`reconcile`]: one kube-runtime `Controller` per
//!   grid kind applying each grid's per-site children ([`render`],
//!   [`workload`]), server-side apply, status ([`status`]) and events;
//! - the site-manager controller, [`site_manager`]: NodeUnits and NodeGroups
//!   labelling, tainting and cordoning their nodes;
//! - multi-cluster distribution, [`fed`]: an original's copies in the
//!   managed clusters, and the managed-cluster side that pulls them.
//!
//! Below them, [`shared`] holds what they share and nothing of any one, and
//! [`health`] what `/readyz` and `/metrics` report.
#![warn(missing_docs)]

pub mod config;
pub mod drift;
pub mod fed;
#[cfg(test)]
mod fixtures;
pub mod grid_sites;
pub mod health;
pub mod metrics;
pub mod reconcile;
pub mod render;
pub mod run;
pub mod shared;
pub mod site_manager;
pub mod status;
pub mod workload;
