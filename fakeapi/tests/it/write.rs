//! Writes over real HTTP: create, conflicts, patches, status, delete, bad input.

use crate::common::{configmap, start_default, summary};
use http::Method;
use serde_json::{json, Value};

fn svc(name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Service","metadata":{"name":name,"labels":{"app":"web"}},
        "spec":{"ports":[{"name":"http","protocol":"TCP","port":80,"targetPort":8080}],"selector":{"app":"web"},"clusterIP":"10.96.130.97","type":"ClusterIP"}})
}

const SVCS: &str = "/api/v1/namespaces/default/services";

#[tokio::test]
async fn create_then_already_exists() {
    let h = start_default().await;
    let mut w = h.client.watch(&format!("{SVCS}?watch=1")).await;
    let r = h.client.post(SVCS, &svc("web")).await;
    assert_eq!(r.code(), 201);
    let created = r.json();
    assert_eq!(created["kind"], "Service");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(
        created["metadata"]["resourceVersion"],
        h.server.resource_version().to_string()
    );
    assert!(created["metadata"]["uid"].as_str().unwrap().len() == 36);
    let ev = w.event().await;
    assert_eq!(
        summary(&ev),
        (
            "ADDED".into(),
            "web".into(),
            h.server.resource_version().to_string()
        )
    );
    assert_eq!(ev["object"], created);

    let dup = h.client.post(SVCS, &svc("web")).await;
    assert_eq!(dup.code(), 409);
    let st = dup.json();
    assert_eq!(st["reason"], "AlreadyExists");
    assert_eq!(st["message"], "services \"web\" already exists");
    assert_eq!(st["details"], json!({"name":"web","kind":"services"}));

    // generateName, and a namespace mismatch.
    let gen = h
        .client
        .post(
            "/api/v1/namespaces/default/configmaps",
            &json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"cm-"}}),
        )
        .await;
    assert_eq!(gen.code(), 201);
    let name = gen.json()["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("cm-") && name.len() == 8, "{name}");
    let wrong_ns = h.client.post(SVCS, &json!({"apiVersion":"v1","kind":"Service","metadata":{"name":"x","namespace":"kube-system"}})).await;
    assert_eq!(wrong_ns.code(), 400);
    let nameless = h
        .client
        .post(
            SVCS,
            &json!({"apiVersion":"v1","kind":"Service","metadata":{}}),
        )
        .await;
    assert_eq!(nameless.code(), 422);
    assert_eq!(nameless.json()["reason"], "Invalid");
    let wrong_kind = h
        .client
        .post(SVCS, &configmap("default", "c", json!({})))
        .await;
    assert_eq!(wrong_kind.code(), 400);
}

