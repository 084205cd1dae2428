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
//! `sitegrid-api` crate's. This crate holds the pure expansion from a grid to
//! its per-site children ([`render`]), and the controller that applies them: [`reconcile`] (one
//! kube-runtime `Controller` per grid kind, server-side apply, status and
//! events), [`run`] (leader election, node reflector, shutdown) and [`health`]
//! (what `/readyz` and `/metrics` report).
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
