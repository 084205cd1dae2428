//! sitegrid-proxy: a site-filtered caching gateway between kube-proxy (and
//! other informers) and the Kubernetes API server.
//!
//! The folders follow the data, and imports run one way (left to right):
//!
//! ```text
//! http ← upstream ← cache ← handlers ← gateway ← app
//!                     ↑         passthrough ↗ ↑
//!                     └──────── ops ──────────┘
//! ```
//!
//! - [`http`]: the body type, kube-apiserver-shaped responses, serving TLS.
//! - [`upstream`]: what comes from the API server — the object type, the
//!   list/watch stream per kind, the pooled client for passthrough.
//! - [`cache`]: the served state. One [`cache::Writer`] (the projector, with
//!   the topology filter) turns upstream events into per-kind stores of
//!   views encoded once; [`cache::Cache`] is the cloneable read handle.
//! - [`handlers`]: LIST, GET and WATCH of the cached kinds, from a request
//!   that is already parsed.
//! - [`gateway`]: the Tower stack — classify every request once into a
//!   [`gateway::Route`], rescue errors into `Status` responses, metrics, and
//!   steer to the handlers, [`ops`] or [`passthrough`].
//! - [`app`]: start-up and shutdown (one cancellation token, one task set);
//!   [`config`]: the flags.
#![warn(missing_docs)]

pub mod app;
pub mod cache;
pub mod config;
pub mod gateway;
pub mod handlers;
pub mod http;
pub mod ops;
pub mod passthrough;
pub mod upstream;
