//! LIST over real HTTP: shape, resourceVersion, pagination, selectors, errors.

use crate::common::{configmap, endpoints, start_default};
use serde_json::{json, Value};

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn list_has_apiserver_shape_and_global_rv() {
    let h = start_default().await;
    h.server.apply(endpoints(
        "default",
        "web",
        json!({"app":"web"}),
        &["10.0.0.1"],
    ));
    h.server
        .apply(endpoints("default", "bars-echo", json!({}), &["10.0.0.2"]));
    h.server
        .apply(configmap("default", "unrelated", json!({"a":"b"})));
    let r = h.client.get("/api/v1/namespaces/default/endpoints").await;
    assert_eq!(r.code(), 200);
    assert_eq!(r.headers["content-type"], "application/json");
    assert!(r.body.ends_with(b"}\n"), "one line of compact JSON");
    let list = r.json();
    let keys: Vec<&String> = list.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["kind", "apiVersion", "metadata", "items"]);
    assert_eq!(list["kind"], "EndpointsList");
    assert_eq!(list["apiVersion"], "v1");
    // The list RV is the global one (the ConfigMap write counts), nothing else in metadata.
    assert_eq!(
        list["metadata"],
        json!({"resourceVersion": h.server.resource_version().to_string()})
    );
    assert_eq!(names(&list), ["bars-echo", "web"]);
    let item = &list["items"][1];
    assert!(item.get("kind").is_none() && item.get("apiVersion").is_none());
    let meta = item["metadata"].as_object().unwrap();
    let meta_keys: Vec<&String> = meta.keys().collect();
    assert_eq!(
        meta_keys,
        [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "labels"
        ]
    );
    assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
    let ts = meta["creationTimestamp"].as_str().unwrap();
    assert!(
        ts.len() == 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "{ts}"
    );

    // A GET has kind/apiVersion first; a missing object is the apiserver's 404 Status.
    let got = h
        .client
        .get("/api/v1/namespaces/default/endpoints/web")
        .await;
    assert!(got
        .body
        .starts_with(br#"{"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"web""#));
    let missing = h
        .client
        .get("/api/v1/namespaces/default/services/nope")
        .await;
    assert_eq!(missing.code(), 404);
    assert_eq!(
        std::str::from_utf8(&missing.body).unwrap(),
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"services \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"services\"},\"code\":404}\n"
    );
    // All-namespaces list is sorted by namespace/name.
    h.server
        .apply(endpoints("alpha", "zz", json!({}), &["10.0.0.3"]));
    let all = h.client.get("/api/v1/endpoints").await.json();
    let nss: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(nss, ["alpha", "default", "default"]);
}

#[tokio::test]
async fn pages_stay_consistent_while_writes_happen() {
    let h = start_default().await;
    for i in 0..5 {
        h.server
            .apply(configmap("default", &format!("cm-{i}"), json!({"v":"0"})));
    }
    let first = h
        .client
        .get("/api/v1/namespaces/default/configmaps?limit=2")
        .await
        .json();
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(names(&first), ["cm-0", "cm-1"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "base64url: {token}"
    );

    // Writes between pages: a delete, a modify, a new object before and after the cursor.
    h.server.delete("configmaps", Some("default"), "cm-3");
    h.server
        .apply(configmap("default", "cm-2", json!({"v":"changed"})));
    h.server.apply(configmap("default", "cm-25", json!({})));
    h.server.apply(configmap("default", "cm-00", json!({})));

    let second = h
        .client
        .get(&format!(
            "/api/v1/namespaces/default/configmaps?limit=2&continue={token}"
        ))
        .await
        .json();
    assert_eq!(
        second["metadata"]["resourceVersion"], rv,
        "every page reports the first page's RV"
    );
    assert_eq!(
        names(&second),
        ["cm-2", "cm-3"],
        "the state as of the first page"
    );
    assert_eq!(second["items"][0]["data"]["v"], "0");
    assert_eq!(second["metadata"]["remainingItemCount"], 1);
    let token = second["metadata"]["continue"].as_str().unwrap();
    let third = h
        .client
        .get(&format!(
            "/api/v1/namespaces/default/configmaps?limit=2&continue={token}"
        ))
        .await
        .json();
    assert_eq!(names(&third), ["cm-4"]);
    assert_eq!(third["metadata"], json!({"resourceVersion": rv}));

    // A fresh list sees the new state.
    let now = h
        .client
        .get("/api/v1/namespaces/default/configmaps")
        .await
        .json();
    assert_eq!(
        names(&now),
        ["cm-0", "cm-00", "cm-1", "cm-2", "cm-25", "cm-4"]
    );
}

#[tokio::test]
async fn continue_errors_and_expiry() {
    let h = start_default().await;
    for i in 0..3 {
        h.server
            .apply(configmap("default", &format!("cm-{i}"), json!({})));
    }
    let bogus = h
        .client
        .get("/api/v1/namespaces/default/configmaps?limit=1&continue=bogus")
        .await;
    assert_eq!(bogus.code(), 400);
    assert_eq!(
        bogus.json()["message"],
        "invalid continue token: continue key is not valid: illegal base64 data at input byte 4"
    );
    let first = h
        .client
        .get("/api/v1/namespaces/default/configmaps?limit=1")
        .await
        .json();
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    let with_rv = h
        .client
        .get(&format!(
            "/api/v1/namespaces/default/configmaps?limit=1&continue={token}&resourceVersion=5"
        ))
        .await;
    assert_eq!(with_rv.code(), 400);
    h.server
        .apply(configmap("default", "cm-1", json!({"changed":"yes"})));
    h.server.compact();
    let expired = h
        .client
        .get(&format!(
            "/api/v1/namespaces/default/configmaps?limit=1&continue={token}"
        ))
        .await;
    assert_eq!(expired.code(), 410);
    let status = expired.json();
    assert_eq!(status["reason"], "Expired");
    // The 410 carries a token that continues, inconsistently, from the same place.
    let next = status["metadata"]["continue"].as_str().unwrap();
    let rest = h
        .client
        .get(&format!(
            "/api/v1/namespaces/default/configmaps?limit=5&continue={next}"
        ))
        .await
        .json();
    assert_eq!(names(&rest), ["cm-1", "cm-2"]);
    assert_eq!(rest["items"][0]["data"]["changed"], "yes");
}

#[tokio::test]
async fn selectors_resource_versions_and_bad_input() {
    let h = start_default().await;
    h.server.apply(endpoints(
        "default",
        "a",
        json!({"app":"web","tier":"x"}),
        &["10.0.0.1"],
    ));
    h.server.apply(endpoints(
        "default",
        "b",
        json!({"app":"db"}),
        &["10.0.0.2"],
    ));
    h.server
        .apply(endpoints("other", "c", json!({"app":"web"}), &["10.0.0.3"]));
    let client = h.client.clone();
    let get = |q: &str| {
        let client = client.clone();
        let path = format!("/api/v1/endpoints?{q}");
        async move { client.get(&path).await }
    };
    assert_eq!(
        names(&get("labelSelector=app%3Dweb").await.json()),
        ["a", "c"]
    );
    assert_eq!(
        names(&get("labelSelector=app+in+(db),!tier").await.json()),
        ["b"]
    );
    assert_eq!(
        names(
            &get("fieldSelector=metadata.namespace%3Ddefault,metadata.name!%3Da")
                .await
                .json()
        ),
        ["b"]
    );
    assert_eq!(
        names(&get("fieldSelector=metadata.name==c").await.json()),
        ["c"]
    );
    let paged = get("labelSelector=app%3Dweb&limit=1").await.json();
    assert!(paged["metadata"]["continue"].is_string());
    assert!(
        paged["metadata"].get("remainingItemCount").is_none(),
        "omitted with a selector"
    );
    // resourceVersion=0 is served like the watch cache: limit ignored.
    let rv0 = get("limit=1&resourceVersion=0").await.json();
    assert_eq!(names(&rv0).len(), 3);
    assert!(rv0["metadata"].get("continue").is_none());
    // resourceVersionMatch=Exact reads an older state.
    let before = h.server.resource_version();
    h.server.delete("endpoints", Some("default"), "b");
    let exact = get(&format!(
        "resourceVersion={before}&resourceVersionMatch=Exact"
    ))
    .await
    .json();
    assert_eq!(names(&exact), ["a", "b", "c"]);
    assert_eq!(exact["metadata"]["resourceVersion"], before.to_string());

    let bad_label = get("labelSelector=a%20in%20(b").await;
    assert_eq!(bad_label.code(), 400);
    assert_eq!(
        bad_label.json()["message"],
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    let bad_field = h
        .client
        .get("/api/v1/services?fieldSelector=spec.clusterIP%3Dx")
        .await;
    assert_eq!(bad_field.code(), 400);
    assert_eq!(
        bad_field.json()["message"],
        "\"spec.clusterIP\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let bad_rv = get("resourceVersion=abc").await;
    assert_eq!(bad_rv.code(), 500);
    let future = get("resourceVersion=999999999").await;
    assert_eq!(future.code(), 504);
    let unknown = h.client.get("/api/v1/namespaces/default/foos").await;
    assert_eq!(unknown.code(), 404);
    assert_eq!(
        unknown.json()["message"],
        "the server could not find the requested resource"
    );
}

#[tokio::test]
async fn large_lists_arrive_whole() {
    let h = start_default().await;
    h.server
        .load(sitegrid_fakeapi::sample::synthetic(4, 5, 300, 10, "v1"));
    let slices = h
        .client
        .get("/apis/discovery.k8s.io/v1/endpointslices")
        .await
        .json();
    assert_eq!(slices["items"].as_array().unwrap().len(), 300);
    let endpoints: usize = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["endpoints"].as_array().unwrap().len())
        .sum();
    assert_eq!(endpoints, 3000);
    let mut seen = 0;
    let mut token = String::new();
    loop {
        let page = h
            .client
            .get(&format!("/api/v1/services?limit=128&continue={token}"))
            .await
            .json();
        seen += page["items"].as_array().unwrap().len();
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, 300);
}
