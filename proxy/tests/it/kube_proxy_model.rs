//! A model of kube-proxy's informers, as kube-proxy 1.35, 1.33 and 1.29
//! start them (proxy/README.md, "What kube-proxy 1.29–1.35 asks"):
//! protobuf Accept, client-go 1.35's WatchList first (falling back to
//! LIST and WATCH when it is refused), the field-selected Node, Services
//! without headless ones, ServiceCIDRs. Used by `kube_proxy_start`.

use std::{collections::BTreeSet, time::Duration};

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::Value;

/// kube-proxy's Accept (its ContentType, then client-go's `*/*`).
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, */*";
/// Its Service and EndpointSlice label selector (`LS`), URL-encoded.
pub(crate) const LS: &str = "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";
/// client-go's watch timeout as the reflector writes it.
const TIMEOUT: &str = "timeout=7m3s&timeoutSeconds=423";
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// The kube-proxy release modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// WatchList first; Services field-selected; ServiceCIDRs v1.
    V1_35,
    /// LIST + WATCH; GET of its Node first; Services field-selected; ServiceCIDRs v1.
    V1_33,
    /// LIST + WATCH; GET of its Node first; no ServiceCIDRs.
    V1_29,
}

/// One informer: what it lists and watches.
pub(crate) struct Informer {
    name: &'static str,
    path: &'static str,
    query: String,
}

pub(crate) fn informers(release: Release, node: &str) -> Vec<Informer> {
    let services = match release {
        Release::V1_29 => LS.to_owned(),
        _ => format!("fieldSelector=spec.clusterIP%21%3DNone&{LS}"),
    };
    let mut all = vec![
        Informer {
            name: "node",
            path: "/api/v1/nodes",
            query: format!("fieldSelector=metadata.name%3D{node}"),
        },
        Informer {
            name: "services",
            path: "/api/v1/services",
            query: services,
        },
        Informer {
            name: "endpointslices",
            path: "/apis/discovery.k8s.io/v1/endpointslices",
            query: LS.to_owned(),
        },
    ];
    if release != Release::V1_29 {
        all.push(Informer {
            name: "servicecidrs",
            path: "/apis/networking.k8s.io/v1/servicecidrs",
            query: LS.to_owned(),
        });
    }
    all
}

/// The modelled kube-proxy's connection to sitegrid-proxy.
pub(crate) struct KubeProxy {
    base: String,
    token: Option<&'static str>,
    pub(crate) client: Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
}

impl KubeProxy {
    pub(crate) fn new(base: &str, token: Option<&'static str>) -> KubeProxy {
        KubeProxy {
            base: base.to_owned(),
            token,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub(crate) async fn get(&self, path_and_query: &str) -> hyper::Response<Incoming> {
        let mut req = hyper::Request::get(format!("{}{path_and_query}", self.base))
            .header("accept", ACCEPT)
            .header(
                "user-agent",
                "kube-proxy/v1.35.0 (linux/amd64) kubernetes/model",
            );
        if let Some(token) = self.token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = req.body(Empty::new()).unwrap();
        tokio::time::timeout(WAIT, self.client.request(req))
            .await
            .expect("an answer in time")
            .expect("the proxy answers")
    }

    /// Starts every informer as `release` does and waits for each to sync.
    pub(crate) async fn start(&self, release: Release, node: &str) -> Vec<Synced> {
        if release != Release::V1_35 {
            // getNodeIPs: a GET of its Node before anything else.
            let resp = self.get(&format!("/api/v1/nodes/{node}")).await;
            assert_eq!(resp.status(), 200, "GET its Node");
        }
        let mut synced = Vec::new();
        for informer in informers(release, node) {
            let s = match release {
                Release::V1_35 => self.watch_list(&informer).await,
                _ => None,
            };
            let s = match s {
                Some(s) => s,
                None => self.list_and_watch(&informer).await,
            };
            synced.push(s);
        }
        synced
    }

    /// client-go 1.35's first try: a watch-list request; `None` when it is
    /// refused (client-go then lists).
    async fn watch_list(&self, informer: &Informer) -> Option<Synced> {
        let uri = format!(
            "{}?{}&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&{TIMEOUT}&watch=true",
            informer.path, informer.query
        );
        let resp = self.get(&uri).await;
        if resp.status() != 200 {
            return None;
        }
        let mut stream = Stream::of(resp);
        let mut names = BTreeSet::new();
        loop {
            let e = stream
                .next()
                .await
                .unwrap_or_else(|| panic!("{}: the initial events end", informer.name));
            match e.kind.as_str() {
                "ADDED" => {
                    names.insert(e.name);
                }
                "BOOKMARK" if e.initial_events_end => {
                    return Some(Synced {
                        informer: informer.name,
                        watch_list: true,
                        names,
                        stream,
                    })
                }
                "BOOKMARK" => {}
                other => panic!("{}: {other} among the initial events", informer.name),
            }
        }
    }

    /// LIST (page of 500 from the watch cache), then WATCH from its version.
    async fn list_and_watch(&self, informer: &Informer) -> Synced {
        let uri = format!(
            "{}?{}&limit=500&resourceVersion=0",
            informer.path, informer.query
        );
        let resp = self.get(&uri).await;
        assert_eq!(resp.status(), 200, "{}: LIST", informer.name);
        let protobuf = is_protobuf(&resp);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let (names, rv) = list_names(&body, protobuf);
        let uri = format!(
            "{}?{}&allowWatchBookmarks=true&resourceVersion={rv}&{TIMEOUT}&watch=true",
            informer.path, informer.query
        );
        let resp = self.get(&uri).await;
        assert_eq!(resp.status(), 200, "{}: WATCH", informer.name);
        Synced {
            informer: informer.name,
            watch_list: false,
            names,
            stream: Stream::of(resp),
        }
    }
}

/// An informer that has synced, and its open watch.
pub(crate) struct Synced {
    pub(crate) informer: &'static str,
    /// Synced by a watch-list request (else LIST + WATCH).
    pub(crate) watch_list: bool,
    pub(crate) names: BTreeSet<String>,
    stream: Stream,
}

impl Synced {
    /// The next event other than a BOOKMARK.
    pub(crate) async fn next_change(&mut self) -> Event {
        loop {
            let e = tokio::time::timeout(WAIT, self.stream.next())
                .await
                .unwrap_or_else(|_| panic!("{}: a change in time", self.informer))
                .unwrap_or_else(|| panic!("{}: the watch stays open", self.informer));
            if e.kind != "BOOKMARK" {
                return e;
            }
        }
    }
}

fn is_protobuf(resp: &hyper::Response<Incoming>) -> bool {
    resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/vnd.kubernetes.protobuf")
}

/// Names and resourceVersion of a LIST in protobuf or JSON.
fn list_names(body: &[u8], protobuf: bool) -> (BTreeSet<String>, String) {
    if protobuf {
        assert_eq!(&body[..4], b"k8s\0");
        let u = Unknown::decode(&body[4..]).unwrap();
        let list = meta::PartialObjectMetadataList::decode(u.raw.as_deref().unwrap()).unwrap();
        let names = list
            .items
            .iter()
            .map(|i| i.metadata.clone().unwrap().name.unwrap())
            .collect();
        let rv = list.metadata.unwrap().resource_version.unwrap();
        return (names, rv);
    }
    let list: Value = serde_json::from_slice(body).unwrap();
    let names = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    (names, rv.to_owned())
}

/// One watch event as an informer sees it.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) kind: String,
    pub(crate) name: String,
    initial_events_end: bool,
    /// The object's addresses, for EndpointSlices (JSON only).
    pub(crate) raw: Bytes,
}

/// A watch stream in protobuf (length-prefixed) or JSON (one per line).
struct Stream {
    body: Incoming,
    buf: Vec<u8>,
    protobuf: bool,
}

impl Stream {
    fn of(resp: hyper::Response<Incoming>) -> Stream {
        Stream {
            protobuf: is_protobuf(&resp),
            body: resp.into_body(),
            buf: Vec::new(),
        }
    }

    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.parse() {
                return Some(e);
            }
            match self.body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                _ => return None,
            }
        }
    }

    fn parse(&mut self) -> Option<Event> {
        if self.protobuf {
            if self.buf.len() < 4 {
                return None;
            }
            let len = (&self.buf[..4]).get_u32() as usize;
            if self.buf.len() < 4 + len {
                return None;
            }
            let frame: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
            let event = meta::WatchEvent::decode(frame.as_slice()).unwrap();
            let raw = event.object.unwrap().raw.unwrap();
            assert_eq!(&raw[..4], b"k8s\0");
            let u = Unknown::decode(&raw[4..]).unwrap();
            let object = u.raw.unwrap_or_default();
            let m = meta::PartialObjectMetadata::decode(object.as_slice())
                .unwrap()
                .metadata
                .unwrap_or_default();
            return Some(Event {
                kind: event.r#type.unwrap(),
                initial_events_end: m.annotations.get("k8s.io/initial-events-end")
                    == Some(&"true".to_owned()),
                name: m.name.unwrap_or_default(),
                raw: Bytes::from(object),
            });
        }
        let end = self.buf.iter().position(|b| *b == b'\n')?;
        let line: Vec<u8> = self.buf.drain(..=end).collect();
        let e: Value = serde_json::from_slice(&line).unwrap();
        let m = &e["object"]["metadata"];
        Some(Event {
            kind: e["type"].as_str().unwrap().to_owned(),
            name: m["name"].as_str().unwrap_or_default().to_owned(),
            initial_events_end: m["annotations"]["k8s.io/initial-events-end"] == "true",
            raw: Bytes::from(serde_json::to_vec(&e["object"]).unwrap()),
        })
    }
}
