//! The upstream HTTP clients: the pooled one for passthrough (streaming
//! bodies both ways) and the reflectors' kube client, both built from the
//! kubeconfig with the proxy's own credentials (client certificate, bearer
//! token, or a token file re-read on rotation — kube-client's auth layer).

use http::{header::RETRY_AFTER, HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper_timeout::TimeoutConnector;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use kube::client::{retry::RetryPolicy, ClientBuilder, ConfigExt};
use tower::{retry::RetryLayer, util::BoxCloneSyncService, ServiceBuilder, ServiceExt};

use std::time::Duration;

use sitegrid_cache::Cache;

use super::{deadline::DeadlineLayer, protobuf::ProtobufLayer};
use crate::http::{Body, BoxError};

/// The upstream as a cloneable service.
pub type Upstream = BoxCloneSyncService<Request<Body>, Response<Incoming>, BoxError>;

/// Builds the upstream service from a kube `Config`, with its credentials.
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

/// The upstream service for requests that carry their own credentials: the
/// kubeconfig's server, CA and headers, none of the proxy's credentials
/// (neither its client certificate nor its token), so the API server sees
/// the caller alone.
pub fn upstream_without_credentials(config: &kube::Config) -> Result<Upstream, kube::Error> {
    let mut bare = config.clone();
    bare.auth_info = kube::config::AuthInfo::default();
    upstream(&bare)
}

/// The read buffer of a reflector's connection, always this size. hyper's
/// default grows with the largest read and lets a connection that once
/// read a large list page keep that buffer for good, a long-lived watch
/// included; a cap still leaves each connection the cap. A small fixed
/// buffer only means more reads per page.
const REFLECTOR_READ_BUFFER: usize = 16 << 10;

/// How a throttled or unavailable answer (429/503/504) is retried inside the
/// client before the reflector sees it as an error: a few times, from 250 ms
/// doubling up to 30 s, never sooner than the server's `Retry-After`. Then
/// the reflector counts the error and backs off (0.8 s doubling up to 30 s),
/// so a storm is bounded and every failed round is counted.
fn reflector_retry() -> RetryPolicy {
    RetryPolicy::new(Duration::from_millis(250), RETRY_AFTER_CAP, 3, true)
        // The constants above are valid (min below max, factor 2).
        .unwrap_or_else(|_| RetryPolicy::server_retry())
}

/// The longest `Retry-After` the reflectors' client waits: the ceiling of
/// its own backoff, which is also the reflector's. kube-client caps its
/// backoff but obeys the header whatever it says, so a broken or hostile
/// API server answering `Retry-After: 86400` would stall a reflector (and
/// the cache's view of that kind) for a day.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);

/// Shortens `response`'s `Retry-After` (delay-seconds; an HTTP date is not
/// obeyed by the retry policy anyway) to [`RETRY_AFTER_CAP`]; true if it did.
pub fn cap_retry_after<B>(response: &mut Response<B>) -> bool {
    let cap = RETRY_AFTER_CAP.as_secs();
    let asked = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match asked {
        Some(secs) if secs > cap => {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(cap));
            true
        }
        _ => false,
    }
}

/// The kube client the reflectors list and watch with: kube-client's own
/// stack (base URI, retries of 429/503/504, auth, extra headers, connect,
/// read and write timeouts) over a hyper client with a capped read buffer,
/// with a deadline of `list_deadline` on every response but a watch's, and
/// a watch silent for `watch_idle` taken for dead ([`super::deadline`]).
/// (kube's tracing spans and the expiry of exec-plugin client certificates
/// are left out.) `protobuf` says whether Services and endpoints are read
/// in protobuf ([`super::protobuf`]). A `Retry-After` longer than
/// [`RETRY_AFTER_CAP`] is obeyed as the cap, and counted in `cache`'s
/// `upstream_retry_after_capped_total`.
pub fn reflector_client(
    config: &kube::Config,
    list_deadline: Duration,
    watch_idle: Duration,
    protobuf: ProtobufLayer,
    cache: Option<Cache>,
) -> Result<kube::Client, kube::Error> {
    let mut connector = TimeoutConnector::new(config.rustls_https_connector()?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    let client: Client<_, kube::client::Body> = Client::builder(TokioExecutor::new())
        .http1_read_buf_exact_size(REFLECTOR_READ_BUFFER)
        .build(connector);
    let svc = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(reflector_retry())),
        )
        // What the retries read: the answer's Retry-After, capped.
        .map_response(move |mut response: Response<_>| {
            if cap_retry_after(&mut response) {
                if let Some(cache) = &cache {
                    cache.metrics().upstream_retry_after_capped();
                }
            }
            response
        })
        // Inside the retries: each attempt has the whole deadline, and
        // an answer that does not read is not retried as it is.
        .layer(protobuf)
        .layer(DeadlineLayer::new(list_deadline, watch_idle))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(client);
    Ok(ClientBuilder::new(svc, config.default_namespace.clone()).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(retry_after: &str) -> Response<()> {
        Response::builder()
            .status(429)
            .header(RETRY_AFTER, retry_after)
            .body(())
            .unwrap()
    }

    #[test]
    fn a_retry_after_beyond_the_cap_is_shortened_to_it() {
        let mut day = answer("86400");
        assert!(cap_retry_after(&mut day));
        assert_eq!(day.headers()[RETRY_AFTER], "30");
        for kept in ["1", "30", "Wed, 21 Oct 2015 07:28:00 GMT", "-5"] {
            let mut r = answer(kept);
            assert!(!cap_retry_after(&mut r), "{kept}");
            assert_eq!(r.headers()[RETRY_AFTER], kept);
        }
        let mut none = Response::new(());
        assert!(!cap_retry_after(&mut none));
        assert!(none.headers().get(RETRY_AFTER).is_none());
    }
}
