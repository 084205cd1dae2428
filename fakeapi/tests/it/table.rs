//! Server-side Tables, as `kubectl get` asks for them: columns and cells from
//! apimachinery's printers, `includeObject`, paging metadata, single GETs,
//! and plain JSON for resources without a printer and for watches.

use crate::common::{start_default, Harness, Reply, WAIT};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// What kubectl 1.20+ sends with `get`.
const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                              application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// A server loaded with the two-site sample (EndpointSlices in v1).
async fn two_sites() -> Harness {
    let h = start_default().await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    h
}

/// Send a GET with `accept`; the response head.
async fn send_accept(h: &Harness, path: &str, accept: &str) -> hyper::Response<Incoming> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let req = Request::get(format!("{}{path}", h.handle.url()))
        .header("accept", accept)
        .body(Empty::new())
        .unwrap();
    tokio::time::timeout(WAIT, client.request(req))
        .await
        .expect("response in time")
        .unwrap()
}

/// A GET with `accept`, read in full.
async fn get_accept(h: &Harness, path: &str, accept: &str) -> Reply {
    let resp = send_accept(h, path, accept).await;
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = tokio::time::timeout(WAIT, resp.into_body().collect())
        .await
        .expect("body in time")
        .unwrap()
        .to_bytes();
    Reply {
        status,
        headers,
        body,
    }
}

/// The Table of a 200 response with the apiserver's content type.
fn table(reply: &Reply) -> Value {
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/json");
    let t = reply.json();
    assert_eq!(t["kind"], "Table", "{t}");
    t
}

fn column_names(t: &Value) -> Vec<&str> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

/// The cells of the row for `name`.
fn cells<'a>(t: &'a Value, name: &str) -> Vec<&'a str> {
    let row = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == name)
        .unwrap_or_else(|| panic!("no row {name} in {t}"));
    row["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn endpoints_list_as_a_table() {
    let h = two_sites().await;
    let reply = get_accept(&h, "/api/v1/namespaces/default/endpoints", KUBECTL_ACCEPT).await;
    let t = table(&reply);
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let keys: Vec<&String> = t.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "kind",
            "apiVersion",
            "metadata",
            "columnDefinitions",
            "rows"
        ]
    );
    assert_eq!(
        t["metadata"],
        serde_json::json!({"resourceVersion": h.server.resource_version().to_string()})
    );
    assert_eq!(column_names(&t), ["Name", "Endpoints", "Age"]);
    // default's Endpoints: the sample's three Services there and `kubernetes`.
    assert_eq!(t["rows"].as_array().unwrap().len(), 4);

    let plain = cells(&t, "plain-echo");
    assert_eq!(plain[..2], ["plain-echo", "10.0.0.81:8080,10.0.1.33:8080"]);
    // Just loaded: seconds old, never "<unknown>".
    assert!(plain[2].ends_with('s'), "age {}", plain[2]);
    assert_eq!(
        cells(&t, "servicegrid-demo-svc")[1],
        "10.0.0.139:8080,10.0.0.70:8080,10.0.1.72:8080 + 1 more..."
    );

    // By default each row carries the object's metadata.
    let row = &t["rows"][0];
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(row["object"]["metadata"]["namespace"], "default");
    assert!(row["object"].get("subsets").is_none());
}

