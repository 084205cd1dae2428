//! A model of kube-proxy 1.20 as a reader, with its defaults
//! (EndpointSlices on, ServiceTopology off; `../shared/reference/
//! kube-proxy-1.20-requests.md`): it GETs its own Node once, then lists
//! (`resourceVersion=0&limit=500`) and watches Services and EndpointSlices
//! with kube-proxy's label selector, as client-go's reflector does:
//! re-watching from the last version seen when a stream ends, relisting
//! after a 410. It reads only each frame's type and resourceVersion and
//! counts what it received; the simulation runs one per simulated node.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use tokio::task::JoinHandle;

use crate::{
    report::{
        frame::{ListBody, WatchFrame},
        probe::{next_data, Frames},
    },
    HttpClient,
};

/// kube-proxy's label selector on Services and EndpointSlices, encoded as it sends it.
pub const LABEL_SELECTOR: &str =
    "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name";

/// The collections it lists and watches.
const STREAMS: [&str; 2] = [
    "/api/v1/services",
    "/apis/discovery.k8s.io/v1/endpointslices",
];

/// Pause before retrying a failed request.
const RETRY: Duration = Duration::from_millis(200);

/// What one stream has received so far.
#[derive(Debug, Default)]
struct Counters {
    bytes: AtomicU64,
    events: AtomicU64,
    relists: AtomicU64,
    watching: AtomicBool,
}

/// What a model kube-proxy received, summed over its streams: body bytes
/// of lists, the Node GET and watches; watch events other than bookmarks;
/// lists made after the first (410s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Body bytes.
    pub bytes: u64,
    /// ADDED, MODIFIED and DELETED events.
    pub events: u64,
    /// Relists after a 410.
    pub relists: u64,
}

impl std::ops::Sub for Received {
    type Output = Received;
    fn sub(self, rhs: Received) -> Received {
        Received {
            bytes: self.bytes.saturating_sub(rhs.bytes),
            events: self.events.saturating_sub(rhs.events),
            relists: self.relists.saturating_sub(rhs.relists),
        }
    }
}

impl std::ops::Add for Received {
    type Output = Received;
    fn add(self, rhs: Received) -> Received {
        Received {
            bytes: self.bytes + rhs.bytes,
            events: self.events + rhs.events,
            relists: self.relists + rhs.relists,
        }
    }
}

/// One model kube-proxy; its requests stop when it is dropped.
#[derive(Debug)]
pub struct ModelKubeProxy {
    streams: Arc<[Counters; 2]>,
    node: Arc<Counters>,
    tasks: Vec<JoinHandle<()>>,
}

impl ModelKubeProxy {
    /// Starts reading from `addr` (the API server or a node proxy) as node `node`.
    pub fn start(http: &HttpClient, addr: SocketAddr, node: &str) -> ModelKubeProxy {
        let streams: Arc<[Counters; 2]> = Arc::default();
        let node_counters = Arc::new(Counters::default());
        let mut tasks = Vec::with_capacity(3);
        let get_node = {
            let (http, c) = (http.clone(), Arc::clone(&node_counters));
            let url = format!("http://{addr}/api/v1/nodes/{node}");
            tokio::spawn(async move {
                loop {
                    if let Ok(n) = get_ok(&http, &url).await {
                        c.bytes.fetch_add(n.len() as u64, Ordering::Relaxed);
                        c.watching.store(true, Ordering::Relaxed);
                        return;
                    }
                    tokio::time::sleep(RETRY).await;
                }
            })
        };
        tasks.push(get_node);
        for (i, path) in STREAMS.iter().enumerate() {
            let (http, streams) = (http.clone(), Arc::clone(&streams));
            tasks.push(tokio::spawn(async move {
                reflect(&http, addr, path, &streams[i]).await;
            }));
        }
        ModelKubeProxy {
            streams,
            node: node_counters,
            tasks,
        }
    }

    /// Whether it has its Node and watches both collections.
    pub fn synced(&self) -> bool {
        self.node.watching.load(Ordering::Relaxed)
            && self
                .streams
                .iter()
                .all(|c| c.watching.load(Ordering::Relaxed))
    }

    /// What it received so far.
    pub fn received(&self) -> Received {
        self.streams
            .iter()
            .chain(std::iter::once(&*self.node))
            .map(|c| Received {
                bytes: c.bytes.load(Ordering::Relaxed),
                events: c.events.load(Ordering::Relaxed),
                relists: c.relists.load(Ordering::Relaxed),
            })
            .fold(Received::default(), |a, b| a + b)
    }
}

impl Drop for ModelKubeProxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The reflector loop of one collection, until aborted.
async fn reflect(http: &HttpClient, addr: SocketAddr, path: &str, c: &Counters) {
    let mut from: Option<String> = None;
    loop {
        let Some(rv) = from.take() else {
            let url = format!("http://{addr}{path}?{LABEL_SELECTOR}&limit=500&resourceVersion=0");
            match get_ok(http, &url).await.and_then(|body| {
                c.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                let list: ListBody = serde_json::from_slice(&body).context("a list")?;
                Ok(list.metadata.resource_version)
            }) {
                Ok(rv) => from = Some(rv),
                Err(_) => tokio::time::sleep(RETRY).await,
            }
            continue;
        };
        from = watch(http, addr, path, c, rv).await;
    }
}

/// One watch from `rv` until its stream ends; the version to watch from
/// next, `None` to relist.
async fn watch(
    http: &HttpClient,
    addr: SocketAddr,
    path: &str,
    c: &Counters,
    rv: String,
) -> Option<String> {
    let url = format!(
        "http://{addr}{path}?allowWatchBookmarks=true&{LABEL_SELECTOR}&resourceVersion={rv}&timeoutSeconds=3600&watch=true"
    );
    let Ok(req) = get(&url) else {
        return None;
    };
    let resp = match http.request(req).await {
        Ok(resp) if resp.status() == 200 => resp,
        Ok(resp) if resp.status() == 410 => {
            c.relists.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        _ => {
            tokio::time::sleep(RETRY).await;
            return Some(rv);
        }
    };
    c.watching.store(true, Ordering::Relaxed);
    let mut body = resp.into_body();
    let mut lines = Frames::default();
    let mut rv = rv;
    while let Some(chunk) = next_data(&mut body).await {
        c.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        lines.push(&chunk);
        while let Some(line) = lines.next_line() {
            let Ok(frame) = serde_json::from_slice::<WatchFrame>(&line) else {
                continue;
            };
            match frame.kind.as_str() {
                "ERROR" => {
                    c.relists.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                "BOOKMARK" => rv = frame.object.metadata.resource_version,
                _ => {
                    c.events.fetch_add(1, Ordering::Relaxed);
                    rv = frame.object.metadata.resource_version;
                }
            }
        }
    }
    Some(rv)
}

/// The body of a GET of `url` that answered 200.
async fn get_ok(http: &HttpClient, url: &str) -> Result<Bytes> {
    let resp = http.request(get(url)?).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    if status != 200 {
        return Err(anyhow!("GET {url}: {status}"));
    }
    Ok(body)
}

/// A GET of `url`.
fn get(url: &str) -> Result<hyper::Request<Empty<Bytes>>> {
    Ok(hyper::Request::get(url).body(Empty::new())?)
}
