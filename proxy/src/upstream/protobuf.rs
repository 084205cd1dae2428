//! Reading Services, Endpoints and EndpointSlices from upstream in
//! protobuf, about half the bytes of JSON (what kube-proxy reads too): the
//! reflectors' requests for them offer protobuf first, and an answer in
//! protobuf is turned into the JSON the API server would have sent
//! (`sitegrid_apimachinery::protobuf::to_json`) before kube-client reads
//! it, a list whole, a watch event by event. An upstream that answers JSON
//! (a CRD-backed server, an old proxy) is read as it is.
//!
//! A resource whose answer does not read completely (fields this build's
//! messages do not know: a newer API server's) is read in JSON from then
//! on, until the process restarts; the answer that showed it fails, so the
//! reflector lists or re-watches from its last version and loses nothing.
//! Nodes and ServiceCIDRs stay JSON: a node proxy watches one Node, and
//! ServiceCIDRs rarely change.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{Context, Poll},
};

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Request, Response};
use http_body::{Body, Frame};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use sitegrid_apimachinery::protobuf::{self, to_json};
use sitegrid_cache::{Cache, ResourceKind};
use tokio_util::codec::{Decoder, LengthDelimitedCodec};
use tower::{Layer, Service};
use tracing::warn;

use crate::http::BoxError;

/// The body kube-client reads.
pub type JsonBody = UnsyncBoxBody<Bytes, BoxError>;

/// The cluster-wide collections read in protobuf (path suffixes).
const RESOURCES: [(&str, ResourceKind); 4] = [
    ("/api/v1/services", ResourceKind::Services),
    ("/api/v1/endpoints", ResourceKind::Endpoints),
    (
        "/apis/discovery.k8s.io/v1/endpointslices",
        ResourceKind::EndpointSlices,
    ),
    (
        "/apis/discovery.k8s.io/v1beta1/endpointslices",
        ResourceKind::EndpointSlices,
    ),
];

/// The largest protobuf watch event read. kube-apiserver's objects are at
/// most about 1.5 MiB (etcd's request limit) and an event wraps one; a
/// longer length prefix is a broken stream, ended before it is buffered.
const MAX_WATCH_EVENT: usize = 16 << 20;

/// How a protobuf watch stream is cut into events: each a 4-byte
/// big-endian length, then the event, at most [`MAX_WATCH_EVENT`] bytes.
pub fn watch_events() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(MAX_WATCH_EVENT)
        .new_codec()
}

/// What a reflector offers: protobuf, else JSON (as kube-proxy, which
/// offers `*/*` after protobuf).
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Wraps the reflectors' client in [`ProtobufReads`]; `enabled: false`
/// passes requests and answers as they are. Which format each kind's
/// answers came in goes to `cache`'s `upstream_protobuf` metric.
#[derive(Debug, Clone)]
pub struct ProtobufLayer {
    enabled: bool,
    /// Per entry of [`RESOURCES`]: read in JSON from now on.
    json_only: Arc<[AtomicBool; 4]>,
    cache: Option<Cache>,
}

impl ProtobufLayer {
    /// See [`ProtobufLayer`].
    pub fn new(enabled: bool, cache: Option<Cache>) -> Self {
        ProtobufLayer {
            enabled,
            json_only: Arc::new(Default::default()),
            cache,
        }
    }
}

impl<S> Layer<S> for ProtobufLayer {
    type Service = ProtobufReads<S>;
    fn layer(&self, inner: S) -> ProtobufReads<S> {
        ProtobufReads {
            inner,
            layer: self.clone(),
        }
    }
}

/// See the module doc.
#[derive(Debug, Clone)]
pub struct ProtobufReads<S> {
    inner: S,
    layer: ProtobufLayer,
}

/// Which of [`RESOURCES`] a request lists or watches, if any.
fn resource<B>(req: &Request<B>) -> Option<usize> {
    if req.method() != http::Method::GET {
        return None;
    }
    let path = req.uri().path();
    RESOURCES.iter().position(|(r, _)| path.ends_with(r))
}

