//! sitegrid-dnsd: per-site DNS names for StatefulSetGrid pods and headless
//! ServiceGrids, written as a hosts file for CoreDNS's `hosts` plugin.
//!
//! On a node of site `beijing`, `statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local`
//! must answer with the IP of pod `statefulsetgrid-demo-beijing-0`, so that a
//! stateful application keeps its standard names and stays in its site.
//!
//! Data flows one way:
//!
//! - [`domain`]: the cluster domain and what a DNS name may look like;
//! - [`site`]: which StatefulSets and pods belong to this node's site, and the
//!   label selectors that fetch only those (pure);
//! - [`hosts`]: the records and the file's text (pure, tested by value);
//! - [`watch`]: the reflectors that feed them from the API server, some of
//!   whose selectors follow what [`site`] derives;
//! - [`file`]: the hosts file, replaced atomically and only on change;
//! - [`metrics`] and [`ready`]: what `/metrics` and `/readyz` report;
//! - [`run`]: the loop tying them together.
#![warn(missing_docs)]

pub mod config;
pub mod domain;
pub mod file;
pub mod hosts;
pub mod metrics;
pub mod ready;
pub mod run;
pub mod site;
pub mod watch;

#[cfg(test)]
mod fixtures;