#[tokio::test]
async fn include_object_and_table_version() {
    let h = two_sites().await;
    let path = "/api/v1/namespaces/default/endpoints";

    let whole =
        table(&get_accept(&h, &format!("{path}?includeObject=Object"), KUBECTL_ACCEPT).await);
    let object = &whole["rows"][0]["object"];
    assert_eq!(
        (&object["kind"], &object["apiVersion"]),
        (&"Endpoints".into(), &"v1".into())
    );
    assert!(object["subsets"].is_array());

    let none = table(&get_accept(&h, &format!("{path}?includeObject=None"), KUBECTL_ACCEPT).await);
    assert!(none["rows"].as_array().unwrap().iter().all(|r| r
        .as_object()
        .unwrap()
        .contains_key("object")
        && r["object"].is_null()));

    let bad = get_accept(&h, &format!("{path}?includeObject=Bogus"), KUBECTL_ACCEPT).await;
    assert_eq!(bad.code(), 400);
    assert_eq!(
        bad.json()["message"],
        "Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\": \
         must be 'Metadata', 'Object', 'None', or empty"
    );

    let beta = table(
        &get_accept(
            &h,
            path,
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
        )
        .await,
    );
    assert_eq!(beta["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(
        beta["rows"][0]["object"]["apiVersion"],
        "meta.k8s.io/v1beta1"
    );
}

#[tokio::test]
async fn paged_and_single_object_tables() {
    let h = two_sites().await;
    let page = table(&get_accept(&h, "/api/v1/nodes?limit=2", KUBECTL_ACCEPT).await);
    let meta = page["metadata"].as_object().unwrap();
    let keys: Vec<&String> = meta.keys().collect();
    assert_eq!(keys, ["resourceVersion", "continue", "remainingItemCount"]);
    assert_eq!(meta["remainingItemCount"], 4);
    assert_eq!(page["rows"].as_array().unwrap().len(), 2);
    assert_eq!(column_names(&page)[..3], ["Name", "Status", "Roles"]);

    let stored = h
        .server
        .get("services", Some("default"), "plain-echo")
        .unwrap();
    let one = table(
        &get_accept(
            &h,
            "/api/v1/namespaces/default/services/plain-echo",
            KUBECTL_ACCEPT,
        )
        .await,
    );
    assert_eq!(
        one["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert_eq!(
        cells(&one, "plain-echo")[..5],
        [
            "plain-echo",
            "ClusterIP",
            "10.96.120.15",
            "<none>",
            "80/TCP"
        ]
    );

    // Errors stay Status objects.
    let missing = get_accept(
        &h,
        "/api/v1/namespaces/default/services/nope",
        KUBECTL_ACCEPT,
    )
    .await;
    assert_eq!(missing.code(), 404);
    assert_eq!(missing.json()["kind"], "Status");
}

#[tokio::test]
async fn other_resources_stay_json_and_watches_send_a_table_per_event() {
    let h = two_sites().await;
    let namespaces = get_accept(&h, "/api/v1/namespaces", KUBECTL_ACCEPT).await;
    assert_eq!(namespaces.code(), 200);
    assert_eq!(namespaces.json()["kind"], "NamespaceList");
    let default = get_accept(&h, "/api/v1/namespaces/default", KUBECTL_ACCEPT).await;
    assert_eq!(default.json()["kind"], "Namespace");
    // JSON offered first wins.
    let json_first = get_accept(
        &h,
        "/api/v1/namespaces/default/endpoints",
        "application/json,application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(json_first.json()["kind"], "EndpointsList");

    // kubectl get --watch: one Table per event, the columns only in the first
    // (kubectl prints its header once).
    let resp = send_accept(
        &h,
        "/api/v1/namespaces/default/endpoints?watch=1",
        KUBECTL_ACCEPT,
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    while buf.iter().filter(|b| **b == b'\n').count() < 2 {
        let frame = tokio::time::timeout(WAIT, body.frame())
            .await
            .expect("watch event in time")
            .expect("an event before the end")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
    }
    let events: Vec<Value> = buf
        .split(|b| *b == b'\n')
        .take(2)
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect();
    for event in &events {
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["kind"], "Table");
        let rows = event["object"]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{event}");
        assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            rows[0]["cells"][0], rows[0]["object"]["metadata"]["name"],
            "{event}"
        );
    }
    assert_eq!(events[0]["object"]["columnDefinitions"][0]["name"], "Name");
    assert!(events[1]["object"]["columnDefinitions"].is_null());
}
