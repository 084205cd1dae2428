//! proxy/README.md's table of kube-proxy's requests ("What kube-proxy
//! 1.29–1.35 asks, and what sitegrid answers") held to a running proxy:
//! every row is sent as written (method, path, expanded query, Accept),
//! without credentials, to a node proxy in front of the in-memory API
//! server playing the release that kube-proxy version talks to, and the
//! answer must be the row's: `cache` (200 and the API server never sees
//! it), `passthrough` (it reaches the API server, as the proxy) or `403`
//! (refused, the API server never sees it). Requests outside the tables get
//! 403, so the allowlist and the README cannot drift apart.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::{json, Value};
use sitegrid_fakeapi::{ApiServer, ApiServerConfig, FeatureGates, KubernetesVersion, ServerHandle};
use sitegrid_proxy::app::{start, ProxyOptions, RunningProxy};

const README: &str = include_str!("../../README.md");
const SECTION: &str = "## What kube-proxy 1.29–1.35 asks, and what sitegrid answers";
const NODE: &str = "bj-1";
/// The proxy's own credentials: what a request without any runs as.
const PROXY_TOKEN: &str = "Bearer proxy-token";

/// A markdown table: its header and rows, cells trimmed, backticks dropped.
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn col(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name:?} in {:?}", self.header))
    }
}

/// The tables of the README's kube-proxy section, in order.
fn tables() -> Vec<Table> {
    let start = README.find(SECTION).expect("the kube-proxy section");
    let body = &README[start + SECTION.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut out: Vec<Table> = Vec::new();
    let mut open = false;
    for line in body.lines().map(str::trim) {
        if !line.starts_with('|') {
            open = false;
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('`').to_owned())
            .collect();
        if cells.iter().all(|c| c.chars().all(|ch| ch == '-')) {
            continue;
        }
        match out.last_mut() {
            Some(t) if open => t.rows.push(cells),
            _ => out.push(Table {
                header: cells,
                rows: Vec::new(),
            }),
        }
        open = true;
    }
    out
}

fn table_with(first: &str) -> Table {
    tables()
        .into_iter()
        .find(|t| t.header.first().map(String::as_str) == Some(first))
        .unwrap_or_else(|| panic!("no table starting with column {first:?}"))
}

/// What the proxy answers a request without credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Cache,
    Passthrough,
    Forbidden,
}

impl Answer {
    fn parse(cell: &str) -> Answer {
        match cell {
            "cache" => Answer::Cache,
            "passthrough" => Answer::Passthrough,
            "403" => Answer::Forbidden,
            other => panic!("sitegrid answer {other:?} is not cache, passthrough or 403"),
        }
    }
}

/// One request of the tables, as the README writes it.
#[derive(Debug, Clone)]
struct Row {
    id: String,
    method: Method,
    /// With placeholders (`<node>`, `<ns>`, ...).
    path: String,
    /// Abbreviations joined by `&`, empty for none.
    query: String,
    accept: String,
    /// Release column → `yes`, `gate`, `fallback` or `–`.
    sent_by: BTreeMap<String, String>,
    answer: Answer,
}

const RELEASES: [&str; 5] = ["1.20", "1.29", "1.31", "1.33", "1.35"];

