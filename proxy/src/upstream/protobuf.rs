//! Reading Services, Endpoints and EndpointSlices from upstream in
//! protobuf, about half the bytes of JSON (what kube-proxy reads too): the
//! reflectors' requests for them offer protobuf first, and an answer in
//! protobuf is handed to kube-client as JSON whose objects are carried
//! (`sitegrid_apimachinery::protobuf::to_json`): each a string holding the
//! object's protobuf, decoded once, into the JSON value the API server
//! would have sent, where kube-client builds the proxy's `UpstreamObject`
//! (a list whole, a watch event by event). No object is written as JSON and
//! parsed back. An upstream that answers JSON (a CRD-backed server, an old
//! proxy) is read as it is.
//!
//! A resource whose objects do not decode completely (fields this build's
//! messages do not know: a newer API server's) is read in JSON from then
//! on, until the process restarts: the reflector that finds such an object
//! says so ([`ProtobufLayer::unreadable`]) and lists that resource again,
//! in JSON, before it hands on anything after it, so nothing is lost. An
//! answer whose envelope, list or event framing does not read fails, and
//! the reflector lists or re-watches from its last version, in JSON.
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
use sitegrid_cache::{ApiVersion, Cache, ResourceKind};
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

    /// An object of `kind` read from protobuf (EndpointSlices in `version`)
    /// did not decode completely, for the reason `why`: that resource is
    /// read in JSON from now on. True if it was read in protobuf until now:
    /// then the reflector lists it again, and hands on nothing of the
    /// stream it found the object in.
    pub fn unreadable(&self, kind: ResourceKind, version: ApiVersion, why: &str) -> bool {
        let which = match kind {
            ResourceKind::Services => 0,
            ResourceKind::Endpoints => 1,
            ResourceKind::EndpointSlices if version == ApiVersion::V1 => 2,
            ResourceKind::EndpointSlices => 3,
            _ => return false,
        };
        self.enabled && go_json(&self.json_only, which, &why)
    }
}

/// Marks `RESOURCES[which]` JSON-only, logging why the first time; true if
/// it was not before.
fn go_json(json_only: &[AtomicBool; 4], which: usize, why: &dyn std::fmt::Display) -> bool {
    let first = !json_only[which].swap(true, Ordering::Relaxed);
    if first {
        warn!(
            resource = RESOURCES[which].0,
            error = %why,
            "cannot read this resource's protobuf completely; reading it in JSON from now on"
        );
    }
    first
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
            let json = to_json::answer_carried(&wire).map_err(|e| fallback.failed(e))?;
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
        go_json(&self.json_only, self.which, &e);
        Box::new(e)
    }
}

