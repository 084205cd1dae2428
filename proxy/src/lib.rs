//! sitegrid-proxy: a site-filtered caching gateway between kube-proxy (and
//! other informers) and the Kubernetes API server.
//!
//! Data path (see `shared/ARCHITECTURE.md`): upstream reflectors
//! ([`reflector`]) → projector and per-resource stores ([`cache`]) with the
//! topology filter ([`topology`]) → list/get/watch handlers ([`serve`]).
#![warn(missing_docs)]

pub mod cache;

pub mod app;
pub mod config;
pub mod encode;
pub mod object;
pub mod ops;
pub mod passthrough;
pub mod reflector;
pub mod resource;
pub mod serve;
pub mod server;
pub mod stack;
pub mod tls;
pub mod topology;
pub mod upstream;
