//! The site's share of local truth. While the API server is unreachable,
//! a node proxy serves its own pods' new addresses and readiness, as its
//! kubelet reports them after an offline reboot (`cache/src/writer/local.rs`).
//! With a site proxy at the site (placements 2 and 4, `docs/placements.md`)
//! the other nodes read their endpoints from the site proxy, not from that
//! node: this layer carries each node's reports to the site proxy, which
//! serves them to every node of the site, so that every kube-proxy of the
//! site stops sending traffic to the rebooted node's old addresses.
//!
//! - **Sent by the node proxy** whose kubelet reads the API server directly
//!   (`--kubelet-kubeconfig`; its `--kubeconfig` names the site proxy):
//!   the node's reports, whole, `PUT` to
//!   `/sitegrid/v1/nodes/<node>/localpods` on the site proxy, with the
//!   kubelet's own certificate, when they change, and again every
//!   [`RESEND`] while there are any (a site proxy that restarted has them
//!   back); a failed send is tried again, 1 s doubling to 10 s.
//! - **Taken by the site proxy** from that node's certificate only
//!   (`system:node:<node>` in `system:nodes`, verified against `--ca-file`,
//!   which then holds the cluster's CA too), each report's node set to the
//!   sender's: a node moves only the endpoints that name it. Taken only
//!   while the site proxy itself cannot reach the API server (`409`
//!   otherwise: the API server's view is served).
//! - **The API server wins when it is back**: the site proxy lets every
//!   report go once it reaches the API server again, as a node proxy does;
//!   its views are computed again from what the API server sent.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sitegrid_apimachinery::Status;
use sitegrid_cache::LocalPod;
use sitegrid_nodecache::NodeCache;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    http::{
        caller::{node_user, NODES_GROUP},
        response, Body, Caller,
    },
    upstream::{health::Health, kubelet::KubeletCredentials},
};

/// The path prefix of the reports (no Kubernetes API path starts so).
pub const PREFIX: &str = "/sitegrid/v1/nodes/";
/// The path suffix after the node's name.
const SUFFIX: &str = "/localpods";
/// How often reports are sent again while there are any.
pub const RESEND: Duration = Duration::from_secs(30);
/// How soon reports the site proxy did not take (it reached the API
/// server) are sent again.
const SITE_ONLINE_RETRY: Duration = Duration::from_secs(2);
/// The largest report taken (about 5,000 pods).
const MAX_BODY: usize = 1 << 20;

/// What is sent: one node's reports, whole.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Reports {
    pods: Vec<sitegrid_nodecache::LocalPod>,
}

/// The node a report path names (`/sitegrid/v1/nodes/<node>/localpods`).
pub fn node_of(path: &str) -> Option<&str> {
    let node = path.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    (!node.is_empty() && !node.contains('/')).then_some(node)
}

/// The site proxy's side: every node's reports, merged for the writer.
#[derive(Clone)]
pub struct SiteReports {
    inner: Arc<Inner>,
}

struct Inner {
    by_node: Mutex<BTreeMap<String, Vec<LocalPod>>>,
    merged: watch::Sender<Vec<LocalPod>>,
    health: Health,
}

impl std::fmt::Debug for SiteReports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteReports")
            .field("nodes", &self.inner.by_node.lock().len())
            .finish()
    }
}

impl SiteReports {
    /// Reports taken while `health` says the API server is unreachable,
    /// and the receiver the served-state cache's writer applies them from.
    pub fn new(health: Health) -> (SiteReports, watch::Receiver<Vec<LocalPod>>) {
        let (merged, rx) = watch::channel(Vec::new());
        let reports = SiteReports {
            inner: Arc::new(Inner {
                by_node: Mutex::new(BTreeMap::new()),
                merged,
                health,
            }),
        };
        (reports, rx)
    }

    /// The site proxy's own reachability of the API server.
    pub fn health(&self) -> &Health {
        &self.inner.health
    }

    /// Lets every report go each time the API server is reachable again.
    pub async fn let_go_when_online(self) {
        loop {
            self.inner.health.online().await;
            let had = std::mem::take(&mut *self.inner.by_node.lock());
            if !had.is_empty() {
                info!(
                    nodes = had.len(),
                    "the API server is reachable: the nodes' offline reports are let go"
                );
                self.publish();
            }
            self.inner.health.offline().await;
        }
    }