/// The main table's rows and the table of requests kube-proxy does not make.
fn rows() -> Vec<Row> {
    let main = table_with("#");
    let mut out = Vec::new();
    for r in &main.rows {
        let sent_by: BTreeMap<_, _> = RELEASES
            .iter()
            .map(|v| (v.to_string(), r[main.col(v)].clone()))
            .collect();
        for (v, cell) in &sent_by {
            assert!(
                ["yes", "gate", "fallback", "–"].contains(&cell.as_str()),
                "row {}: {v} says {cell:?}",
                r[0]
            );
        }
        out.push(Row {
            id: format!("#{}", r[main.col("#")]),
            method: r[main.col("method")].parse().unwrap(),
            path: r[main.col("path")].clone(),
            query: r[main.col("query")].clone(),
            accept: r[main.col("Accept")].clone(),
            sent_by,
            answer: Answer::parse(&r[main.col("sitegrid")]),
        });
    }
    let other = table_with("method");
    for r in &other.rows {
        out.push(Row {
            id: format!("{} {}", r[0], r[1]),
            method: r[other.col("method")].parse().unwrap(),
            path: r[other.col("path")].clone(),
            query: String::new(),
            accept: "application/json".into(),
            // Whoever asks, against every release.
            sent_by: RELEASES
                .iter()
                .map(|v| (v.to_string(), "yes".into()))
                .collect(),
            answer: Answer::parse(&r[other.col("sitegrid")]),
        });
    }
    assert!(
        out.len() >= 30,
        "the tables were not read: {} rows",
        out.len()
    );
    out
}

/// The legend: abbreviation → what it stands for.
fn legend() -> BTreeMap<String, String> {
    let t = table_with("abbreviation");
    t.rows
        .iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect()
}

/// Placeholders filled in as kube-proxy on node bj-1 would (`<RV>` is
/// left for [`check`]: it needs a list).
fn fill(s: &str) -> String {
    s.replace("<node>", NODE)
        .replace("<ns>", "default")
        .replace("<name>", "kube-proxy-table.1")
        .replace("<group>", "discovery.k8s.io")
        .replace("<version>", "v1")
        .replace("<XmYs>", "7m3s")
        .replace("<N>", "423")
}

/// `LS&L500` as sent: the abbreviations expanded, the pairs sorted by key.
fn expand(query: &str, legend: &BTreeMap<String, String>) -> String {
    let mut pairs: Vec<&str> = query
        .split('&')
        .filter(|t| !t.is_empty())
        .flat_map(|t| {
            legend
                .get(t)
                .unwrap_or_else(|| panic!("{t:?} is not in the legend"))
                .split('&')
        })
        .collect();
    pairs.sort_by_key(|p| p.split('=').next().unwrap_or(""));
    pairs.join("&")
}

/// A node proxy for bj-1 with credentials of its own, in front of an API
/// server playing one release with the two-site world.
struct Cluster {
    api: ApiServer,
    _upstream: ServerHandle,
    _proxy: RunningProxy,
    url: String,
}

async fn cluster(config: ApiServerConfig) -> Cluster {
    let api = ApiServer::new(config);
    api.load_two_sites();
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let mut config = kube::Config::new(upstream.url().parse().unwrap());
    config.auth_info.token = Some("proxy-token".to_owned().into());
    let mut opts = ProxyOptions::new(NODE, "127.0.0.1:0".parse().unwrap());
    // The operator endpoints elsewhere, so that /healthz here is the API server's.
    opts.metrics_bind_address = Some("127.0.0.1:0".parse().unwrap());
    let proxy = start(config, opts).await.unwrap();
    while !proxy.cache.readiness().is_ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let url = format!("http://{}", proxy.local_addr);
    Cluster {
        api,
        _upstream: upstream,
        _proxy: proxy,
        url,
    }
}

/// The body kube-proxy would send (as JSON: the fake API server reads
/// JSON, and the proxy passes a body through whatever its type).
fn body_for(method: &Method, path: &str) -> Option<(&'static str, Value)> {
    let core = path.starts_with("/api/");
    match *method {
        Method::POST if core => Some((
            "application/json",
            json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "kube-proxy-table.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": NODE}, "reason": "Starting"}),
        )),
        Method::POST => Some((
            "application/json",
            json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "kube-proxy-table.1", "namespace": "default"},
            "regarding": {"kind": "Node", "name": NODE}, "reason": "Starting",
            "action": "StartKubeProxy", "reportingController": "kube-proxy",
            "reportingInstance": "kube-proxy-bj-1", "eventTime": "2026-01-01T00:00:00.000000Z"}),
        )),
        Method::PATCH => Some((
            "application/strategic-merge-patch+json",
            json!({"series": {"count": 2}}),
        )),
        Method::PUT => Some(("application/json", json!({}))),
        _ => None,
    }
}

