//! proxy/README.md's table of the kubelet's requests ("What the kubelet
//! asks, and what the node cache answers") held to a running proxy: every
//! row is sent as this node's kubelet sends it (its certificate, its
//! Accept) to the kubelet port of a proxy in front of the in-memory API
//! server — playing 1.20, or 1.35 for the rows only later releases send —
//! first while the API server answers, then after it went away, and the
//! answers must be the row's `online` and `offline` ones.

use http::{Method, StatusCode};
use serde_json::{json, Value};
use sitegrid_fakeapi::KubernetesVersion;

use super::node_cache::{send, token_request, World, NODE};

const README: &str = include_str!("../../README.md");
const SECTION: &str = "## What the kubelet asks, and what the node cache answers";
const RELEASES: [&str; 5] = ["1.20", "1.29", "1.31", "1.33", "1.35"];

/// One row, as the README writes it.
#[derive(Debug, Clone)]
struct Row {
    id: String,
    method: Method,
    path: String,
    query: String,
    sent_by: Vec<String>,
    online: String,
    offline: String,
}

/// The rows of the section's second table (the first is its abbreviations).
fn rows() -> Vec<Row> {
    let start = README.find(SECTION).expect("the kubelet section");
    let body = &README[start + SECTION.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut tables: Vec<Vec<Vec<String>>> = Vec::new();
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
        match tables.last_mut() {
            Some(t) if open => t.push(cells),
            _ => tables.push(vec![cells]),
        }
        open = true;
    }
    let table = tables
        .into_iter()
        .find(|t| t[0][0] == "#")
        .expect("the request table");
    let header = &table[0];
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    table[1..]
        .iter()
        .map(|r| {
            let row = Row {
                id: format!("#{}", r[col("#")]),
                method: r[col("method")].parse().unwrap(),
                path: r[col("path")].clone(),
                query: r[col("query")].clone(),
                sent_by: RELEASES.iter().map(|v| r[col(v)].clone()).collect(),
                online: r[col("online")].clone(),
                offline: r[col("offline")].clone(),
            };
            for cell in &row.sent_by {
                assert!(
                    ["yes", "cond", "gate", "fallback", "–"].contains(&cell.as_str()),
                    "{}: {cell:?}",
                    row.id
                );
            }
            assert!(
                ["cache", "kept", "upstream"].contains(&row.online.as_str()),
                "{}",
                row.id
            );
            assert!(
                ["cache", "kept", "503", "409", "local"].contains(&row.offline.as_str()),
                "{}",
                row.id
            );
            row
        })
        .collect()
}

/// The path with this world's names.
fn path_of(row: &Row) -> String {
    let name = match () {
        _ if row.path.contains("/secrets/") => "db",
        _ if row.path.contains("/pods/") => "web",
        _ if row.path.contains("/events/") => "web.1",
        _ if row.path.contains("volumeattachments") => "csi-0123",
        _ => "data",
    };
    row.path
        .replace("<node>", NODE)
        .replace("<ns>", "shop")
        .replace("<sa>", "web")
        .replace("<claim>", "data")
        .replace("<pv>", "pv-data")
        .replace("<name>", name)
}

/// The FSNAME object of a path's resource.
fn fsname(path: &str) -> &'static str {
    if path.contains("configmaps") {
        "settings"
    } else {
        "db"
    }
}

/// The query, abbreviations expanded, `<RV>` from `rv`.
fn query_of(row: &Row, path: &str, rv: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for a in row.query.split('&').filter(|a| !a.is_empty()) {
        let expanded = match a {
            "FSPOD" => format!("fieldSelector=spec.nodeName%3D{NODE}"),
            "FSNODE" => format!("fieldSelector=metadata.name%3D{NODE}"),
            "FSNAME" => format!("fieldSelector=metadata.name%3D{}", fsname(path)),
            "FSSVC" => "fieldSelector=spec.clusterIP%21%3DNone".to_owned(),
            "L500" => "limit=500&resourceVersion=0".to_owned(),
            "RL" => format!("resourceVersion={rv}"),
            "HB" => "timeout=10s".to_owned(),
            "W" => format!("allowWatchBookmarks=true&resourceVersion={rv}&timeout=5m0s&timeoutSeconds=300&watch=true"),
            "W'" => format!("allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=300&watch=true"),
            "W30" => format!("allowWatchBookmarks=true&resourceVersion={rv}&timeout=30m0s&timeoutSeconds=1800&watch=true"),
            "WL" | "WL'" | "WL30" => {
                "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=300&watch=true"
                    .to_owned()
            }
            literal => literal.to_owned(),
        };
        parts.push(expanded);
    }
    let mut all: Vec<String> = parts.join("&").split('&').map(str::to_owned).collect();
    // As Go's url.Values.Encode writes them.
    all.sort();
    all.join("&")
}

