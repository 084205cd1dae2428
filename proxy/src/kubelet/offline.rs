//! The kubelet's requests answered from the node cache while the API
//! server is unreachable, as kube-apiserver would answer them from what it
//! last said:
//!
//! - lists and gets of what is kept, with the API server's resourceVersion;
//!   a watch held open (bookmarks every `--bookmark-interval` for clients
//!   that take them) until the API server answers again, then ended so the
//!   kubelet watches it directly; a watch-list served whole;
//! - a TokenRequest asked before: the token the API server issued, until it
//!   expires;
//! - the node's registration: `409 AlreadyExists` when the node is known
//!   (it is: the served-state cache holds it), which sends the kubelet on
//!   to read its Node from that cache;
//! - a pod's status (`PATCH …/pods/<p>/status`): applied to the kept pod
//!   and answered with it, as kube-apiserver answers (so the status manager
//!   does not retry in a loop); its addresses and readiness go to the site's
//!   endpoints (`nodecache::local`, `cache/src/writer/local.rs`);
//! - everything else — node status, lease, events, what was never kept —
//!   `503` at once; the kubelet sends its current state again later.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use sitegrid_apimachinery::Status;
use sitegrid_nodecache::{answer, Answer, Format, NodeCache, Refusal, StatusRefusal, WatchFrom};
use tokio_util::sync::CancellationToken;

use super::request::{KubeletRequest, Negotiated, WatchStart};
use crate::{
    http::{produced::Produced, response, Body},
    upstream::health::Health,
};

/// What an offline answer needs besides the request.
pub struct Offline<'a> {
    /// The node cache.
    pub cache: &'a NodeCache,
    /// When to end held watches.
    pub health: &'a Health,
    /// Whether the served-state cache holds this node's Node.
    pub node_known: bool,
    /// Between two bookmarks of a held watch.
    pub bookmark_interval: Duration,
    /// Cancelled when the proxy shuts down.
    pub closing: &'a CancellationToken,
}

impl Offline<'_> {
    /// The answer to `req`; `body` is a TokenRequest's or a status patch's body.
    pub fn answer(
        &self,
        req: &KubeletRequest,
        neg: &Negotiated,
        body: Option<&Bytes>,
    ) -> Response<Body> {
        let token = body;
        let refused = |r: Refusal| refusal(&r, neg);
        match req {
            KubeletRequest::List { resource, scope } => {
                match self.cache.list(*resource, scope, &neg.formats) {
                    Ok(a) => whole(a),
                    Err(r) => refused(r),
                }
            }
            KubeletRequest::Get {
                resource,
                namespace,
                name,
            } => match self.cache.get(*resource, namespace, name, &neg.formats) {
                Ok(Some(a)) => whole(a),
                Ok(None) => response::status_as(
                    &Status::not_found(resource.plural(), resource.group(), name),
                    neg.errors,
                ),
                Err(r) => refused(r),
            },
            KubeletRequest::Watch {
                resource,
                scope,
                start,
                bookmarks,
                timeout,
            } => {
                let from = match start {
                    WatchStart::After(rv) => WatchFrom::Version(rv.clone()),
                    WatchStart::List => WatchFrom::Initial {
                        end_bookmark: *bookmarks,
                    },
                    WatchStart::Now => WatchFrom::Initial {
                        end_bookmark: false,
                    },
                };
                match self.cache.watch(*resource, scope, &from, &neg.formats) {
                    Ok(w) => self.held(*resource, w, *bookmarks, *timeout),
                    Err(r) => refused(r),
                }
            }
            KubeletRequest::Token {
                namespace,
                service_account,
            } => match self.cache.token(
                namespace,
                service_account,
                token.map_or(&[][..], |b| &b[..]),
                &neg.formats,
            ) {
                Ok(a) => whole(a),
                Err(r) => refused(r),
            },
            KubeletRequest::PodStatus { .. } if !neg.formats.contains(&Format::Json) => {
                refused(Refusal::NotAcceptable(Format::Json))
            }
            KubeletRequest::PodStatus { namespace, name } => {
                match self
                    .cache
                    .status_written(namespace, name, body.map_or(&[][..], |b| &b[..]))
                {
                    Ok(a) => whole(a),
                    Err(r) => response::status_as(&status_refused(&r), neg.errors),
                }
            }
            KubeletRequest::RegisterNode if self.node_known => {
                response::status_as(&already_registered(self.cache.node()), neg.errors)
            }
            KubeletRequest::RegisterNode | KubeletRequest::Other => {
                response::status_as(&unreachable(), neg.errors)
            }
        }
    }

    /// A watch held open from what the node cache says to send first.
    fn held(
        &self,
        resource: sitegrid_nodecache::KeptResource,
        w: sitegrid_nodecache::OfflineWatch,
        bookmarks: bool,
        timeout: Option<Duration>,
    ) -> Response<Body> {
        let (health, closing) = (self.health.clone(), self.closing.clone());
        let every = self.bookmark_interval;
        let format = w.format;
        let body = Produced::new(move |sink| async move {
            for frame in w.frames {
                sink.send(frame).await;
            }
            if w.ends {
                return;
            }
            let until = async {
                match timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(until);
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tokio::select! {
                    // The API server is back: the kubelet watches it from its version.
                    () = health.online() => return,
                    () = closing.cancelled() => return,
                    () = &mut until => return,
                    _ = ticks.tick(), if bookmarks => {
                        sink.send(answer::bookmark(resource, format, &w.resource_version, false)).await;
                    }
                }
            }
        });
        let mut resp = Response::new(Body::new(http_body_util::StreamBody::new(
            futures::StreamExt::map(body, |b| {
                Ok::<_, std::convert::Infallible>(http_body::Frame::data(b))
            }),
        )));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.watch_content_type()),
        );
        resp
    }
}