/// Sends `method target` (path and query) to `base` without credentials;
/// the status and (unless it is a watch, which stays open) the body.
async fn send(method: Method, base: &str, target: &str, accept: &str) -> (u16, Value) {
    let url = format!("{base}{target}");
    let path = target.split('?').next().unwrap_or(target);
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = Request::builder()
        .method(method.clone())
        .uri(&url)
        .header("accept", accept)
        .header(
            "user-agent",
            "kube-proxy/v1.35.0 (linux/amd64) kubernetes/table",
        );
    let body = match body_for(&method, path) {
        Some((content_type, body)) => {
            req = req.header("content-type", content_type);
            Bytes::from(body.to_string())
        }
        None => Bytes::new(),
    };
    let resp = tokio::time::timeout(
        Duration::from_secs(60),
        client.request(req.body(Full::new(body)).unwrap()),
    )
    .await
    .unwrap_or_else(|_| panic!("{url}: no answer"))
    .unwrap();
    let code = resp.status().as_u16();
    if url.contains("watch=true") && code == 200 {
        return (code, Value::Null);
    }
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// How many requests `method path` (and `query`, when given) the API server received.
fn received(api: &ApiServer, method: &Method, path: &str, query: Option<&str>) -> usize {
    api.requests()
        .iter()
        .filter(|r| r.method == method.as_str() && r.path == path)
        .filter(|r| query.is_none_or(|q| r.query == q))
        .count()
}

/// The resourceVersion a watch of `path?query` starts from: its list's.
async fn list_rv(c: &Cluster, path: &str, query: &str) -> String {
    let selectors: Vec<&str> = query
        .split('&')
        .filter(|p| p.starts_with("labelSelector=") || p.starts_with("fieldSelector="))
        .collect();
    let target = format!("{path}?{}", selectors.join("&"));
    let (code, list) = send(Method::GET, &c.url, &target, "application/json").await;
    assert_eq!(code, 200, "{target}: {list}");
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Sends `row` to `c` and checks the answer is the row's.
async fn check(c: &Cluster, row: &Row, legend: &BTreeMap<String, String>) {
    let path = fill(&row.path);
    let mut query = fill(&expand(&row.query, legend));
    if query.contains("<RV>") {
        query = query.replace("<RV>", &list_rv(c, &path, &query).await);
    }
    let accept = legend.get(&row.accept).unwrap_or(&row.accept);
    let target = match query.as_str() {
        "" => path.clone(),
        q => format!("{path}?{q}"),
    };
    let before = received(&c.api, &row.method, &path, Some(&query));
    let (code, body) = send(row.method.clone(), &c.url, &target, accept).await;
    let after = received(&c.api, &row.method, &path, Some(&query));
    let what = format!("{} {} {target}: {code} {body}", row.id, row.method);
    match row.answer {
        Answer::Cache => {
            assert_eq!(code, 200, "{what}");
            assert_eq!(after, before, "{what}: reached the API server");
        }
        Answer::Passthrough => {
            assert_eq!(after, before + 1, "{what}: did not reach the API server");
            let last = c.api.requests().into_iter().rev().find(|r| r.path == path);
            assert_eq!(
                last.unwrap().credentials,
                [("authorization".to_owned(), PROXY_TOKEN.to_owned())],
                "{what}: not sent as the proxy"
            );
        }
        Answer::Forbidden => forbidden(&row.method, &target, code, &body, after - before),
    }
}

/// The proxy's 403 for a request without credentials, which never reached the API server.
fn forbidden(method: &Method, target: &str, code: u16, body: &Value, reached: usize) {
    let what = format!("{method} {target}: {code} {body}");
    assert_eq!(
        (code, body["reason"].as_str()),
        (403, Some("Forbidden")),
        "{what}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("--anonymous-passthrough=all"),
        "{what}"
    );
    assert_eq!(reached, 0, "{what}: reached the API server");
}

/// Every row some release in `columns` sends (a non-`–` cell), sent to `c`.
async fn rows_of(c: &Cluster, columns: &[&str]) -> usize {
    let legend = legend();
    let mut sent = 0;
    for row in rows() {
        if columns.iter().any(|v| row.sent_by[*v] != "–") {
            check(c, &row, &legend).await;
            sent += 1;
        }
    }
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_proxy_1_20_rows_get_the_tables_answers_from_a_1_20_cluster() {
    let c = cluster(ApiServerConfig {
        // 1.20 serves EndpointSlices in v1beta1 only (discovery.k8s.io/v1 is 1.21).
        endpointslice_version: "v1beta1",
        ..ApiServerConfig::for_version(KubernetesVersion::V1_20)
    })
    .await;
    assert!(rows_of(&c, &["1.20"]).await >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_proxy_1_29_and_1_31_rows_get_the_tables_answers_from_a_1_31_cluster() {
    // With the gate (and so networking.k8s.io/v1beta1) on: 1.31's `gate` rows.
    let c = cluster(ApiServerConfig {
        feature_gates: FeatureGates {
            multi_cidr_service_allocator: Some(true),
            ..FeatureGates::default()
        },
        ..ApiServerConfig::for_version(KubernetesVersion::V1_31)
    })
    .await;
    assert!(rows_of(&c, &["1.29", "1.31"]).await >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_proxy_1_33_and_1_35_rows_get_the_tables_answers_from_a_1_35_cluster() {
    let c = cluster(ApiServerConfig::for_version(KubernetesVersion::V1_35)).await;
    assert!(rows_of(&c, &["1.33", "1.35"]).await >= 20);
}

/// Requests no row lists: other nodes, other kinds, other verbs on the
/// rows' paths, other Event APIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_outside_the_table_get_403_without_credentials() {
    let c = cluster(ApiServerConfig::for_version(KubernetesVersion::V1_35)).await;
    let rows = rows();
    let mut probes: Vec<(Method, String)> = [
        (Method::GET, "/api/v1/pods"),
        (Method::GET, "/api/v1/nodes/gz-1"),
        (
            Method::GET,
            "/api/v1/nodes?fieldSelector=metadata.name%3Dgz-1",
        ),
        (Method::GET, "/api/v1/nodes"),
        (Method::GET, "/api/v1/nodes/bj-1/status"),
        (Method::PATCH, "/api/v1/nodes/bj-1"),
        (Method::POST, "/api/v1/namespaces/default/services"),
        (Method::GET, "/api/v1/namespaces/default/events"),
        (
            Method::POST,
            "/apis/events.k8s.io/v1beta1/namespaces/default/events",
        ),
        (Method::POST, "/apis/apps/v1/namespaces/default/events"),
        (Method::GET, "/api/v1/namespaces/kube-system/secrets"),
    ]
    .into_iter()
    .map(|(m, p)| (m, p.to_owned()))
    .collect();
    // Every verb a row's path is not listed with (GETs of cached paths are the cache's).
    for row in &rows {
        for method in [
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ] {
            let listed = rows
                .iter()
                .any(|r| r.path == row.path && r.method == method);
            let cached_get = method == Method::GET && row.answer == Answer::Cache;
            if !(listed || cached_get) {
                probes.push((method, fill(&row.path)));
            }
        }
    }
    probes.sort_by(|a, b| (a.0.as_str(), &a.1).cmp(&(b.0.as_str(), &b.1)));
    probes.dedup();
    for (method, target) in &probes {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        assert!(
            !rows
                .iter()
                .any(|r| r.method == *method && fill(&r.path) == path && r.query.is_empty()),
            "{method} {target} is a row of the table"
        );
        let before = received(&c.api, method, path, Some(query));
        let (code, body) = send(method.clone(), &c.url, target, "application/json").await;
        let reached = received(&c.api, method, path, Some(query)) - before;
        forbidden(method, target, code, &body, reached);
    }
    assert!(probes.len() > 40, "{} probes", probes.len());
}
