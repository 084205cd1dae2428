//! Projector and store behaviour, driven with scripted upstream events.

use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};

use crate::{
    cache::{
        with_start_rv, ApiVersion, Cache, CacheConfig, EventType, ResourceKind, ResourceKind::*,
        Served,
    },
    upstream::UpstreamObject,
};

use super::Writer;

fn obj(v: Value) -> UpstreamObject {
    UpstreamObject::from_json(&v.to_string()).unwrap()
}

fn node(name: &str, location: &str, rv: u64) -> UpstreamObject {
    obj(
        json!({"metadata":{"name":name,"resourceVersion":rv.to_string(),"labels":{"location":location}}}),
    )
}

fn service(name: &str, keys: Option<&str>, rv: u64) -> UpstreamObject {
    let mut meta = json!({"name":name,"namespace":"default","resourceVersion":rv.to_string()});
    if let Some(k) = keys {
        meta["annotations"] = json!({"topologyKeys": k});
    }
    obj(json!({"metadata":meta,"spec":{"ports":[{"port":80}]}}))
}

fn endpoints(name: &str, addrs: &[(&str, &str)], rv: u64) -> UpstreamObject {
    let addresses: Vec<Value> = addrs
        .iter()
        .map(|(ip, n)| json!({"ip":ip,"nodeName":n}))
        .collect();
    obj(
        json!({"metadata":{"name":name,"namespace":"default","resourceVersion":rv.to_string()},
        "subsets":[{"addresses":addresses,"ports":[{"port":8080}]}]}),
    )
}

fn slice(name: &str, svc: &str, eps: &[(&str, &str)], rv: u64) -> UpstreamObject {
    let endpoints: Vec<Value> = eps
        .iter()
        .map(|(ip, n)| json!({"addresses":[ip],"conditions":{"ready":true},"nodeName":n}))
        .collect();
    obj(
        json!({"metadata":{"name":name,"namespace":"default","resourceVersion":rv.to_string(),
        "labels":{"kubernetes.io/service-name":svc}},"addressType":"IPv4","endpoints":endpoints}),
    )
}

fn sync(p: &mut Writer, kind: ResourceKind, objs: Vec<UpstreamObject>) {
    p.handle(kind, W::Init);
    for o in objs {
        p.handle(kind, W::InitApply(o));
    }
    p.handle(kind, W::InitDone);
}

/// An empty cache and its writer for node `local`.
fn writer(local: &str) -> (Cache, Writer) {
    let (cache, slot) = with_start_rv(CacheConfig::default(), 1000);
    (cache, slot.start(local, ApiVersion::V1))
}

