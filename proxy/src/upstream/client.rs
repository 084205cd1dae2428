//! The pooled upstream HTTP client for passthrough: one hyper-util client,
//! built once at start-up from the same kubeconfig as the reflectors, with the
//! proxy's own credentials (client certificate, bearer token, or a token
//! file re-read on rotation — kube-client's auth layer) and streaming bodies
//! both ways.

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use kube::client::ConfigExt;
use tower::{util::BoxCloneSyncService, ServiceBuilder, ServiceExt};

use crate::http::{Body, BoxError};

/// The upstream as a cloneable service.
pub type Upstream = BoxCloneSyncService<Request<Body>, Response<Incoming>, BoxError>;

/// Builds the upstream service from a kube `Config`.
pub fn upstream(config: &kube::Config) -> Result<Upstream, kube::Error> {
    let connector = config.rustls_https_connector()?;
    let client: Client<_, Body> = Client::builder(TokioExecutor::new()).build(connector);
    let svc = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .layer(config.extra_headers_layer()?)
        .option_layer(config.auth_layer()?)
        .service(client.map_err(BoxError::from))
        .map_err(BoxError::from);
    Ok(BoxCloneSyncService::new(svc))
}
