//! The node cache in the gateway: what this node's kubelet asks that the
//! served-state cache does not answer (its pods, their Secrets,
//! ConfigMaps, volumes and tokens, its CSINode, CSIDrivers,
//! RuntimeClasses, and every write).
//!
//! - **Online** (the API server answers, [`crate::upstream::health`]): the
//!   request goes upstream as the kubelet, with its own certificate
//!   (passthrough), and what it reads is kept on the way ([`tee`]) in the
//!   node cache (`sitegrid-nodecache`). A watch that does not start where
//!   the kept list is (the proxy restarted while the kubelet kept
//!   watching) is answered `410 Gone` at once, so the kubelet lists again
//!   through the proxy and nothing it saw is missing from what is kept. A
//!   passed-through watch ends when the API server becomes unreachable,
//!   so the kubelet's next one is answered offline.
//! - **Offline**: answered from the node cache at once ([`offline`]); a
//!   request that finds the API server gone while online (it could not
//!   connect) is answered the same way instead of failing.

pub mod offline;
pub mod request;
mod tee;

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use sitegrid_apimachinery::Status;
use sitegrid_nodecache::{answer, Format, KeptResource, NodeCache};
use tokio_util::sync::CancellationToken;

use crate::{
    http::{response, Body},
    passthrough::{NotForwarded, Passthrough},
    upstream::health::Health,
};
use request::{KubeletRequest, Negotiated, WatchStart};

/// The branch of the stack that serves this node's kubelet.
#[derive(Clone)]
pub struct KubeletBranch {
    /// What is kept.
    pub cache: NodeCache,
    /// The way upstream (as the kubelet).
    pub passthrough: Passthrough,
    /// Whether the API server can be reached.
    pub health: Health,
    /// Whether the served-state cache holds this node's Node.
    pub node_known: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Between two bookmarks of a watch held offline.
    pub bookmark_interval: Duration,
    /// Cancelled when the proxy shuts down.
    pub closing: CancellationToken,
    /// Whether the kubelet has its own Node.
    pub node_read: NodeRead,
}

/// Whether this node's kubelet has its own Node, read from the served-state
/// cache. A 1.20 kubelet starts its pod list and its Node list at once and
/// admits pods against the Node it has: pods that arrive first are checked
/// against a Node without the cluster's labels, and a node selector on a
/// site's label rejects them for good (`Pod Predicate NodeAffinity
/// failed`; 1.21+ waits for the Node itself). Offline both answers are
/// ready at once, so the pod list waits until the kubelet has its Node.
///
/// The sure sign is its Node watch: client-go's reflector stores what it
/// listed before it opens the watch that follows, and the kubelet admits
/// pods against that store. A list answered some time ago is the fallback
/// for a client that lists without watching. (A list answered 200 ms
/// before was taken for the sign once: on a node busy starting everything
/// after a reboot, the kubelet had not stored it yet.)
#[derive(Debug, Clone, Default)]
pub struct NodeRead(Arc<NodeReadState>);

#[derive(Debug, Default)]
struct NodeReadState {
    /// When the kubelet's Node list was last answered.
    listed: parking_lot::Mutex<Option<tokio::time::Instant>>,
    /// The kubelet's Node watches open now.
    watching: std::sync::atomic::AtomicUsize,
    changed: tokio::sync::Notify,
}

/// How long after the kubelet's Node list its pods are answered if it
/// opened no Node watch.
const NODE_SETTLE: Duration = Duration::from_secs(5);
/// How long a pod list waits for the kubelet's Node at most: beyond
/// client-go's longest backoff (30 s, doubled by its jitter), after which
/// a reflector refused while the proxy started has asked again.
const NODE_WAIT: Duration = Duration::from_secs(60);

/// One open Node watch of the kubelet; dropped with the watch's body.
#[derive(Debug)]
pub struct NodeWatching(Arc<NodeReadState>);