    /// Answers a report request for `node` from `caller`.
    pub async fn answer(
        &self,
        node: &str,
        caller: Option<&Caller>,
        req: Request<Body>,
    ) -> Response<Body> {
        if req.method() != Method::PUT {
            return response::status(&Status::method_not_allowed(format!(
                "{} {}: only PUT",
                req.method(),
                req.uri().path()
            )));
        }
        let from_the_node = matches!(caller, Some(Caller::Certificate(s))
            if s.user == node_user(node) && s.groups.iter().any(|g| g == NODES_GROUP));
        if !from_the_node {
            return response::status(&Status::failure(403, Some("Forbidden"), format!(
                "the offline reports of node {node} are taken from its kubelet's certificate only ({} in {NODES_GROUP})",
                node_user(node)
            )));
        }
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                return response::status(&Status::bad_request(format!(
                    "the reports could not be read (at most {MAX_BODY} bytes): {e}"
                )))
            }
        };
        let reports: Reports = match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => {
                return response::status(&Status::bad_request(format!(
                    "the reports are not {{\"pods\": [...]}}: {e}"
                )))
            }
        };
        if !self.inner.health.is_offline() {
            return response::status(&Status::failure(409, Some("Conflict"), format!(
                "the site proxy reaches the API server: its view is served, not node {node}'s reports"
            )));
        }
        let pods: Vec<LocalPod> = reports
            .pods
            .into_iter()
            .map(|p| LocalPod {
                uid: p.uid,
                node: node.to_owned(),
                ips: p.ips,
                ready: p.ready,
                running: p.running,
            })
            .collect();
        let count = pods.len();
        let changed = {
            let mut by_node = self.inner.by_node.lock();
            let old = if pods.is_empty() {
                by_node.remove(node)
            } else {
                by_node.insert(node.to_owned(), pods.clone())
            };
            old.unwrap_or_default() != pods
        };
        if changed {
            debug!(%node, pods = count, "a node's offline reports taken");
            self.publish();
        }
        Response::new(Body::new(Full::new(Bytes::from(format!(
            "{{\"node\":{},\"pods\":{count}}}",
            serde_json::Value::from(node)
        )))))
    }

    fn publish(&self) {
        let merged = self
            .inner
            .by_node
            .lock()
            .values()
            .flatten()
            .cloned()
            .collect();
        self.inner.merged.send_replace(merged);
    }
}

/// The node proxy's side: sends the node cache's reports to the site proxy
/// as the kubelet (`to_site` holds the kubelet's certificate, for the site
/// proxy's address) until `shutdown`.
pub async fn send_reports(
    cache: NodeCache,
    to_site: Arc<KubeletCredentials>,
    node: Arc<str>,
    shutdown: CancellationToken,
) {
    let mut reports = cache.local_pods();
    let mut sent: Option<Vec<sitegrid_nodecache::LocalPod>> = None;
    let mut retry = Duration::from_secs(1);
    let mut failing: Option<String> = None;
    loop {
        let current = reports.borrow_and_update().clone();
        // Nothing to say until there is a report (or one to take back).
        let wait = if sent.is_none() && current.is_empty() {
            None
        } else {
            match send(&to_site, &node, &current).await {
                Ok(taken) => {
                    if failing.take().is_some() {
                        info!("the offline reports reach the site proxy again");
                    }
                    retry = Duration::from_secs(1);
                    match (taken, current.is_empty()) {
                        // Nothing to take back: a site proxy that reaches
                        // the API server holds no report.
                        (_, true) => {
                            sent = Some(current);
                            None
                        }
                        (true, false) => {
                            sent = Some(current);
                            Some(RESEND)
                        }
                        // The site proxy still reaches the API server (its
                        // prober may not have seen the WAN go yet): again soon.
                        (false, false) => Some(SITE_ONLINE_RETRY),
                    }
                }
                Err(e) => {
                    if failing.as_ref() != Some(&e) {
                        warn!(error = %e, "the offline reports could not be sent to the site proxy; trying again");
                        failing = Some(e);
                    }
                    let wait = retry;
                    retry = (retry * 2).min(Duration::from_secs(10));
                    Some(wait)
                }
            }
        };
        let timer = async {
            match wait {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = reports.changed() => if changed.is_err() { return },
            () = timer => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// One send: whether the reports were taken (`false`: `409`, the site
/// proxy reaches the API server and serves its view).
async fn send(
    to_site: &KubeletCredentials,
    node: &str,
    pods: &[sitegrid_nodecache::LocalPod],
) -> Result<bool, String> {
    use tower::ServiceExt;
    let upstream = to_site
        .upstream()
        .ok_or("the kubelet's client certificate is not loaded")?;
    let body = serde_json::to_vec(&Reports {
        pods: pods.to_vec(),
    })
    .map_err(|e| e.to_string())?;
    let req = Request::put(format!("{PREFIX}{node}{SUFFIX}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::new(Full::new(Bytes::from(body))))
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(Duration::from_secs(10), upstream.oneshot(req))
        .await
        .map_err(|_| "no answer within 10 s".to_owned())?
        .map_err(|e| e.to_string())?;
    match resp.status() {
        s if s.is_success() => Ok(true),
        StatusCode::CONFLICT => Ok(false),
        s => {
            let body = resp
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Err(format!(
                "{s}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_path_names_one_node() {
        assert_eq!(node_of("/sitegrid/v1/nodes/bj-1/localpods"), Some("bj-1"));
        for other in [
            "/sitegrid/v1/nodes//localpods",
            "/sitegrid/v1/nodes/bj-1/x/localpods",
            "/sitegrid/v1/nodes/bj-1",
            "/api/v1/nodes/bj-1",
        ] {
            assert_eq!(node_of(other), None, "{other}");
        }
    }
}