impl<S, ReqB, B> Service<Request<ReqB>> for ProtobufReads<S>
where
    S: Service<Request<ReqB>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<JsonBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<ReqB>) -> Self::Future {
        let matched = resource(&req);
        let which = matched
            .filter(|&i| self.layer.enabled && !self.layer.json_only[i].load(Ordering::Relaxed));
        if which.is_some() {
            req.headers_mut()
                .insert(header::ACCEPT, HeaderValue::from_static(ACCEPT));
        }
        let response = self.inner.call(req);
        let json_only = self.layer.json_only.clone();
        let cache = self.layer.cache.clone();
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            let is_protobuf = which.is_some() && content_type.starts_with(protobuf::MEDIA_TYPE);
            if let (Some(cache), Some(i), true) = (&cache, matched, response.status().is_success())
            {
                cache
                    .metrics()
                    .upstream_protobuf(RESOURCES[i].1, is_protobuf);
            }
            let (Some(which), true) = (which, is_protobuf) else {
                return Ok(response.map(|b| b.map_err(Into::into).boxed_unsync()));
            };
            let fallback = Fallback { json_only, which };
            let (mut parts, body) = response.into_parts();
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            if content_type.contains("stream=watch") {
                let body = WatchBody {
                    inner: body,
                    buf: BytesMut::new(),
                    events: watch_events(),
                    fallback,
                    done: false,
                };
                return Ok(Response::from_parts(parts, body.boxed_unsync()));
            }
            let wire = body.collect().await.map_err(Into::into)?.to_bytes();
            let json = to_json::answer(&wire).map_err(|e| fallback.failed(e))?;
            Ok(Response::from_parts(
                parts,
                Full::new(Bytes::from(json))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            ))
        })
    }
}

/// Marks a resource JSON-only when one of its answers does not read.
#[derive(Debug)]
struct Fallback {
    json_only: Arc<[AtomicBool; 4]>,
    which: usize,
}

impl Fallback {
    fn failed(&self, e: to_json::DecodeError) -> BoxError {
        if !self.json_only[self.which].swap(true, Ordering::Relaxed) {
            warn!(
                resource = RESOURCES[self.which].0,
                error = %e,
                "cannot read this resource's protobuf completely; reading it in JSON from now on"
            );
        }
        Box::new(e)
    }
}

/// A protobuf watch stream read as JSON lines: each complete event of what
/// has arrived becomes one line.
struct WatchBody<B> {
    inner: B,
    buf: BytesMut,
    events: LengthDelimitedCodec,
    fallback: Fallback,
    done: bool,
}