impl Drop for NodeWatching {
    fn drop(&mut self) {
        self.0
            .watching
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl NodeRead {
    /// The kubelet's Node list was answered now.
    pub fn listed(&self) {
        *self.0.listed.lock() = Some(tokio::time::Instant::now());
        self.0.changed.notify_waiters();
    }

    /// The kubelet opened a Node watch: it has its Node while the returned
    /// value lives.
    pub fn watching(&self) -> NodeWatching {
        self.0
            .watching
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.changed.notify_waiters();
        NodeWatching(self.0.clone())
    }

    /// Resolves once the kubelet has a Node watch open, or its Node list
    /// was answered at least [`NODE_SETTLE`] ago, or after [`NODE_WAIT`].
    async fn settled(&self) {
        let deadline = tokio::time::Instant::now() + NODE_WAIT;
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.0.watching.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                return;
            }
            let now = tokio::time::Instant::now();
            let settled_at = self.0.listed.lock().map(|at| at + NODE_SETTLE);
            if now >= deadline || settled_at.is_some_and(|at| now >= at) {
                return;
            }
            let until = settled_at.map_or(deadline, |at| at.min(deadline));
            tokio::select! {
                () = &mut changed => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

impl KubeletBranch {
    /// Answers one request of the kubelet.
    pub async fn handle(&self, req: Request<Body>) -> Response<Body> {
        let (mut parts, body) = req.into_parts();
        let neg = Negotiated::of(&parts);
        let kreq = match request::classify(&parts) {
            Ok(k) => k,
            Err(status) => return response::status_as(&status, neg.errors),
        };
        // A TokenRequest's body is its key, a pod status patch is applied
        // offline: read them first (they are small).
        let (body, token) = match kreq {
            KubeletRequest::Token { .. } | KubeletRequest::PodStatus { .. } => {
                match read_body(body).await {
                    Ok(bytes) => (
                        Body::new(http_body_util::Full::new(bytes.clone())),
                        Some(bytes),
                    ),
                    Err(status) => return response::status_as(&status, neg.errors),
                }
            }
            _ => (body, None),
        };
        if self.health.is_offline() {
            return self.answer_offline(&kreq, &neg, token.as_ref()).await;
        }
        if let KubeletRequest::Watch {
            resource,
            scope,
            start: WatchStart::After(rv),
            ..
        } = &kreq
        {
            if !self.cache.continues(*resource, scope, rv) {
                return gone(&neg, rv);
            }
        }
        if let KubeletRequest::List { resource, .. }
        | KubeletRequest::Get { resource, .. }
        | KubeletRequest::Watch { resource, .. } = &kreq
        {
            // The kubelet's pods are kept in JSON (it takes JSON as well):
            // its status patches, strategic merge JSON, apply to them
            // offline (`nodecache::local`).
            if *resource == KeptResource::Pods {
                parts
                    .headers
                    .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
            }
        }
        match self
            .passthrough
            .send(Request::from_parts(parts, body))
            .await
        {
            Ok(resp) => self.keep(kreq, token, resp).await,
            Err(NotForwarded::Unreachable(err)) => {
                tracing::debug!(error = %err, "the kubelet's request found the API server unreachable; answered from the node cache");
                self.health.observe(false);
                self.answer_offline(&kreq, &neg, token.as_ref()).await
            }
            Err(NotForwarded::Answered(resp)) => resp,
        }
    }

    /// The answer from the node cache; the pods only once the kubelet has read its Node.
    async fn answer_offline(
        &self,
        kreq: &KubeletRequest,
        neg: &Negotiated,
        token: Option<&Bytes>,
    ) -> Response<Body> {
        let pods = matches!(
            kreq,
            KubeletRequest::List {
                resource: KeptResource::Pods,
                ..
            } | KubeletRequest::Watch {
                resource: KeptResource::Pods,
                ..
            }
        );
        let answer = self.offline().answer(kreq, neg, token);
        // A refusal (nothing kept) admits no pod: it need not wait.
        if pods && answer.status().is_success() {
            self.node_read.settled().await;
        }
        answer
    }

    fn offline(&self) -> offline::Offline<'_> {
        offline::Offline {
            cache: &self.cache,
            health: &self.health,
            node_known: (self.node_known)(),
            bookmark_interval: self.bookmark_interval,
            closing: &self.closing,
        }
    }

    /// The API server's answer, passed on and kept on the way.
    async fn keep(
        &self,
        kreq: KubeletRequest,
        token: Option<Bytes>,
        resp: Response<hyper::body::Incoming>,
    ) -> Response<Body> {
        let format = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(Format::of_content_type);
        let ok = resp.status() == StatusCode::OK || resp.status() == StatusCode::CREATED;
        let (Some(format), true) = (format, ok) else {
            return resp.map(Body::new);
        };
        let cache = self.cache.clone();
        let (parts, body) = resp.into_parts();
        let body = match kreq {
            KubeletRequest::List { resource, scope } => {
                let mut new = false;
                let body =
                    tee::whole(body, |b| new = cache.listed(resource, &scope, format, b)).await;
                if new {
                    // See `NodeCache::listed`.
                    written_first(&cache, move |c| c.flush_resource(resource)).await;
                }
                body
            }
            KubeletRequest::Get { resource, .. } => {
                tee::whole(body, |b| cache.got(resource, format, b)).await
            }
            KubeletRequest::Token {
                namespace,
                service_account,
            } => {
                let request = token.unwrap_or_default();
                let mut kept = None;
                let body = tee::whole(body, |b| {
                    kept = cache.token_issued(
                        &namespace,
                        &service_account,
                        request,
                        format,
                        Bytes::copy_from_slice(b),
                    )
                })
                .await;
                if let Some(key) = kept {
                    // See `NodeCache::write_token`.
                    written_first(&cache, move |c| c.write_token(&key)).await;
                }
                body
            }
            KubeletRequest::Watch {
                resource,
                scope,
                start,
                ..
            } => {
                let resp = Response::from_parts(parts, body);
                let initial = match start {
                    WatchStart::After(_) => false,
                    WatchStart::List => true,
                    // Initial events with nothing marking their end: not a list to keep.
                    WatchStart::Now => return self.until_offline(resp),
                };
                let tee = cache.watch_tee(resource, scope, format, initial);
                return self.until_offline(resp.map(|b| tee::watch(b, tee)));
            }
            KubeletRequest::RegisterNode
            | KubeletRequest::PodStatus { .. }
            | KubeletRequest::Other => Body::new(body),
        };
        Response::from_parts(parts, body)
    }

    /// A watch passed on until the API server becomes unreachable.
    fn until_offline<B>(&self, resp: Response<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<crate::http::BoxError>,
    {
        let health = self.health.clone();
        resp.map(|body| {
            let offline = Box::pin(async move { health.offline().await });
            Body::new(Until { body, offline })
        })
    }
}

/// A body that ends when `offline` resolves.
struct Until<B> {
    body: B,
    offline: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl<B> http_body::Body for Until<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        if self.offline.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(None);
        }
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }
}

/// The answer to a watch that does not continue what is kept: a `410 Gone`
/// ERROR event, as kube-apiserver ends a watch from a version it no longer has.
fn gone(neg: &Negotiated, rv: &str) -> Response<Body> {
    let format = neg.preferred();
    let frame = answer::expired(
        format,
        &format!("too old resource version: {rv} (sitegrid-proxy's node cache does not continue from it; list again)"),
    );
    let mut resp = Response::new(response::full(frame));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.watch_content_type()),
    );
    resp
}

/// A request body, whole (a TokenRequest is a few hundred bytes).
async fn read_body(body: Body) -> Result<Bytes, Status> {
    const LIMIT: usize = 1 << 20;
    http_body_util::Limited::new(body, LIMIT)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| Status::bad_request(format!("the request body could not be read: {e}")))
}

/// Writes what `write` writes of the node cache now, off the async threads,
/// and waits for it: the answer the kubelet is about to get is on disk
/// before it has it. A failed write is tried again at the next change.
async fn written_first(
    cache: &NodeCache,
    write: impl FnOnce(&NodeCache) -> Result<(), String> + Send + 'static,
) {
    let c = cache.clone();
    match tokio::task::spawn_blocking(move || write(&c)).await {
        // A failed write is logged where it failed.
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "the node cache write task failed"),
    }
}
