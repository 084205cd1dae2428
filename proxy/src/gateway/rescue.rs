//! The rescue layer: whatever fails below becomes a Kubernetes `Status`
//! response with the right code (429 for shed load, 500 otherwise), so the
//! stack as a whole never fails.

use std::convert::Infallible;

use http::{Request, Response};
use sitegrid_apimachinery::Status;
use tower::{Service, ServiceExt};

use crate::http::{response, Body, BoxError};

/// Wraps `inner` so that it never fails. A `service_fn` around `oneshot`:
/// readiness is awaited per request, so a failure there is rescued too.
pub fn rescuing<S>(
    inner: S,
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send>
       + Clone
       + Send
       + Sync
       + 'static
where
    S: Service<Request<Body>, Response = Response<Body>, Error = BoxError>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    tower::service_fn(move |req| {
        let inner = inner.clone();
        async move { Ok(rescue(inner.oneshot(req).await)) }
    })
}

/// The response for a result of the stack below.
fn rescue(result: Result<Response<Body>, BoxError>) -> Response<Body> {
    match result {
        Ok(resp) => resp,
        Err(err) if is_overloaded(&err) => response::status(&Status::too_many_requests(
            "too many requests in flight, please try again later",
            1,
        )),
        Err(err) => response::status(&Status::internal_error(format!("sitegrid-proxy: {err}"))),
    }
}

/// Whether `err` is load shedding (the concurrency limit was reached).
pub fn is_overloaded(err: &BoxError) -> bool {
    err.is::<tower::load_shed::error::Overloaded>()
}