impl<B> Body for WatchBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let mut lines = Vec::new();
            loop {
                let frame = match this.events.decode(&mut this.buf) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => {
                        this.done = true;
                        return Poll::Ready(Some(Err(e.into())));
                    }
                };
                match to_json::watch_event(&frame) {
                    Ok(line) => {
                        lines.extend_from_slice(&line);
                        lines.push(b'\n');
                    }
                    Err(e) => {
                        // The events before it are not sent either: the
                        // reflector re-watches from the last one it read.
                        this.done = true;
                        return Poll::Ready(Some(Err(this.fallback.failed(e))));
                    }
                }
            }
            if !lines.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(lines)))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    // An event cut off by the end of the stream is dropped,
                    // as a JSON watch's partial last line is.
                    return Poll::Ready(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use http_body_util::StreamBody;
    use serde_json::{json, Value};
    use sitegrid_apimachinery::protobuf::Kind;

    fn service_json(name: &str, rv: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
            "creationTimestamp": "2026-11-28T10:00:00Z"},
            "spec": {"ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
                "clusterIP": "10.96.0.10", "type": "ClusterIP", "sessionAffinity": "None"},
            "status": {"loadBalancer": {}}})
    }

    fn message(v: &Value) -> Vec<u8> {
        protobuf::message(Kind::Service, v.to_string().as_bytes()).unwrap()
    }

    type Answer = (&'static str, Vec<Bytes>);
    /// The `Accept` header of each request an upstream got.
    type Accepts = Arc<Mutex<Vec<String>>>;

    /// A reflector client over an upstream that gives `answers` in turn
    /// (content type, body chunks); the `Accept` of each request is kept.
    fn client(
        answers: Vec<Answer>,
    ) -> (
        impl Service<Request<()>, Response = Response<JsonBody>, Error = BoxError>,
        Accepts,
    ) {
        let accepts = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        let seen = accepts.clone();
        let upstream = tower::service_fn(move |req: Request<()>| {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            seen.lock().unwrap().push(accept);
            let (content_type, chunks) = answers.lock().unwrap().next().unwrap();
            let body = StreamBody::new(futures::stream::iter(
                chunks
                    .into_iter()
                    .map(|c| Ok::<_, std::convert::Infallible>(Frame::data(c))),
            ));
            async move {
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .header(header::CONTENT_TYPE, content_type)
                        .body(body)
                        .unwrap(),
                )
            }
        });
        (ProtobufLayer::new(true, None).layer(upstream), accepts)
    }

    async fn read(
        svc: &mut impl Service<Request<()>, Response = Response<JsonBody>, Error = BoxError>,
        uri: &str,
    ) -> Result<(String, Bytes), BoxError> {
        let response = svc.call(Request::get(uri).body(()).unwrap()).await?;
        let content_type = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        Ok((
            content_type,
            response.into_body().collect().await?.to_bytes(),
        ))
    }

    #[tokio::test]
    async fn a_protobuf_list_page_is_read_as_the_json_the_api_server_would_send() {
        let items = [service_json("a", "7"), service_json("b", "9")];
        let messages: Vec<Vec<u8>> = items.iter().map(message).collect();
        let wire = protobuf::list(
            "v1",
            "ServiceList",
            &protobuf::list_meta("12", "token", Some(3)),
            messages.iter().map(Vec::as_slice),
        );
        let (mut svc, accepts) = client(vec![(protobuf::MEDIA_TYPE, vec![wire])]);
        let (content_type, body) = read(&mut svc, "https://api/api/v1/services?limit=2")
            .await
            .unwrap();
        assert_eq!(content_type, "application/json");
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            list,
            json!({"kind": "ServiceList", "apiVersion": "v1",
                "metadata": {"resourceVersion": "12", "continue": "token", "remainingItemCount": 3},
                "items": items})
        );
        assert_eq!(*accepts.lock().unwrap(), [ACCEPT]);
    }

    #[tokio::test]
    async fn a_protobuf_watch_is_read_event_by_event_across_any_chunking() {
        let events = [
            ("ADDED", service_json("a", "7")),
            ("MODIFIED", service_json("a", "8")),
        ];
        let mut wire = Vec::new();
        for (t, o) in &events {
            wire.extend_from_slice(&protobuf::watch_event(
                t,
                &protobuf::envelope("v1", "Service", &message(o)),
            ));
        }
        // Cut anywhere: inside a length prefix, inside an event.
        let chunks: Vec<Bytes> = wire.chunks(7).map(Bytes::copy_from_slice).collect();
        let (mut svc, _) = client(vec![(protobuf::WATCH_MEDIA_TYPE, chunks)]);
        let (_, body) = read(
            &mut svc,
            "https://api/api/v1/services?watch=true&resourceVersion=6",
        )
        .await
        .unwrap();
        let lines: Vec<Value> = std::str::from_utf8(&body)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let expected: Vec<Value> = events
            .iter()
            .map(|(t, o)| {
                let mut object = json!({"kind": "Service", "apiVersion": "v1"});
                object
                    .as_object_mut()
                    .unwrap()
                    .extend(o.as_object().unwrap().clone());
                json!({"type": t, "object": object})
            })
            .collect();
        assert_eq!(lines, expected);
    }

    #[tokio::test]
    async fn an_answer_that_does_not_read_completely_fails_and_the_resource_goes_json() {
        // A Service whose spec carries field 16 (1.20's topologyKeys), which
        // this build's message does not have.
        let mut spec = Vec::new();
        prost::encoding::string::encode(16, &"location".to_owned(), &mut spec);
        let mut service = Vec::new();
        prost::encoding::bytes::encode(2, &spec, &mut service);
        let wire = protobuf::list(
            "v1",
            "ServiceList",
            &protobuf::list_meta("12", "", None),
            [service.as_slice()].into_iter(),
        );
        let json_list = Bytes::from_static(br#"{"kind":"ServiceList","items":[]}"#);
        let (mut svc, accepts) = client(vec![
            (protobuf::MEDIA_TYPE, vec![wire]),
            ("application/json", vec![json_list.clone()]),
            ("application/json", vec![]),
        ]);
        let err = read(&mut svc, "https://api/api/v1/services")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no place for"), "{err}");
        let (_, body) = read(&mut svc, "https://api/api/v1/services").await.unwrap();
        assert_eq!(body, json_list, "JSON passes as it came");
        // Other resources still offer protobuf.
        read(&mut svc, "https://api/api/v1/endpoints")
            .await
            .unwrap();
        let accepts = accepts.lock().unwrap();
        assert_eq!(accepts[0], ACCEPT);
        assert_eq!(accepts[1], "", "the Services are read in JSON now");
        assert_eq!(accepts[2], ACCEPT);
    }

    #[test]
    fn only_the_cached_collections_are_read_in_protobuf() {
        let get = |uri: &str| Request::get(uri).body(()).unwrap();
        assert_eq!(
            resource(&get("https://api:6443/api/v1/services?limit=30")),
            Some(0)
        );
        assert_eq!(
            resource(&get(
                "https://h/k8s/clusters/c-1/apis/discovery.k8s.io/v1/endpointslices?watch=true"
            )),
            Some(2)
        );
        assert_eq!(resource(&get("https://api:6443/api/v1/nodes")), None);
        assert_eq!(
            resource(&get("https://api:6443/api/v1/namespaces/a/services/b")),
            None
        );
        let post = Request::post("https://api:6443/api/v1/services")
            .body(())
            .unwrap();
        assert_eq!(resource(&post), None);
    }
}