/// A whole answer.
fn whole(a: Answer) -> Response<Body> {
    let code = StatusCode::from_u16(a.status).unwrap_or(StatusCode::OK);
    response::typed(code, a.content_type, response::full(a.body))
}

/// What a request the node cache cannot answer gets.
fn refusal(r: &Refusal, neg: &Negotiated) -> Response<Body> {
    let status = match r {
        Refusal::NotAcceptable(_) => Status::not_acceptable(r.message()),
        _ => Status::service_unavailable(
            format!(
                "sitegrid-proxy cannot reach the API server, and {}",
                r.message()
            ),
            1,
        ),
    };
    response::status_as(&status, neg.errors)
}

/// `503` for what is never answered from what is kept: without
/// `Retry-After`, so client-go hands the kubelet its error at once instead of
/// retrying inside the request for ten seconds (the heartbeat's whole
/// timeout) — the kubelet sends its current state again later anyway.
pub fn unreachable() -> Status {
    Status::unavailable_now(
        "sitegrid-proxy cannot reach the API server (the kubelet's writes wait until it can)",
    )
}

/// What kube-apiserver would answer a status patch the node cache does not take.
fn status_refused(r: &StatusRefusal) -> Status {
    match r {
        StatusRefusal::NotKept(what) => Status::unavailable_now(format!(
            "sitegrid-proxy cannot reach the API server, and keeps no {what}"
        )),
        StatusRefusal::OtherNode(why) => Status::failure(403, Some("Forbidden"), why.clone()),
        StatusRefusal::Uid { wanted, found } => Status::failure(
            409,
            Some("Conflict"),
            format!(
                "Precondition failed: UID in precondition: {wanted}, UID in object meta: {found}"
            ),
        ),
        StatusRefusal::Unreadable(why) => Status::bad_request(why.clone()),
    }
}

/// `409`: the node is registered (its Node is known).
fn already_registered(node: &str) -> Status {
    let mut s = Status::failure(
        409,
        Some("AlreadyExists"),
        format!("nodes \"{node}\" already exists"),
    );
    s.details = Some(sitegrid_apimachinery::status::StatusDetails {
        name: node.to_owned(),
        kind: "nodes".to_owned(),
        ..Default::default()
    });
    s
}
