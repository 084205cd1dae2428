//! Metadata-only reads (`as=PartialObjectMetadata[List]`) over real HTTP,
//! field by field against what kube-apiserver 1.20 sends (reference §9),
//! and selector watches of Nodes moving between sites.

use std::time::Duration;

use serde_json::{json, Value};
use sitegrid_fakeapi::ApiServerConfig;

use crate::common::{relabelled, start, start_two_sites, summary, METADATA, METADATA_LIST};

/// The keys of a JSON object, in order.
fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

#[tokio::test]
async fn list_is_a_partial_object_metadata_list_of_whole_object_metadata() {
    let h = start_two_sites().await;
    let full = h.client.get("/api/v1/nodes").await.json();
    let reply = h.client.get_as("/api/v1/nodes", METADATA_LIST).await;
    assert_eq!(reply.code(), 200);
    assert_eq!(reply.headers["content-type"], "application/json");
    let rv = h.server.resource_version().to_string();
    let raw = std::str::from_utf8(&reply.body).unwrap();
    assert!(
        raw.starts_with(&format!(
            r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"name":"bj-1","#
        )),
        "{raw}"
    );
    assert!(raw.ends_with("]}\n"), "one line of compact JSON");
    let list = reply.json();
    assert_eq!(keys(&list), ["kind", "apiVersion", "metadata", "items"]);
    assert_eq!(list["metadata"], json!({ "resourceVersion": rv }));
    let items = list["items"].as_array().unwrap();
    let objects = full["items"].as_array().unwrap();
    assert_eq!(items.len(), 6);
    for (item, object) in items.iter().zip(objects) {
        // Items carry kind and apiVersion (plain list items do not), no spec
        // or status, and the object's metadata whole.
        assert_eq!(keys(item), ["kind", "apiVersion", "metadata"]);
        assert_eq!(item["kind"], "PartialObjectMetadata");
        assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(item["metadata"], object["metadata"]);
        assert!(item["metadata"]["creationTimestamp"].is_string());
        assert!(item["metadata"]["uid"].is_string());
    }
}

#[tokio::test]
async fn pages_selectors_and_resource_versions_are_the_lists() {
    let h = start_two_sites().await;
    let rv = h.server.resource_version().to_string();
    // Paginated: continue as for the objects, remainingItemCount dropped.
    let full = h.client.get("/api/v1/nodes?limit=2").await.json();
    assert_eq!(full["metadata"]["remainingItemCount"], 4);
    let page = h
        .client
        .get_as("/api/v1/nodes?limit=2", METADATA_LIST)
        .await
        .json();
    assert_eq!(keys(&page["metadata"]), ["resourceVersion", "continue"]);
    assert_eq!(page["metadata"]["resourceVersion"], rv);
    assert_eq!(page["metadata"]["continue"], full["metadata"]["continue"]);
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&page), ["bj-1", "bj-2"]);
    let token = page["metadata"]["continue"].as_str().unwrap();
    let next = h
        .client
        .get_as(
            &format!("/api/v1/nodes?limit=2&continue={token}"),
            METADATA_LIST,
        )
        .await
        .json();
    assert_eq!(names(&next), ["bj-3", "gz-1"]);
    assert_eq!(next["metadata"]["resourceVersion"], rv);
    // Selectors, as kube-rs' watcher lists (rv=0 ignores the limit).
    let gz = h
        .client
        .get_as(
            "/api/v1/nodes?labelSelector=location%3Dguangzhou&limit=500&resourceVersion=0&resourceVersionMatch=NotOlderThan",
            METADATA_LIST,
        )
        .await
        .json();
    assert_eq!(names(&gz), ["gz-1", "gz-2", "gz-3"]);
    // A too-old continue token is the same 410, with its fresh token.
    h.server.apply(relabelled(
        &h.server.get("nodes", None, "gz-1").unwrap(),
        "x",
    ));
    h.server.compact();
    let expired = h
        .client
        .get_as(
            &format!("/api/v1/nodes?limit=2&continue={token}"),
            METADATA_LIST,
        )
        .await;
    assert_eq!(expired.code(), 410);
    assert!(expired.json()["metadata"]["continue"].is_string());
}

#[tokio::test]
async fn get_is_the_object_metadata_and_the_wrong_form_is_406() {
    let h = start_two_sites().await;
    let node = h.server.get("nodes", None, "gz-2").unwrap();
    let reply = h.client.get_as("/api/v1/nodes/gz-2", METADATA).await;
    assert_eq!(reply.code(), 200);
    let mut want =
        br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#.to_vec();
    want.extend_from_slice(&serde_json::to_vec(&node["metadata"]).unwrap());
    want.extend_from_slice(b"}\n");
    assert_eq!(
        std::str::from_utf8(&reply.body).unwrap(),
        std::str::from_utf8(&want).unwrap()
    );
    // Namespaced objects keep their namespace.
    let svc = h
        .client
        .get_as("/api/v1/namespaces/default/services/plain-echo", METADATA)
        .await
        .json();
    assert_eq!(svc["metadata"]["namespace"], "default");
    assert_eq!(keys(&svc), ["kind", "apiVersion", "metadata"]);
    // A list asked of an object, an object asked of a list: 406, written
    // indented as kube-apiserver's fallback (the Accept offers nothing plain).
    let not_list = h.client.get_as("/api/v1/nodes/gz-2", METADATA_LIST).await;
    assert_eq!(not_list.code(), 406);
    assert_eq!(
        std::str::from_utf8(&not_list.body).unwrap(),
        "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"you requested PartialObjectMetadataList, but the requested object is not a list (*core.Node)\",\n  \"reason\": \"NotAcceptable\",\n  \"code\": 406\n}\n"
    );
    let not_object = h.client.get_as("/api/v1/nodes", METADATA).await;
    assert_eq!(not_object.code(), 406);
    assert_eq!(
        not_object.json()["message"],
        "you requested PartialObjectMetadata, but the requested object is a list (*core.NodeList)"
    );
    // With a plain range offered too, errors stay compact.
    let missing = h
        .client
        .get_as(
            "/api/v1/nodes/nope",
            &format!("{METADATA}, application/json"),
        )
        .await;
    assert_eq!(missing.code(), 404);
    assert!(missing
        .body
        .starts_with(b"{\"kind\":\"Status\",\"apiVersion\":\"v1\""));
}