fn ips(cache: &Cache, key: &str) -> Vec<String> {
    let v = cache
        .store(Endpoints)
        .get(key)
        .unwrap()
        .body(ApiVersion::V1, ApiVersion::V1)
        .to_value();
    v["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| a["ip"].as_str().unwrap().to_owned())
        .collect()
}

fn slice_ips(cache: &Cache, key: &str) -> Vec<String> {
    let v = cache
        .store(EndpointSlices)
        .get(key)
        .unwrap()
        .body(ApiVersion::V1, ApiVersion::V1)
        .to_value();
    v["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["addresses"][0].as_str().unwrap().to_owned())
        .collect()
}

fn two_sites(p: &mut Writer) {
    sync(
        p,
        Nodes,
        vec![
            node("bj-1", "beijing", 1),
            node("bj-2", "beijing", 2),
            node("gz-1", "guangzhou", 3),
        ],
    );
    sync(
        p,
        Services,
        vec![
            service("echo", Some(r#"["location"]"#), 4),
            service("plain", None, 5),
        ],
    );
    sync(
        p,
        Endpoints,
        vec![
            endpoints(
                "echo",
                &[
                    ("10.0.0.1", "bj-1"),
                    ("10.0.0.2", "bj-2"),
                    ("10.0.0.3", "gz-1"),
                ],
                6,
            ),
            endpoints("plain", &[("10.0.1.1", "bj-1"), ("10.0.1.3", "gz-1")], 7),
        ],
    );
    sync(
        p,
        EndpointSlices,
        vec![slice(
            "echo-a",
            "echo",
            &[("10.0.0.1", "bj-1"), ("10.0.0.3", "gz-1")],
            8,
        )],
    );
}

#[test]
fn endpoints_are_held_back_until_nodes_and_services_are_synced() {
    let (cache, mut p) = writer("bj-1");
    sync(
        &mut p,
        Endpoints,
        vec![endpoints(
            "echo",
            &[("10.0.0.1", "bj-1"), ("10.0.0.3", "gz-1")],
            6,
        )],
    );
    assert!(
        !cache.readiness().is_served(Endpoints),
        "no half-filtered view may be served"
    );
    assert!(cache.store(Endpoints).get("default/echo").is_none());
    sync(
        &mut p,
        Nodes,
        vec![node("bj-1", "beijing", 1), node("gz-1", "guangzhou", 3)],
    );
    sync(
        &mut p,
        Services,
        vec![service("echo", Some(r#"["location"]"#), 4)],
    );
    assert!(cache.readiness().is_served(Endpoints));
    assert_eq!(ips(&cache, "default/echo"), ["10.0.0.1"]);
    // One ADDED for the filtered view: nothing unfiltered was ever logged.
    let sub = cache
        .store(Endpoints)
        .subscribe(Some(cache.start_rv()))
        .unwrap();
    assert_eq!(sub.replay.len(), 1);
}

#[test]
fn topology_filters_endpoints_and_slices_and_plain_services_pass() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    assert_eq!(ips(&cache, "default/echo"), ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(ips(&cache, "default/plain"), ["10.0.1.1", "10.0.1.3"]);
    assert_eq!(slice_ips(&cache, "default/echo-a"), ["10.0.0.1"]);
    assert!(cache.readiness().is_ready());
}

#[test]
fn node_relabel_emits_modified_for_affected_views_only() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before = cache.store(Endpoints).last_rv();
    // gz-1 moves to beijing: its endpoints become local.
    p.handle(Nodes, W::Apply(node("gz-1", "beijing", 20)));
    assert_eq!(
        ips(&cache, "default/echo"),
        ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    );
    let sub = cache.store(Endpoints).subscribe(Some(before)).unwrap();
    let changed: Vec<_> = sub
        .replay
        .iter()
        .map(|e| (e.event_type, e.object.key.clone()))
        .collect();
    assert_eq!(
        changed,
        [(EventType::Modified, "default/echo".to_string())],
        "plain is unfiltered and unchanged"
    );
    assert_eq!(
        slice_ips(&cache, "default/echo-a"),
        ["10.0.0.1", "10.0.0.3"]
    );
    // A status-only node update (same labels) changes no endpoints view.
    let before = cache.store(Endpoints).last_rv();
    p.handle(Nodes, W::Apply(node("gz-1", "beijing", 21)));
    assert_eq!(cache.store(Endpoints).last_rv(), before);
}

#[test]
fn removing_the_annotation_unfilters_and_adding_it_filters_again() {
    let (cache, mut p) = writer("gz-1");
    two_sites(&mut p);
    assert_eq!(ips(&cache, "default/echo"), ["10.0.0.3"]);
    p.handle(Services, W::Apply(service("echo", None, 30)));
    assert_eq!(
        ips(&cache, "default/echo"),
        ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    );
    p.handle(
        Services,
        W::Apply(service("echo", Some(r#"["location"]"#), 31)),
    );
    assert_eq!(ips(&cache, "default/echo"), ["10.0.0.3"]);
}

#[test]
fn relist_emits_only_the_differences_in_one_atomic_batch() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before = cache.current_rv();
    // After a 410 the reflector relists: echo changed, plain deleted, other new.
    sync(
        &mut p,
        Endpoints,
        vec![
            endpoints("echo", &[("10.0.0.1", "bj-1")], 40),
            endpoints("other", &[("10.0.2.1", "bj-2")], 41),
        ],
    );
    let sub = cache.store(Endpoints).subscribe(Some(before)).unwrap();
    let mut changed: Vec<_> = sub
        .replay
        .iter()
        .map(|e| (e.event_type, e.object.key.as_str()))
        .collect();
    changed.sort_by_key(|(_, k)| *k);
    assert_eq!(
        changed,
        [
            (EventType::Modified, "default/echo"),
            (EventType::Added, "default/other"),
            (EventType::Deleted, "default/plain"),
        ]
    );
    // Relisting the same state again changes nothing.
    let before = cache.current_rv();
    sync(
        &mut p,
        Endpoints,
        vec![
            endpoints("echo", &[("10.0.0.1", "bj-1")], 40),
            endpoints("other", &[("10.0.2.1", "bj-2")], 41),
        ],
    );
    assert_eq!(cache.current_rv(), before);
}

#[test]
fn deleted_event_carries_last_state_at_the_deletion_version() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before = cache.current_rv();
    p.handle(Endpoints, W::Delete(endpoints("plain", &[], 50)));
    let sub = cache.store(Endpoints).subscribe(Some(before)).unwrap();
    let ev = &sub.replay[0];
    assert_eq!(ev.event_type, EventType::Deleted);
    assert_eq!(ev.object.rv, ev.rv);
    let frame: Value = serde_json::from_slice(&ev.frame(
        Served {
            kind: Endpoints,
            version: ApiVersion::V1,
        },
        ApiVersion::V1,
    ))
    .unwrap();
    assert_eq!(
        frame["object"]["metadata"]["resourceVersion"],
        json!(ev.rv.to_string())
    );
    assert_eq!(
        frame["object"]["subsets"][0]["addresses"][0]["ip"],
        json!("10.0.1.1")
    );
}

#[test]
fn slices_of_one_service_share_the_chosen_key() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    p.handle(
        Services,
        W::Apply(service("echo", Some(r#"["location","*"]"#), 60)),
    );
    // A second slice with only remote endpoints must not fall back to "*"
    // while the service has a local endpoint in another slice.
    p.handle(
        EndpointSlices,
        W::Apply(slice("echo-b", "echo", &[("10.0.0.9", "gz-1")], 61)),
    );
    assert_eq!(slice_ips(&cache, "default/echo-a"), ["10.0.0.1"]);
    assert_eq!(slice_ips(&cache, "default/echo-b"), Vec::<String>::new());
    // The local endpoint goes away: now "*" applies to both slices.
    p.handle(
        EndpointSlices,
        W::Apply(slice("echo-a", "echo", &[("10.0.0.3", "gz-1")], 62)),
    );
    assert_eq!(slice_ips(&cache, "default/echo-a"), ["10.0.0.3"]);
    assert_eq!(slice_ips(&cache, "default/echo-b"), ["10.0.0.9"]);
}

#[test]
fn exact_snapshot_rolls_back_and_old_versions_are_too_old() {
    let (cache, slot) = with_start_rv(
        CacheConfig {
            log_capacity: 3,
            watcher_buffer: 10,
        },
        1000,
    );
    let mut p = slot.start("bj-1", ApiVersion::V1);
    two_sites(&mut p);
    let at = cache.current_rv();
    p.handle(
        Endpoints,
        W::Apply(endpoints("plain", &[("10.0.1.1", "bj-1")], 70)),
    );
    let old = cache.store(Endpoints).snapshot_at(at, "").unwrap();
    let plain = old.iter().find(|v| v.key == "default/plain").unwrap();
    assert!(plain.rv <= at);
    let ips_then: Vec<String> = plain.body(ApiVersion::V1, ApiVersion::V1).to_value()["subsets"][0]
        ["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ips_then,
        ["10.0.1.1", "10.0.1.3"],
        "the state at `at`, before the update"
    );
    assert_eq!(ips(&cache, "default/plain"), ["10.0.1.1"]);
    p.handle(
        Endpoints,
        W::Apply(endpoints("plain", &[("10.0.1.9", "bj-1")], 71)),
    );
    // The log holds 3 events; the initial ADDED ones have been evicted.
    assert!(cache
        .store(Endpoints)
        .snapshot_at(cache.start_rv(), "")
        .is_err());
    assert!(cache
        .store(Endpoints)
        .subscribe(Some(cache.start_rv()))
        .is_err());
}
