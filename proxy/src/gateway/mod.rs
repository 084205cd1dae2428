//! The gateway: every request through one Tower stack (see [`stack`]),
//! classified once into a [`Route`] and steered to the cache handlers, the
//! operator endpoints or the API server.

mod clients;
pub mod metrics;
mod query;
mod rescue;
pub mod route;
pub mod stack;
mod steer;
mod watch_slots;

use tokio_util::sync::CancellationToken;

pub use clients::ClientGroups;
pub use metrics::RequestMetrics;
pub use route::{classify, CachedNodes, Route, RouteConfig};
pub use stack::{build, Gateway, Limits};

use crate::{
    handlers::HandlerSettings, kubelet::KubeletBranch, ops::Ops, passthrough::Passthrough,
    site_reports::SiteReports,
};
use sitegrid_cache::Cache;

/// What the stack is built from.
pub struct GatewayConfig {
    /// The served state.
    pub cache: Cache,
    /// Handler settings.
    pub settings: HandlerSettings,
    /// Passthrough to the API server (None: 404 for everything not cached).
    pub passthrough: Option<Passthrough>,
    /// The operator endpoints, when served on this port.
    pub ops: Option<Ops>,
    /// Concurrency bounds.
    pub limits: Limits,
    /// Request metrics.
    pub metrics: RequestMetrics,
    /// Cancelled when the proxy shuts down: open watches end.
    pub closing: CancellationToken,
    /// Which Node requests the cache answers.
    pub nodes: CachedNodes,
    /// Who may use the proxy at all (`--client-group`).
    pub clients: ClientGroups,
    /// The node cache's branch for this node's kubelet (None: no node cache).
    pub kubelet: Option<KubeletBranch>,
    /// The nodes' offline reports, taken by a site proxy (None: not taken).
    pub reports: Option<SiteReports>,
}

impl GatewayConfig {
    /// A stack over `cache` alone: no upstream, no operator endpoints,
    /// default settings, unregistered metrics, nobody closing it.
    pub fn new(cache: Cache) -> GatewayConfig {
        GatewayConfig {
            cache,
            settings: HandlerSettings::default(),
            passthrough: None,
            ops: None,
            limits: Limits::default(),
            metrics: RequestMetrics::unregistered(),
            closing: CancellationToken::new(),
            nodes: CachedNodes::All,
            clients: ClientGroups::default(),
            kubelet: None,
            reports: None,
        }
    }
}