#[tokio::test]
async fn watch_sends_metadata_frames_and_metadata_bookmarks() {
    let h = start(ApiServerConfig {
        bookmark_interval: Duration::from_millis(50),
        ..ApiServerConfig::default()
    })
    .await;
    h.server.load(sitegrid_fakeapi::sample::two_sites("v1"));
    let bj1 = h.server.get("nodes", None, "bj-1").unwrap();
    let mut w = h
        .client
        .watch_as(
            "/api/v1/nodes?watch=true&resourceVersion=0&labelSelector=location%3Dbeijing",
            Some(METADATA),
        )
        .await;
    let first = w.next_line().await.unwrap();
    let mut want = r#"{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#.to_owned();
    want.push_str(&serde_json::to_string(&bj1["metadata"]).unwrap());
    want.push_str("}}");
    assert_eq!(first, want);
    assert_eq!(w.event().await["object"]["metadata"]["name"], "bj-2");
    assert_eq!(w.event().await["object"]["metadata"]["name"], "bj-3");
    // A change is a MODIFIED of the metadata, new resourceVersion and all.
    let mut changed = bj1.clone();
    changed["metadata"]["annotations"]["note"] = json!("x");
    let stored = h.server.apply(changed);
    let ev = w.event().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(keys(&ev["object"]), ["kind", "apiVersion", "metadata"]);
    assert_eq!(ev["object"]["metadata"], stored["metadata"]);
    // Bookmarks are converted like any object (bookmarks need a write the
    // watch has not seen: one to another resource moves the clock).
    let rv = h.server.resource_version();
    let mut w = h
        .client
        .watch_as(
            &format!("/api/v1/nodes?watch=1&resourceVersion={rv}&allowWatchBookmarks=true"),
            Some(METADATA),
        )
        .await;
    h.server
        .apply(json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"tick"}}));
    assert_eq!(
        w.next_line().await.unwrap(),
        format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"{}","creationTimestamp":null}}}}}}"#,
            rv + 1
        )
    );
    // A resourceVersion older than the history is the same ERROR frame, a Status.
    h.server.compact();
    let mut old = h
        .client
        .watch_as(
            &format!("/api/v1/nodes?watch=1&resourceVersion={rv}"),
            Some(METADATA),
        )
        .await;
    let err = old.event().await;
    assert_eq!(err["type"], "ERROR");
    assert_eq!(err["object"]["kind"], "Status");
    assert_eq!(err["object"]["code"], 410);
    assert!(old.next_line().await.is_none());
}

/// A node that moves out of a selector's site is DELETED from its watch
/// (old content, new resourceVersion) and one that moves in is ADDED, in
/// both forms (reference §5).
#[tokio::test]
async fn nodes_moving_between_sites_leave_and_join_selector_watches() {
    let h = start_two_sites().await;
    let rv = h.server.resource_version();
    let path =
        format!("/api/v1/nodes?watch=1&resourceVersion={rv}&labelSelector=location%3Dbeijing");
    let mut full = h.client.watch(&path).await;
    let mut meta = h.client.watch_as(&path, Some(METADATA)).await;
    let bj1 = h.server.get("nodes", None, "bj-1").unwrap();
    h.server.apply(relabelled(&bj1, "guangzhou"));
    let gz1 = h.server.get("nodes", None, "gz-1").unwrap();
    let moved_in = h.server.apply(relabelled(&gz1, "beijing"));
    // A node that changes outside the site is not sent; one inside is MODIFIED.
    let mut gz2 = h.server.get("nodes", None, "gz-2").unwrap();
    gz2["metadata"]["annotations"]["note"] = json!("outside");
    h.server.apply(gz2);
    let mut bj2 = h.server.get("nodes", None, "bj-2").unwrap();
    bj2["metadata"]["annotations"]["note"] = json!("inside");
    h.server.apply(bj2);
    for (w, form) in [(&mut full, "Node"), (&mut meta, "PartialObjectMetadata")] {
        let gone = w.event().await;
        assert_eq!(
            summary(&gone),
            ("DELETED".into(), "bj-1".into(), (rv + 1).to_string())
        );
        assert_eq!(gone["object"]["kind"], form);
        assert_eq!(gone["object"]["metadata"]["labels"]["location"], "beijing");
        let joined = w.event().await;
        assert_eq!(
            summary(&joined),
            ("ADDED".into(), "gz-1".into(), (rv + 2).to_string())
        );
        assert_eq!(joined["object"]["metadata"], moved_in["metadata"]);
        let inside = w.event().await;
        assert_eq!(
            summary(&inside),
            ("MODIFIED".into(), "bj-2".into(), (rv + 4).to_string())
        );
        assert!(w.quiet_for(Duration::from_millis(100)).await);
    }
}
