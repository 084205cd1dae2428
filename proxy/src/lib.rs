//! sitegrid-proxy: a site-filtered caching gateway between kube-proxy (and
//! other informers) and the Kubernetes API server.
//!
//! The layers, bottom up; each imports only those below it:
//!
//! ```text
//! sitegrid-cache   (crate)  the projector and the served state: one Writer,
//!                           per-kind stores of views encoded once, watch
//!                           fan-out, readiness, the persisted snapshot
//! http                      the body type, kube-apiserver-shaped responses, TLS
//! upstream                  the feeds that keep the cache in sync (one
//!                           list/watch per kind, the node membership), their
//!                           error accounting, the passthrough client
//! handlers, passthrough     LIST/GET/WATCH of the cached kinds; everything else upstream
//! kubelet                   the node cache: this node's kubelet's other requests,
//!                           upstream as the kubelet and kept, or answered from
//!                           sitegrid-nodecache while the API server is unreachable
//! site_reports              a node's offline reports of its pods, sent by its
//!                           proxy to the site proxy, which serves them to the site
//! ops                       /healthz, /readyz, /metrics, /debug
//! gateway                   the Tower stack: classify once, rescue, steer
//! app, config               start-up, shutdown, flags
//! ```
//!
//! The cache is a crate of its own so that the compiler holds the line:
//! nothing in it can reach the API server, a socket or a request.
//!
//! - [`http`]: the body type, kube-apiserver-shaped responses, serving TLS.
//! - [`upstream`]: what comes from the API server — [`upstream::sync`] runs
//!   one list/watch stream per kind into the cache's writer,
//!   [`upstream::membership`] decides which Nodes to watch, and
//!   [`upstream::client`] is the pooled client for passthrough.
//! - [`handlers`]: LIST, GET and WATCH of the cached kinds, from a request
//!   that is already parsed.
//! - [`gateway`]: the Tower stack — classify every request once into a
//!   [`gateway::Route`], rescue errors into `Status` responses, metrics, and
//!   steer to the handlers, [`ops`] or [`passthrough`].
//! - [`app`]: start-up and shutdown (one cancellation token, one task set);
//!   [`config`]: the flags.
#![warn(missing_docs)]

pub mod app;
pub mod config;
pub mod gateway;
pub mod handlers;
pub mod http;
pub mod kubelet;
pub mod ops;
pub mod passthrough;
pub mod site_reports;
pub mod upstream;
