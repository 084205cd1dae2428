//! The steer service: sends each classified request to its branch — the
//! cache handlers (watches unlimited; lists and gets behind the concurrency
//! limit), the operator endpoints, or passthrough (streams unlimited; the
//! rest behind the limit).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use http::{Request, Response};
use http_body_util::BodyExt;
use sitegrid_apimachinery::Status;
use tower::{util::BoxCloneSyncService, Service, ServiceExt};

use super::{clients::ClientGroups, route::Route};
use crate::{
    handlers::request::{CachedRequest, Verb},
    http::{response, Body, BoxError, Caller},
    kubelet::NodeRead,
    ops::Ops,
    site_reports::SiteReports,
};
use sitegrid_cache::ResourceKind;

/// A branch for cached requests.
pub type CachedBranch = BoxCloneSyncService<Box<CachedRequest>, Response<Body>, BoxError>;
/// A branch for requests that go upstream.
pub type PassthroughBranch = BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// Picks the branch for a classified request.
#[derive(Clone)]
pub struct Steer {
    /// Cached watches.
    pub watch: CachedBranch,
    /// Cached lists and gets.
    pub cached: CachedBranch,
    /// Passthrough watches and log follows.
    pub stream: PassthroughBranch,
    /// Other passthrough requests.
    pub passthrough: PassthroughBranch,
    /// The node cache: this node's kubelet's requests the cache does not
    /// answer (its watches, its other requests).
    pub kubelet: Option<(PassthroughBranch, PassthroughBranch)>,
    /// Told when this node's kubelet lists or watches its Node (see [`NodeRead`]).
    pub node_read: Option<NodeRead>,
    /// The operator endpoints, when served on this port.
    pub ops: Option<Ops>,
    /// Who may use the proxy (the operator endpoints excepted).
    pub clients: ClientGroups,
    /// The nodes' offline reports (a site proxy).
    pub reports: Option<SiteReports>,
}

impl Service<Request<Body>> for Steer {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each branch is driven to readiness per request (`oneshot`), so that
        // one saturated branch never blocks the others.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        // The classify layer always runs before this one (see `stack`).
        let Some(route) = req.extensions_mut().remove::<Route>() else {
            return Box::pin(async {
                Ok(response::status(&Status::internal_error(
                    "sitegrid-proxy: request reached the steer layer unclassified",
                )))
            });
        };
        let caller = req.extensions().get::<Caller>().cloned();
        if let Some(Caller::Stranger(_)) = caller {
            return Box::pin(async { Ok(response::status(&crate::passthrough::stranger())) });
        }
        // Reports are taken from a kubelet's certificate, whatever group
        // --client-group asks of node proxies.
        if !matches!(route, Route::Ops(_) | Route::Report(_)) {
            if let Some(status) = self.clients.refuse(&req) {
                let encoding = match &route {
                    Route::Cached(cached) => cached.errors,
                    _ => crate::http::response::StatusEncoding::Json,
                };
                return Box::pin(async move { Ok(response::status_as(&status, encoding)) });
            }
        }
        match route {
            Route::Cached(cached) => {
                let branch = match cached.verb {
                    Verb::Watch(_) => self.watch.clone(),
                    _ => self.cached.clone(),
                };
                let node_read = match (&caller, &self.node_read) {
                    (Some(Caller::Kubelet), Some(n))
                        if cached.served.kind == ResourceKind::Nodes =>
                    {
                        Some(n.clone())
                    }
                    _ => None,
                };
                let (list, watch) = (
                    matches!(cached.verb, Verb::List(_)),
                    matches!(cached.verb, Verb::Watch(_)),
                );
                let answered = branch.oneshot(cached);
                match node_read {
                    Some(n) => Box::pin(async move {
                        let resp = answered.await?;
                        if !resp.status().is_success() {
                            return Ok(resp);
                        }
                        if list {
                            n.listed();
                        }
                        Ok(match watch {
                            // The body holds the mark until it is dropped.
                            true => resp.map(|body| {
                                let watching = n.watching();
                                Body::new(body.map_frame(move |frame| {
                                    let _held = &watching;
                                    frame
                                }))
                            }),
                            false => resp,
                        })
                    }),
                    None => Box::pin(answered),
                }
            }
            Route::Rejected(rejection) => {
                Box::pin(
                    async move { Ok(response::status_as(&rejection.status, rejection.encoding)) },
                )
            }
            Route::Ops(endpoint) => match self.ops.clone() {
                Some(ops) => Box::pin(async move {
                    let uri = req.uri().clone();
                    Ok(ops.answer(req.method(), endpoint, uri.query()).await)
                }),
                // Routed to ops only when they are served here.
                None => Box::pin(self.passthrough.clone().oneshot(req)),
            },
            Route::Report(node) => match self.reports.clone() {
                Some(reports) => {
                    Box::pin(async move { Ok(reports.answer(&node, caller.as_ref(), req).await) })
                }
                // Classified as a report only where reports are taken.
                None => Box::pin(self.passthrough.clone().oneshot(req)),
            },
            Route::Passthrough(p) => {
                let kubelet = match (&caller, &self.kubelet) {
                    (Some(Caller::Kubelet), Some(branches)) => Some(branches),
                    _ => None,
                };
                let branch = match (kubelet, p.streaming) {
                    (Some((stream, _)), true) => stream.clone(),
                    (Some((_, other)), false) => other.clone(),
                    (None, true) => self.stream.clone(),
                    (None, false) => self.passthrough.clone(),
                };
                Box::pin(branch.oneshot(req))
            }
        }
    }
}