#[tokio::test]
async fn put_with_stale_rv_conflicts() {
    let h = start_default().await;
    let created = h.client.post(SVCS, &svc("web")).await.json();
    let mut update = created.clone();
    update["spec"]["selector"] = json!({"app":"web2"});
    let ok = h.client.put(&format!("{SVCS}/web"), &update).await;
    assert_eq!(ok.code(), 200);
    let updated = ok.json();
    assert_eq!(updated["spec"]["selector"]["app"], "web2");
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        updated["metadata"]["creationTimestamp"],
        created["metadata"]["creationTimestamp"]
    );
    assert_ne!(
        updated["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // The same PUT again carries the now-stale resourceVersion.
    let stale = h.client.put(&format!("{SVCS}/web"), &update).await;
    assert_eq!(stale.code(), 409);
    let st = stale.json();
    assert_eq!(st["reason"], "Conflict");
    assert_eq!(
        st["message"],
        "Operation cannot be fulfilled on services \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // Without a resourceVersion the update is unconditional; an unchanged one writes nothing.
    let rv = h.server.resource_version();
    let mut same = updated.clone();
    same["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let noop = h.client.put(&format!("{SVCS}/web"), &same).await;
    assert_eq!(noop.code(), 200);
    assert_eq!(
        h.server.resource_version(),
        rv,
        "a no-op update does not bump the RV"
    );
    let mismatch = h.client.put(&format!("{SVCS}/other"), &same).await;
    assert_eq!(mismatch.code(), 400);
    let missing = h.client.put(&format!("{SVCS}/nope"), &svc("nope")).await;
    assert_eq!(missing.code(), 404);
}

#[tokio::test]
async fn patches_merge_strategic_and_json() {
    let h = start_default().await;
    h.client.post(SVCS, &svc("web")).await;
    let path = format!("{SVCS}/web");
    let merged = h.client.patch(&path, "application/merge-patch+json",
        &json!({"metadata":{"labels":{"app":null,"tier":"front"}},"spec":{"selector":{"app":"v2"}}})).await;
    assert_eq!(merged.code(), 200);
    let v = merged.json();
    assert_eq!(v["metadata"]["labels"], json!({"tier":"front"}));
    assert_eq!(v["spec"]["selector"], json!({"app":"v2"}));
    assert_eq!(v["spec"]["clusterIP"], "10.96.130.97");
    let smp = h
        .client
        .patch(
            &path,
            "application/strategic-merge-patch+json",
            &json!({"metadata":{"annotations":{"a":"b"}}}),
        )
        .await;
    assert_eq!(smp.json()["metadata"]["annotations"], json!({"a":"b"}));
    let jp = h
        .client
        .patch(
            &path,
            "application/json-patch+json",
            &json!([
        {"op":"test","path":"/spec/selector/app","value":"v2"},
        {"op":"replace","path":"/spec/ports/0/port","value":81},
        {"op":"add","path":"/metadata/labels/x","value":"y"}]),
        )
        .await;
    assert_eq!(jp.code(), 200);
    assert_eq!(jp.json()["spec"]["ports"][0]["port"], 81);
    let failed = h
        .client
        .patch(
            &path,
            "application/json-patch+json",
            &json!([{"op":"test","path":"/spec/selector/app","value":"nope"}]),
        )
        .await;
    assert_eq!(failed.code(), 422);
    let stale = h
        .client
        .patch(
            &path,
            "application/merge-patch+json",
            &json!({"metadata":{"resourceVersion":"1"},"spec":{"type":"NodePort"}}),
        )
        .await;
    assert_eq!(stale.code(), 409);
    let unsupported = h
        .client
        .patch(&path, "application/apply-patch+yaml", &json!({}))
        .await;
    assert_eq!(unsupported.code(), 415);
    let missing = h
        .client
        .patch(
            &format!("{SVCS}/nope"),
            "application/merge-patch+json",
            &json!({}),
        )
        .await;
    assert_eq!(missing.code(), 404);
}

#[tokio::test]
async fn status_subresource_changes_only_status() {
    let h = start_default().await;
    h.client.post(SVCS, &svc("web")).await;
    let path = format!("{SVCS}/web/status");
    let r = h.client.patch(&path, "application/merge-patch+json",
        &json!({"spec":{"type":"NodePort"},"status":{"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}}})).await;
    assert_eq!(r.code(), 200);
    let v = r.json();
    assert_eq!(v["status"]["loadBalancer"]["ingress"][0]["ip"], "1.2.3.4");
    assert_eq!(v["spec"]["type"], "ClusterIP");
    // And a main-resource update keeps the stored status.
    let mut main = v.clone();
    main["status"] = json!({});
    main["spec"]["type"] = json!("NodePort");
    let m = h.client.put(&format!("{SVCS}/web"), &main).await.json();
    assert_eq!(m["spec"]["type"], "NodePort");
    assert_eq!(m["status"]["loadBalancer"]["ingress"][0]["ip"], "1.2.3.4");
    // Types without a status subresource have no /status path.
    assert_eq!(
        h.client
            .get("/api/v1/namespaces/default/configmaps/x/status")
            .await
            .code(),
        404
    );
}

#[tokio::test]
async fn delete_returns_the_object_and_emits_deleted() {
    let h = start_default().await;
    let created = h.client.post(SVCS, &svc("web")).await.json();
    let mut w = h
        .client
        .watch(&format!(
            "{SVCS}?watch=1&resourceVersion={}",
            created["metadata"]["resourceVersion"].as_str().unwrap()
        ))
        .await;
    let r = h.client.delete(&format!("{SVCS}/web")).await;
    assert_eq!(r.code(), 200);
    assert_eq!(r.json(), created);
    let ev = w.event().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        h.server.resource_version().to_string()
    );
    assert_eq!(h.client.delete(&format!("{SVCS}/web")).await.code(), 404);
    assert_eq!(h.client.get(&format!("{SVCS}/web")).await.code(), 404);
    // Nodes are cluster-scoped.
    let node =
        json!({"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","namespace":"ignored"}});
    let n = h.client.post("/api/v1/nodes", &node).await;
    assert_eq!(n.code(), 201);
    assert!(n.json()["metadata"].get("namespace").is_none());
    assert_eq!(h.client.delete("/api/v1/nodes/n1").await.code(), 200);
}

#[tokio::test]
async fn bad_bodies_are_status_errors() {
    let h = start_default().await;
    let malformed = h
        .client
        .call(
            Method::POST,
            SVCS,
            Some("application/json"),
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(malformed.code(), 400);
    assert_eq!(malformed.json()["kind"], "Status");
    let array = h
        .client
        .call(
            Method::POST,
            SVCS,
            Some("application/json"),
            b"[1,2]".to_vec(),
        )
        .await;
    assert_eq!(array.code(), 400);
    let huge = vec![b' '; 3 * 1024 * 1024 + 10];
    let too_big = h
        .client
        .call(Method::POST, SVCS, Some("application/json"), huge)
        .await;
    assert_eq!(too_big.code(), 413);
    assert_eq!(too_big.json()["reason"], "RequestEntityTooLarge");
    let not_allowed = h.client.call(Method::DELETE, SVCS, None, Vec::new()).await;
    assert_eq!(not_allowed.code(), 405);
    let all_ns_post = h.client.post("/api/v1/services", &svc("x")).await;
    assert_eq!(all_ns_post.code(), 405);
}

#[tokio::test]
async fn endpointslices_are_stored_in_the_served_version() {
    let h = start_default().await;
    let beta = json!({"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice",
        "metadata":{"name":"s1","namespace":"default","labels":{"kubernetes.io/service-name":"web"}},
        "addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true},
        "topology":{"kubernetes.io/hostname":"bj-1","topology.kubernetes.io/zone":"z1"}}],"ports":[]});
    let stored = h.server.apply(beta);
    assert_eq!(stored["apiVersion"], "discovery.k8s.io/v1");
    assert_eq!(stored["metadata"]["generation"], 1);
    assert_eq!(stored["endpoints"][0]["nodeName"], "bj-1");
    assert_eq!(stored["endpoints"][0]["zone"], "z1");
    let got = h
        .client
        .get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/s1")
        .await
        .json();
    assert_eq!(got, stored);
    assert_eq!(
        h.server
            .get("endpointslices", Some("default"), "s1")
            .unwrap(),
        stored
    );
    assert_eq!(h.server.list("endpointslices"), vec![stored.clone()]);
    let missing = h
        .client
        .get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/nope")
        .await
        .json();
    assert_eq!(
        missing["message"],
        "endpointslices.discovery.k8s.io \"nope\" not found"
    );
    assert_eq!(
        missing["details"],
        json!({"name":"nope","group":"discovery.k8s.io","kind":"endpointslices"})
    );
    let mut changed = stored.clone();
    changed["endpoints"][0]["conditions"]["ready"] = json!(false);
    assert_eq!(h.server.apply(changed)["metadata"]["generation"], 2);
    assert!(h
        .server
        .try_apply(json!({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}))
        .is_err());
}