/// What a row's write carries (JSON: the in-memory API server reads no protobuf).
fn body_of(row: &Row) -> Option<Value> {
    match row.method {
        Method::GET => None,
        _ if row.path.ends_with("/token") => Some(token_request()),
        // The status manager's patch: its uid as precondition, the status.
        Method::PATCH if row.path.contains("/pods/") => Some(json!({
            "metadata": {"uid": "uid-web"},
            "status": {"podIP": "10.9.9.9", "podIPs": [{"ip": "10.9.9.9"}]}})),
        Method::PATCH => Some(json!({"metadata": {"labels": {"touched": "yes"}}})),
        Method::DELETE => {
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}))
        }
        _ if row.path.ends_with("/nodes") => {
            Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}))
        }
        _ if row.path.contains("leases") => Some(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": NODE, "namespace": "kube-node-lease"}, "spec": {"holderIdentity": NODE}}),
        ),
        _ if row.path.ends_with("/events") => Some(json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "shop"}, "involvedObject": {"kind": "Pod", "name": "web"}})),
        _ if row.path.ends_with("/pods") => Some(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "static-bj-1", "namespace": "shop", "annotations": {"kubernetes.io/config.mirror": "x"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x"}]}})),
        _ if row.path.ends_with("/csinodes") => {
            Some(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": NODE}, "spec": {"drivers": []}}))
        }
        _ => Some(json!({"metadata": {"name": NODE}})),
    }
}

/// Whether the row is a watch (its answer is a stream, read only to its first bytes).
fn is_watch(row: &Row) -> bool {
    row.query.split('&').any(|a| a.starts_with('W'))
}

/// The resourceVersion a watch or relist of `path` starts from: the list's, through the proxy.
async fn list_rv(w: &World, row: &Row, path: &str) -> String {
    let list = Row {
        query: row
            .query
            .split('&')
            .filter(|a| a.starts_with("FS"))
            .chain(["L500"])
            .collect::<Vec<_>>()
            .join("&"),
        method: Method::GET,
        ..row.clone()
    };
    let url = format!("{path}?{}", query_of(&list, path, ""));
    let (status, body) = send(&w.kubelet(), Method::GET, &url, None).await;
    assert_eq!(status, StatusCode::OK, "{}: its list {url}", row.id);
    match serde_json::from_slice::<Value>(&body) {
        Ok(v) => v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        // A protobuf list (the served-state cache's): its version through the JSON reader.
        Err(_) => {
            let json = sitegrid_apimachinery::protobuf::to_json::answer(&body).unwrap_or_default();
            let v: Value = serde_json::from_slice(&json).unwrap_or(Value::Null);
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    }
}

/// Sends `row`; its status (a watch: the status of its headers).
async fn answer(w: &World, row: &Row) -> StatusCode {
    let path = path_of(row);
    let rv = if is_watch(row) || row.query.contains("RL") {
        list_rv(w, row, &path).await
    } else {
        String::new()
    };
    let query = query_of(row, &path, &rv);
    let url = if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    };
    if is_watch(row) {
        let req = http::Request::get(&url)
            .header(http::header::ACCEPT, super::node_cache::KUBELET_ACCEPT)
            .body(kube::client::Body::empty())
            .unwrap();
        let resp = w.kubelet().send(req).await.unwrap();
        return resp.status();
    }
    send(&w.kubelet(), row.method.clone(), &url, body_of(row))
        .await
        .0
}

/// Every row a release of `versions` sends, online then offline, against an API server playing `version`.
async fn check(version: KubernetesVersion, rows: Vec<Row>) {
    let mut w = World::playing(&format!("table-{version:?}"), version).await;
    for row in &rows {
        let before = w.api.requests().len();
        let status = answer(&w, row).await;
        let seen: Vec<Option<String>> = w.api.requests()[before..]
            .iter()
            .filter(|r| r.method == row.method.as_str() && r.path == path_of(row))
            .map(|r| r.client.clone())
            .collect();
        match row.online.as_str() {
            "cache" => {
                assert_eq!(status, StatusCode::OK, "{} online", row.id);
                // (The proxy's own reflectors read the same paths, as the proxy.)
                assert!(
                    !seen
                        .iter()
                        .any(|c| c.as_deref() == Some("system:node:bj-1")),
                    "{} online: the API server saw it from the kubelet",
                    row.id
                );
            }
            kind => {
                if kind == "kept" {
                    assert!(status.is_success(), "{} online: {status}", row.id);
                }
                assert!(
                    !seen.is_empty()
                        && seen
                            .iter()
                            .all(|c| c.as_deref() == Some("system:node:bj-1")),
                    "{} online: the API server saw it as {seen:?}",
                    row.id
                );
            }
        }
    }
    w.go_offline().await;
    for row in &rows {
        let status = answer(&w, row).await;
        let want = match row.offline.as_str() {
            "cache" | "kept" if row.method == Method::POST => StatusCode::CREATED,
            "cache" | "kept" | "local" => StatusCode::OK,
            "409" => StatusCode::CONFLICT,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        assert_eq!(
            status, want,
            "{} {} {} offline",
            row.id, row.method, row.path
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_the_kubelet_table_online_and_offline() {
    let rows = rows();
    assert!(rows.len() >= 50, "{} rows", rows.len());
    let sent = |r: &Row, i: usize| matches!(r.sent_by[i].as_str(), "yes" | "cond");
    // Rows kubelet 1.20 sends, against 1.20; the rest against 1.35.
    let (old, new): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|r| sent(r, 0));
    check(KubernetesVersion::V1_20, old).await;
    check(KubernetesVersion::V1_35, new).await;
}