/// A protobuf watch stream read as JSON lines: each complete event of what
/// has arrived becomes one line, its object carried.
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
                match to_json::watch_event_carried(frame.freeze(), &mut lines) {
                    Ok(()) => lines.push(b'\n'),
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
    use kube::core::{ObjectList, WatchEvent};
    use serde_json::{json, Value};
    use sitegrid_apimachinery::protobuf::Kind;
    use sitegrid_cache::{UpstreamBody, UpstreamObject};

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

    /// The `Accept` header of `req` ("" without one).
    fn accept_of<B>(req: &Request<B>) -> String {
        req.headers()
            .get(header::ACCEPT)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
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
            seen.lock().unwrap().push(accept_of(&req));
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
        let list: ObjectList<UpstreamObject> = serde_json::from_slice(&body).unwrap();
        assert_eq!(list.metadata.resource_version.as_deref(), Some("12"));
        assert_eq!(list.metadata.continue_.as_deref(), Some("token"));
        assert_eq!(list.metadata.remaining_item_count, Some(3));
        let read: Vec<(String, Value)> = list
            .items
            .iter()
            .map(|o| (o.upstream_rv().to_owned(), decoded(o)))
            .collect();
        let expected: Vec<(String, Value)> = items
            .iter()
            .map(|i| {
                (
                    i["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    typed("Service", i),
                )
            })
            .collect();
        assert_eq!(read, expected);
        assert_eq!(*accepts.lock().unwrap(), [ACCEPT]);
    }

    /// `o` as the JSON value it was decoded into from protobuf.
    fn decoded(o: &UpstreamObject) -> Value {
        match &o.body {
            UpstreamBody::Protobuf { .. }
            | UpstreamBody::ProtobufSlice { .. }
            | UpstreamBody::ProtobufListed(_)
            | UpstreamBody::ProtobufText(_) => o.value().unwrap(),
            other => panic!("{} was not decoded from protobuf: {other:?}", o.key()),
        }
    }

    /// `o` as a watch event's object: with its `kind` and `apiVersion`.
    fn typed(kind: &str, o: &Value) -> Value {
        let mut object = json!({"kind": kind, "apiVersion": "v1"});
        object
            .as_object_mut()
            .unwrap()
            .extend(o.as_object().unwrap().clone());
        object
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
        let read: Vec<(String, Value)> = std::str::from_utf8(&body)
            .unwrap()
            .lines()
            .map(|l| match serde_json::from_str(l).unwrap() {
                WatchEvent::Added(o) => ("ADDED".to_owned(), decoded(&o)),
                WatchEvent::Modified(o) => ("MODIFIED".to_owned(), decoded(&o)),
                other => panic!("{other:?}"),
            })
            .collect();
        let expected: Vec<(String, Value)> = events
            .iter()
            .map(|(t, o)| (t.to_string(), typed("Service", o)))
            .collect();
        assert_eq!(read, expected);
    }

    #[tokio::test]
    async fn an_answer_that_does_not_read_fails_and_the_resource_goes_json() {
        let broken = Bytes::from_static(b"k8s\0\xff\xff\xff");
        let json_list = Bytes::from_static(br#"{"kind":"ServiceList","items":[]}"#);
        let (mut svc, accepts) = client(vec![
            (protobuf::MEDIA_TYPE, vec![broken]),
            ("application/json", vec![json_list.clone()]),
            ("application/json", vec![]),
        ]);
        let err = read(&mut svc, "https://api/api/v1/services")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("malformed"), "{err}");
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

    /// A Service whose spec carries field 16 (1.20's `topologyKeys`),
    /// which this build's message does not have.
    fn service_with_topology_keys(name: &str) -> Vec<u8> {
        let mut spec = Vec::new();
        prost::encoding::string::encode(16, &"location".to_owned(), &mut spec);
        let mut meta = Vec::new();
        prost::encoding::string::encode(1, &name.to_owned(), &mut meta);
        prost::encoding::string::encode(3, &"default".to_owned(), &mut meta);
        prost::encoding::string::encode(6, &"8".to_owned(), &mut meta);
        let mut service = Vec::new();
        prost::encoding::bytes::encode(1, &meta, &mut service);
        prost::encoding::bytes::encode(2, &spec, &mut service);
        service
    }

    #[tokio::test]
    async fn an_object_that_does_not_decode_completely_is_listed_again_in_json_and_nothing_after_it_handed_on(
    ) {
        use http_body_util::combinators::UnsyncBoxBody;
        use sitegrid_cache::{CacheConfig, WriterInput};
        use std::convert::Infallible;

        let messages = [
            message(&service_json("a", "7")),
            service_with_topology_keys("b"),
            message(&service_json("c", "9")),
        ];
        let wire = protobuf::list(
            "v1",
            "ServiceList",
            &protobuf::list_meta("12", "", None),
            messages.iter().map(Vec::as_slice),
        );
        let mut b = service_json("b", "8");
        b["spec"]["topologyKeys"] = json!(["location"]);
        let json_list = json!({"kind": "ServiceList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "12"},
            "items": [service_json("a", "7"), b, service_json("c", "9")]});
        let accepts: Accepts = Arc::default();
        let seen = accepts.clone();
        let lists = Arc::new(Mutex::new(
            vec![
                (protobuf::MEDIA_TYPE, wire),
                ("application/json", Bytes::from(json_list.to_string())),
            ]
            .into_iter(),
        ));
        // Lists in turn; every watch stays open, silent.
        let upstream = tower::service_fn(move |req: Request<kube::client::Body>| {
            seen.lock().unwrap().push(accept_of(&req));
            let watch = req.uri().query().unwrap_or("").contains("watch=true");
            let (content_type, body): (&str, UnsyncBoxBody<Bytes, Infallible>) = if watch {
                let never = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
                ("application/json", StreamBody::new(never).boxed_unsync())
            } else {
                let (content_type, wire) = lists.lock().unwrap().next().expect("two lists");
                (content_type, Full::new(wire).boxed_unsync())
            };
            async move {
                Ok::<_, Infallible>(
                    Response::builder()
                        .header(header::CONTENT_TYPE, content_type)
                        .body(body)
                        .unwrap(),
                )
            }
        });
        let layer = ProtobufLayer::new(true, None);
        let client = kube::Client::new(layer.layer(upstream), "default");
        let (cache, _slot) = sitegrid_cache::new(CacheConfig::default());
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let reflector = tokio::spawn(async move {
            crate::upstream::sync::reflect(
                client,
                &layer,
                ResourceKind::Services,
                ApiVersion::V1,
                tx,
                cache,
            )
            .await
        });
        let mut handed = Vec::new();
        while handed.last().map(String::as_str) != Some("InitDone") {
            let Some(WriterInput::Upstream((_, event))) = rx.recv().await else {
                panic!("the reflector stopped after {handed:?}");
            };
            let read = |o: &UpstreamObject| match o.body {
                UpstreamBody::Json(_) => format!("{} json", o.key()),
                UpstreamBody::Protobuf { .. }
                | UpstreamBody::ProtobufSlice { .. }
                | UpstreamBody::ProtobufListed(_)
                | UpstreamBody::ProtobufText(_) => {
                    format!("{} protobuf", o.key())
                }
                UpstreamBody::UnreadableProtobuf => format!("{} unreadable", o.key()),
            };
            handed.push(match event {
                kube::runtime::watcher::Event::Init => "Init".to_owned(),
                kube::runtime::watcher::Event::InitApply(o) => format!("InitApply {}", read(&o)),
                kube::runtime::watcher::Event::InitDone => "InitDone".to_owned(),
                other => format!("{other:?}"),
            });
        }
        reflector.abort();
        assert_eq!(
            handed,
            [
                "Init",
                "InitApply default/a protobuf",
                // b did not decode: nothing more of that list; all of it again.
                "Init",
                "InitApply default/a json",
                "InitApply default/b json",
                "InitApply default/c json",
                "InitDone"
            ]
        );
        let accepts = accepts.lock().unwrap();
        assert_eq!(accepts[0], ACCEPT);
        assert!(
            !accepts[1].contains("protobuf"),
            "the second list is read in JSON: {accepts:?}"
        );
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
