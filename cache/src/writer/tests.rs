//! The writer and the stores, driven with scripted upstream events over the
//! shared two-site world (`sitegrid_fakeapi::sample`): bj-1..3 in beijing,
//! gz-1..3 in guangzhou; `servicegrid-demo-svc` (topologyKeys location) with
//! pods on bj-1 10.0.0.70, bj-3 10.0.1.72, gz-2 10.0.0.139, gz-3 10.0.1.8;
//! `plain-echo` (unfiltered) on bj-2 10.0.0.81 and gz-1 10.0.1.33.

use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};

use crate::{
    with_start_rv, ApiVersion, Cache, CacheConfig, EventType, ResourceKind, ResourceKind::*,
    Served, UpstreamObject, Wire,
};

use super::Writer;
use crate::testing::{obj as obj_ref, sync};

fn obj(v: Value) -> UpstreamObject {
    obj_ref(&v)
}

/// The world's objects of `kind`, with the versions an API server would give them.
fn world(kind: ResourceKind) -> Vec<UpstreamObject> {
    sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .filter(|o| o["kind"] == kind.kind())
        .enumerate()
        .map(|(i, mut o)| {
            o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
            obj(o)
        })
        .collect()
}

/// The world's `kind` object named `ns/name` (`ns` empty for nodes), as JSON.
fn world_object(kind: ResourceKind, ns: &str, name: &str) -> Value {
    sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .find(|o| {
            o["kind"] == kind.kind()
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"].as_str().unwrap_or("") == ns
        })
        .unwrap_or_else(|| panic!("no {kind} {ns}/{name} in the sample"))
}

fn node(name: &str, location: &str, rv: u64) -> UpstreamObject {
    let mut o = world_object(Nodes, "", name);
    o["metadata"]["labels"]["location"] = json!(location);
    o["metadata"]["resourceVersion"] = json!(rv.to_string());
    obj(o)
}

fn service(name: &str, keys: Option<&str>, rv: u64) -> UpstreamObject {
    let mut o = world_object(Services, "default", name);
    match keys {
        Some(k) => o["metadata"]["annotations"] = json!({"topologyKeys": k}),
        None => {
            if let Some(meta) = o["metadata"].as_object_mut() {
                meta.shift_remove("annotations");
            }
        }
    }
    o["metadata"]["resourceVersion"] = json!(rv.to_string());
    obj(o)
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

/// An empty cache and its writer for node `local`.
fn writer(local: &str) -> (Cache, Writer) {
    let (cache, slot) = with_start_rv(CacheConfig::default(), 1000);
    (cache, slot.start(local, ApiVersion::V1))
}

/// The whole world, as after a first sync.
fn two_sites(p: &mut Writer) {
    for kind in [Nodes, Services, Endpoints, EndpointSlices] {
        sync(p, kind, world(kind));
    }
}

/// The ready addresses of the Endpoints `default/name` as served.
fn ips(cache: &Cache, name: &str) -> Vec<String> {
    let v = cache
        .store(Endpoints)
        .get(&format!("default/{name}"))
        .unwrap()
        .body(cache.codec(), ApiVersion::V1, ApiVersion::V1)
        .to_value();
    v["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| a["ip"].as_str().unwrap().to_owned())
        .collect()
}

/// The key of the EndpointSlice of Service `default/svc` the world has.
fn slice_key(svc: &str) -> String {
    let slice = sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .find(|o| {
            o["kind"] == "EndpointSlice"
                && o["metadata"]["labels"]["kubernetes.io/service-name"] == svc
        })
        .unwrap();
    format!("default/{}", slice["metadata"]["name"].as_str().unwrap())
}

/// The addresses of the EndpointSlice `key` as served.
fn slice_ips(cache: &Cache, key: &str) -> Vec<String> {
    let v = cache
        .store(EndpointSlices)
        .get(key)
        .unwrap()
        .body(cache.codec(), ApiVersion::V1, ApiVersion::V1)
        .to_value();
    v["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["addresses"][0].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn endpoints_are_held_back_until_nodes_and_services_are_synced() {
    let (cache, mut p) = writer("bj-1");
    sync(&mut p, Endpoints, world(Endpoints));
    assert!(
        !cache.readiness().is_served(Endpoints),
        "no half-filtered view may be served"
    );
    assert!(cache
        .store(Endpoints)
        .get("default/servicegrid-demo-svc")
        .is_none());
    sync(&mut p, Nodes, world(Nodes));
    sync(&mut p, Services, world(Services));
    assert!(cache.readiness().is_served(Endpoints));
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.70", "10.0.1.72"]
    );
    // The first served state is not kept for resume (nobody could hold an
    // earlier version): a watch from before it relists, one from it resumes.
    let store = cache.store(Endpoints);
    assert!(store.subscribe(Some(cache.start_rv())).is_err());
    assert!(store
        .subscribe(Some(store.last_rv()))
        .unwrap()
        .replay
        .is_empty());
    assert_eq!(store.sizes().log_events, 0);
}

#[test]
fn topology_filters_endpoints_and_slices_and_plain_services_pass() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.70", "10.0.1.72"]
    );
    assert_eq!(ips(&cache, "plain-echo"), ["10.0.0.81", "10.0.1.33"]);
    assert_eq!(
        slice_ips(&cache, &slice_key("servicegrid-demo-svc")),
        ["10.0.0.70", "10.0.1.72"]
    );
    assert!(cache.readiness().is_ready());
}

#[test]
fn node_relabel_emits_modified_for_affected_views_only() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before = cache.store(Endpoints).last_rv();
    // gz-2 moves to beijing: its pod becomes local.
    p.handle(Nodes, W::Apply(node("gz-2", "beijing", 20)));
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.139", "10.0.0.70", "10.0.1.72"]
    );
    let sub = cache.store(Endpoints).subscribe(Some(before)).unwrap();
    let changed: Vec<_> = sub
        .replay
        .iter()
        .map(|e| (e.event_type, e.object.key().to_owned()))
        .collect();
    assert_eq!(
        changed,
        [(
            EventType::Modified,
            "default/servicegrid-demo-svc".to_string()
        )],
        "the unfiltered Services are unchanged"
    );
    assert_eq!(
        slice_ips(&cache, &slice_key("servicegrid-demo-svc")),
        ["10.0.0.70", "10.0.1.72", "10.0.0.139"]
    );
    // A status-only node update (same labels) changes no endpoints view.
    let before = cache.store(Endpoints).last_rv();
    p.handle(Nodes, W::Apply(node("gz-2", "beijing", 21)));
    assert_eq!(cache.store(Endpoints).last_rv(), before);
}

#[test]
fn removing_the_annotation_unfilters_and_adding_it_filters_again() {
    let (cache, mut p) = writer("gz-1");
    two_sites(&mut p);
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.139", "10.0.1.8"]
    );
    p.handle(
        Services,
        W::Apply(service("servicegrid-demo-svc", None, 30)),
    );
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.139", "10.0.0.70", "10.0.1.72", "10.0.1.8"]
    );
    p.handle(
        Services,
        W::Apply(service("servicegrid-demo-svc", Some(r#"["location"]"#), 31)),
    );
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.139", "10.0.1.8"]
    );
}

#[test]
fn relist_emits_only_the_differences_in_one_atomic_batch() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before = cache.current_rv();
    // After a 410 the reflector relists: the demo Service changed, plain-echo
    // was deleted, `other` is new, everything else is as it was.
    let relisted = || {
        let mut objs: Vec<UpstreamObject> = world(Endpoints)
            .into_iter()
            .filter(|o| {
                !matches!(
                    o.key().as_str(),
                    "default/plain-echo" | "default/servicegrid-demo-svc"
                )
            })
            .collect();
        objs.push(endpoints(
            "servicegrid-demo-svc",
            &[("10.0.0.70", "bj-1")],
            40,
        ));
        objs.push(endpoints("other", &[("10.0.2.1", "bj-2")], 41));
        objs
    };
    sync(&mut p, Endpoints, relisted());
    let sub = cache.store(Endpoints).subscribe(Some(before)).unwrap();
    let mut changed: Vec<_> = sub
        .replay
        .iter()
        .map(|e| (e.event_type, e.object.key()))
        .collect();
    changed.sort_by_key(|(_, k)| *k);
    assert_eq!(
        changed,
        [
            (EventType::Added, "default/other"),
            (EventType::Deleted, "default/plain-echo"),
            (EventType::Modified, "default/servicegrid-demo-svc"),
        ]
    );
    // Relisting the same state again changes nothing.
    let before = cache.current_rv();
    sync(&mut p, Endpoints, relisted());
    assert_eq!(cache.current_rv(), before);
}

#[test]
fn deleted_event_carries_last_state_at_the_deletion_version() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before = cache.current_rv();
    p.handle(Endpoints, W::Delete(endpoints("plain-echo", &[], 50)));
    let sub = cache.store(Endpoints).subscribe(Some(before)).unwrap();
    let ev = &sub.replay[0];
    assert_eq!(ev.event_type, EventType::Deleted);
    assert_eq!(ev.object.rv, ev.rv);
    let frame: Value = serde_json::from_slice(
        &ev.frame(
            cache.codec(),
            Served {
                kind: Endpoints,
                version: ApiVersion::V1,
            },
            ApiVersion::V1,
            Wire::Json,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        frame["object"]["metadata"]["resourceVersion"],
        json!(ev.rv.to_string())
    );
    assert_eq!(
        frame["object"]["subsets"][0]["addresses"][0]["ip"],
        json!("10.0.0.81")
    );
}

#[test]
fn slices_of_one_service_share_the_chosen_key() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let svc = "servicegrid-demo-svc";
    let first = slice_key(svc);
    p.handle(
        Services,
        W::Apply(service(svc, Some(r#"["location","*"]"#), 60)),
    );
    // A second slice with only remote endpoints must not fall back to "*"
    // while the service has a local endpoint in another slice.
    p.handle(
        EndpointSlices,
        W::Apply(slice("demo-b", svc, &[("10.0.0.9", "gz-1")], 61)),
    );
    assert_eq!(slice_ips(&cache, &first), ["10.0.0.70", "10.0.1.72"]);
    assert_eq!(slice_ips(&cache, "default/demo-b"), Vec::<String>::new());
    // The local endpoints go away: now "*" applies to both slices.
    let first_name = first.trim_start_matches("default/");
    p.handle(
        EndpointSlices,
        W::Apply(slice(first_name, svc, &[("10.0.0.139", "gz-2")], 62)),
    );
    assert_eq!(slice_ips(&cache, &first), ["10.0.0.139"]);
    assert_eq!(slice_ips(&cache, "default/demo-b"), ["10.0.0.9"]);
}

#[test]
fn exact_snapshot_rolls_back_and_old_versions_are_too_old() {
    let (cache, slot) = with_start_rv(
        CacheConfig {
            log_capacity: 3,
            watcher_buffer: 10,
            ..CacheConfig::default()
        },
        1000,
    );
    let mut p = slot.start("bj-1", ApiVersion::V1);
    two_sites(&mut p);
    let at = cache.current_rv();
    p.handle(
        Endpoints,
        W::Apply(endpoints("plain-echo", &[("10.0.1.1", "bj-1")], 70)),
    );
    let old = cache.store(Endpoints).snapshot_at(at, "").unwrap();
    let plain = old
        .iter()
        .find(|v| v.key() == "default/plain-echo")
        .unwrap();
    assert!(plain.rv <= at);
    let ips_then: Vec<String> = plain
        .body(cache.codec(), ApiVersion::V1, ApiVersion::V1)
        .to_value()["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ips_then,
        ["10.0.0.81", "10.0.1.33"],
        "the state at `at`, before the update"
    );
    assert_eq!(ips(&cache, "plain-echo"), ["10.0.1.1"]);
    p.handle(
        Endpoints,
        W::Apply(endpoints("plain-echo", &[("10.0.1.9", "bj-1")], 71)),
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

// --- the snapshot (`--data-dir`) -------------------------------------------

/// What a restarted proxy gets from `cache`'s writer `p`: the snapshot's bytes, read back.
fn restart_from(p: &Writer, node: &str) -> (Cache, super::WriterSlot) {
    let bytes = p.capture().snapshot().encode().unwrap();
    let restored = crate::persist::load(&bytes, node, Default::default()).unwrap();
    crate::open(
        CacheConfig::default(),
        crate::persist::Opened {
            disk: None,
            restored: Some(restored),
        },
    )
}

/// Every served object of `kind`: key, resourceVersion, body.
fn served(cache: &Cache, kind: ResourceKind) -> Vec<(String, u64, bytes::Bytes)> {
    let (views, _) = cache.store(kind).snapshot("");
    views
        .iter()
        .map(|v| (v.key().to_owned(), v.rv, v.native_body()))
        .collect()
}

#[test]
fn a_restored_cache_serves_the_same_objects_versions_and_resume_log() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let before_change = cache.store(Endpoints).last_rv();
    p.handle(
        Endpoints,
        W::Apply(endpoints("plain-echo", &[("10.0.1.1", "bj-1")], 70)),
    );
    let (again, _slot) = restart_from(&p, "bj-1");
    // Nothing is served before the proxy decides the API server is not answering.
    assert!(!again.readiness().is_served(Endpoints));
    let restored = again.readiness().serve_restored();
    assert_eq!(
        restored,
        [Services, Endpoints, EndpointSlices, Nodes],
        "the kinds served before"
    );
    for kind in restored {
        assert_eq!(served(&again, kind), served(&cache, kind), "{kind}");
        assert_eq!(again.store(kind).last_rv(), cache.store(kind).last_rv());
    }
    assert!(
        again.start_rv() > cache.current_rv(),
        "versions keep increasing"
    );
    assert!(again.readiness().degraded().is_some());
    // A watch resumed from before the change is replayed the change.
    let sub = again
        .store(Endpoints)
        .subscribe(Some(before_change))
        .unwrap();
    let replayed: Vec<(EventType, String)> = sub
        .replay
        .iter()
        .map(|e| (e.event_type, e.object.key().to_owned()))
        .collect();
    assert_eq!(
        replayed,
        [(EventType::Modified, "default/plain-echo".to_owned())]
    );
    let prev = sub.replay[0].prev.as_ref().unwrap();
    assert!(String::from_utf8_lossy(&prev.native_body()).contains("10.0.0.81"));
    // One from before what the log covers gets 410, as before the restart.
    assert!(again
        .store(Endpoints)
        .subscribe(Some(before_change - 1))
        .is_err());
}

#[test]
fn after_a_restart_the_first_sync_sends_only_the_differences() {
    let (_cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let (again, slot) = restart_from(&p, "bj-1");
    again.readiness().serve_restored();
    let clock = again.current_rv();
    let mut live: Vec<_> = ResourceKind::ALL
        .iter()
        .map(|k| again.store(*k).subscribe(None).unwrap().live)
        .collect();
    let mut p = slot.start("bj-1", ApiVersion::V1);
    // While the proxy was down: plain-echo's Endpoints went, its slice moved
    // to gz-1 only, and gz-3 left.
    let eps: Vec<UpstreamObject> = world(Endpoints)
        .into_iter()
        .filter(|o| o.key() != "default/plain-echo")
        .collect();
    let plain_slice = slice_key("plain-echo");
    let slices: Vec<UpstreamObject> = world(EndpointSlices)
        .into_iter()
        .map(|o| match o.key() == plain_slice {
            true => slice(
                plain_slice.trim_start_matches("default/"),
                "plain-echo",
                &[("10.0.1.33", "gz-1")],
                91,
            ),
            false => o,
        })
        .collect();
    let nodes: Vec<UpstreamObject> = world(Nodes)
        .into_iter()
        .filter(|n| n.key() != "gz-3")
        .collect();
    // Endpoints first: their deletion needs no topology.
    sync(&mut p, Endpoints, eps);
    sync(&mut p, Nodes, nodes);
    sync(&mut p, Services, world(Services));
    assert!(
        again.readiness().degraded().is_some(),
        "slices are still the snapshot's"
    );
    sync(&mut p, EndpointSlices, slices);
    assert_eq!(again.readiness().degraded(), None);
    let mut got = Vec::new();
    for (kind, rx) in ResourceKind::ALL.iter().zip(live.iter_mut()) {
        while let Ok(e) = rx.try_recv() {
            got.push((*kind, e.event_type.as_str(), e.object.key().to_owned()));
        }
    }
    got.sort();
    assert_eq!(
        got,
        [
            (Endpoints, "DELETED", "default/plain-echo".to_owned()),
            (EndpointSlices, "MODIFIED", plain_slice.clone()),
            (Nodes, "DELETED", "gz-3".to_owned()),
        ],
        "no ADDED storm, only what changed (gz-3 is not in bj-1's site: no view changes with it)"
    );
    assert!(again.current_rv() > clock);
    assert!(again.store(Endpoints).get("default/plain-echo").is_none());
}

#[test]
fn a_snapshot_taken_for_another_node_is_refused() {
    let (_cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let bytes = p.capture().snapshot().encode().unwrap();
    let err = crate::persist::load(&bytes, "gz-1", Default::default())
        .err()
        .unwrap();
    assert!(err.contains("\"bj-1\""), "{err}");
    let err = crate::persist::load(&bytes[..bytes.len() / 2], "bj-1", Default::default())
        .err()
        .unwrap();
    assert!(err.starts_with("truncated"), "{err}");
}

/// bj-1's proxy restarted from a snapshot of `p` (its EndpointSlices in v1)
/// by an API server downgraded meanwhile, which serves
/// discovery.k8s.io/v1beta1 only: the restored cache and its writer, given
/// every object again, and the v1beta1 slices it was given, as JSON.
fn restarted_behind_v1beta1(p: &Writer) -> (Cache, Writer, Vec<Value>) {
    let (again, slot) = restart_from(p, "bj-1");
    again.readiness().serve_restored();
    let mut p = slot.start("bj-1", ApiVersion::V1beta1);
    for kind in [Nodes, Services, Endpoints] {
        sync(&mut p, kind, world(kind));
    }
    let mut slices: Vec<Value> = sitegrid_fakeapi::sample::two_sites("v1beta1")
        .into_iter()
        .filter(|o| o["kind"] == "EndpointSlice")
        .collect();
    for (i, o) in slices.iter_mut().enumerate() {
        o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
    }
    sync(&mut p, EndpointSlices, slices.iter().cloned().map(obj));
    (again, p, slices)
}

#[test]
fn slices_restored_in_v1_stay_v1_when_the_api_server_serves_only_v1beta1() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let key = slice_key("servicegrid-demo-svc");
    let before = slice_ips(&cache, &key);
    let (again, _p, _) = restarted_behind_v1beta1(&p);
    assert_eq!(
        again.native(EndpointSlices),
        ApiVersion::V1,
        "the snapshot's version"
    );
    assert_eq!(again.readiness().degraded(), None);
    // Converted on arrival: stored in v1 (nodeName on each endpoint), filtered as before.
    assert_eq!(slice_ips(&again, &key), before);
    let body = again
        .store(EndpointSlices)
        .get(&key)
        .unwrap()
        .native_body_value();
    assert!(body["endpoints"][0]["nodeName"].is_string(), "{body}");
    assert!(body["endpoints"][0].get("topology").is_none(), "{body}");
}

/// The same, a slice then changing in a protobuf watch event: converted to
/// v1 on arrival, it is kept as v1, not as the v1beta1 bytes it came in, so
/// its view recomputed later (a node moving site) is v1 still.
#[test]
fn a_slice_converted_from_a_protobuf_watch_is_recomputed_in_the_snapshots_version() {
    let (_cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let key = slice_key("servicegrid-demo-svc");
    let (again, mut p, slices) = restarted_behind_v1beta1(&p);
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // The demo slice changes (a write the API server stamps), in protobuf.
    let mut demo = slices
        .into_iter()
        .find(|o| key.ends_with(&format!("/{}", o["metadata"]["name"].as_str().unwrap())))
        .unwrap();
    demo["metadata"]["resourceVersion"] = json!("100");
    demo["metadata"]["generation"] = json!(2);
    let v1beta1 = Served {
        kind: EndpointSlices,
        version: ApiVersion::V1beta1,
    };
    let event = crate::testing::carried(v1beta1, &demo, false);
    p.handle(EndpointSlices, W::Apply(event));
    assert_eq!(
        sorted(slice_ips(&again, &key)),
        ["10.0.0.70", "10.0.1.72"],
        "beijing's endpoints"
    );
    // gz-2 moves to beijing: the view is recomputed from what the writer kept.
    p.handle(Nodes, W::Apply(node("gz-2", "beijing", 101)));
    assert_eq!(
        sorted(slice_ips(&again, &key)),
        ["10.0.0.139", "10.0.0.70", "10.0.1.72"],
        "gz-2's endpoint joins"
    );
    let body = again
        .store(EndpointSlices)
        .get(&key)
        .unwrap()
        .native_body_value();
    for e in body["endpoints"].as_array().unwrap() {
        assert!(e["nodeName"].is_string(), "v1: {body}");
        assert!(e.get("topology").is_none(), "v1: {body}");
    }
}

/// Offline, bj-1's kubelet reports its pod at a new address while the demo
/// slice changes in a protobuf watch event (read as its message, its
/// endpoints written only once chosen): the report reaches the slice's view
/// as it does one read in JSON, and guangzhou's endpoints stay out.
#[test]
fn the_kubelets_report_reaches_a_slice_read_from_protobuf() {
    let key = slice_key("servicegrid-demo-svc");
    let mut demo = sitegrid_fakeapi::sample::two_sites("v1")
        .into_iter()
        .find(|o| {
            o["kind"] == "EndpointSlice" && key.ends_with(o["metadata"]["name"].as_str().unwrap())
        })
        .unwrap();
    let uid = demo["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["addresses"][0] == "10.0.0.70")
        .unwrap()["targetRef"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    demo["metadata"]["resourceVersion"] = json!("100");
    let v1 = Served {
        kind: EndpointSlices,
        version: ApiVersion::V1,
    };
    let mut served = Vec::new();
    for protobuf in [false, true] {
        let (cache, mut p) = writer("bj-1");
        two_sites(&mut p);
        p.local_changed(vec![super::LocalPod {
            uid: uid.clone(),
            node: "bj-1".into(),
            ips: vec!["10.0.0.99".into()],
            ready: true,
            running: true,
        }]);
        let event = if protobuf {
            crate::testing::carried(v1, &demo, false)
        } else {
            obj(demo.clone())
        };
        p.handle(EndpointSlices, W::Apply(event));
        let mut ips = slice_ips(&cache, &key);
        ips.sort();
        assert_eq!(ips, ["10.0.0.99", "10.0.1.72"], "protobuf: {protobuf}");
        served.push(
            cache
                .store(EndpointSlices)
                .get(&key)
                .unwrap()
                .native_body_value(),
        );
    }
    // The sample's JSON leaves out what kube-apiserver writes of an empty
    // field (`creationTimestamp: null`, which the object read from
    // protobuf has), and each writer numbers its own versions: the
    // endpoints are what compares.
    assert_eq!(
        served[0]["endpoints"], served[1]["endpoints"],
        "read from JSON, then from protobuf"
    );
}

/// A Service that names a key whose nodes the membership has not listed yet
/// keeps its views as they are (a new one is not served) until it has:
/// never filtered against half of them.
#[test]
fn a_service_waits_for_the_nodes_of_a_new_key_before_it_is_filtered_by_it() {
    use std::collections::{BTreeMap, BTreeSet};
    let scopes = |pairs: &[(&str, &str)]| -> BTreeMap<String, BTreeSet<String>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (k, v) in pairs {
            m.entry(k.to_string()).or_default().insert(v.to_string());
        }
        m
    };
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    p.scopes_covered(scopes(&[("location", "beijing")]));
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.70", "10.0.1.72"]
    );
    // Now it prefers endpoints on the node itself: no hostname scope yet.
    p.handle(
        Services,
        W::Apply(service(
            "servicegrid-demo-svc",
            Some(r#"["kubernetes.io/hostname","location"]"#),
            30,
        )),
    );
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.70", "10.0.1.72"],
        "held as it was"
    );
    // An endpoints change meanwhile is held too.
    p.handle(
        Endpoints,
        W::Apply(endpoints(
            "servicegrid-demo-svc",
            &[
                ("10.0.0.70", "bj-1"),
                ("10.0.1.72", "bj-3"),
                ("10.0.0.71", "bj-2"),
            ],
            31,
        )),
    );
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.70", "10.0.1.72"]
    );
    // The hostname scope is listed: the Service is filtered by it at last.
    p.scopes_covered(scopes(&[
        ("location", "beijing"),
        ("kubernetes.io/hostname", "bj-1"),
    ]));
    assert_eq!(ips(&cache, "servicegrid-demo-svc"), ["10.0.0.70"]);
    // A writer that tracks no scopes (fed directly) holds nothing.
    let (direct, mut q) = writer("bj-1");
    two_sites(&mut q);
    q.handle(
        Services,
        W::Apply(service(
            "servicegrid-demo-svc",
            Some(r#"["kubernetes.io/hostname","location"]"#),
            30,
        )),
    );
    assert_eq!(ips(&direct, "servicegrid-demo-svc"), ["10.0.0.70"]);
}

/// Metadata of the wrong type in a field the upstream decode does not read
/// (it reads name, namespace, resourceVersion, labels and annotations) is
/// still caught: the writer reads every object whole with its typed struct,
/// skips it, and keeps serving its last good version.
#[test]
fn metadata_of_the_wrong_type_anywhere_is_skipped_and_the_last_good_version_stays() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let good = ips(&cache, "plain-echo");
    assert!(!good.is_empty());
    let mut spoiled = world_object(Endpoints, "default", "plain-echo");
    spoiled["metadata"]["resourceVersion"] = json!("900");
    spoiled["metadata"]["creationTimestamp"] = json!(5);
    spoiled["metadata"]["managedFields"] = json!("x");
    spoiled["subsets"][0]["addresses"][0]["ip"] = json!("10.9.9.9");
    let spoiled = obj(spoiled);
    assert!(spoiled.invalid.is_none(), "the upstream decode takes it");
    p.handle(Endpoints, W::Apply(spoiled));
    assert_eq!(ips(&cache, "plain-echo"), good, "the last good version");
    // Good again: taken in.
    let mut fixed = world_object(Endpoints, "default", "plain-echo");
    fixed["metadata"]["resourceVersion"] = json!("901");
    fixed["subsets"][0]["addresses"][0]["ip"] = json!("10.9.9.9");
    p.handle(Endpoints, W::Apply(obj(fixed)));
    assert!(ips(&cache, "plain-echo").contains(&"10.9.9.9".to_owned()));
}

/// An EndpointSlice write that changes only guangzhou's endpoints reaches
/// beijing's view as a new generation, managedFields and trigger time:
/// bj-1 gets no event and keeps serving the state it had (resumed watches
/// and lists agree); a beijing endpoint's change is an event, carrying the
/// newest stamps.
#[test]
fn another_sites_change_is_no_event_here() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let key = slice_key("servicegrid-demo-svc");
    let name = key.trim_start_matches("default/");
    let stamped = |eps: &[(&str, &str)], generation: u64, rv: u64| {
        let mut o: Value =
            serde_json::from_str(&slice(name, "servicegrid-demo-svc", eps, rv).json()).unwrap();
        o["metadata"]["generation"] = json!(generation);
        let time = format!("2026-11-28T10:00:{:02}Z", rv % 60);
        o["metadata"]["managedFields"] = json!([{"manager": "kcm", "time": time}]);
        o["metadata"]["annotations"] =
            json!({"endpoints.kubernetes.io/last-change-trigger-time": time});
        obj(o)
    };
    let bj = [("10.0.0.70", "bj-1"), ("10.0.1.72", "bj-3")];
    p.handle(
        EndpointSlices,
        W::Apply(stamped(&[bj[0], bj[1], ("10.0.0.139", "gz-2")], 2, 70)),
    );
    let before = cache.store(EndpointSlices).last_rv();
    let served_before = cache.store(EndpointSlices).get(&key).unwrap();
    // gz-2's pod goes, gz-3's comes: nothing beijing routes to.
    p.handle(
        EndpointSlices,
        W::Apply(stamped(&[bj[0], bj[1], ("10.0.1.8", "gz-3")], 3, 71)),
    );
    assert_eq!(cache.store(EndpointSlices).last_rv(), before, "no event");
    let served = cache.store(EndpointSlices).get(&key).unwrap();
    assert_eq!(served.rv, served_before.rv);
    assert_eq!(served.native_body(), served_before.native_body());
    assert!(cache
        .store(EndpointSlices)
        .subscribe(Some(before))
        .unwrap()
        .replay
        .is_empty());

    // A beijing pod goes: an event, with the newest generation.
    p.handle(
        EndpointSlices,
        W::Apply(stamped(&[bj[0], ("10.0.1.8", "gz-3")], 4, 72)),
    );
    let sub = cache.store(EndpointSlices).subscribe(Some(before)).unwrap();
    assert_eq!(sub.replay.len(), 1);
    let v = sub.replay[0].object.native_body_value();
    assert_eq!(v["metadata"]["generation"], 4);
    assert_eq!(slice_ips(&cache, &key), ["10.0.0.70"]);
}

/// A Service deleted before its endpoints (as a delete wave goes: the
/// Service, then the garbage collector's slices, the endpoints controller's
/// Endpoints) leaves their views as they were: no event until they go, and
/// their DELETED events carry the site's endpoints, not every site's. A
/// Service of the same name made again without keys unfilters them.
#[test]
fn a_deleted_services_endpoints_keep_their_views_until_they_go() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let key = slice_key("servicegrid-demo-svc");
    let before = cache.current_rv();
    p.handle(
        Services,
        W::Delete(service("servicegrid-demo-svc", Some(r#"["location"]"#), 80)),
    );
    for kind in [Endpoints, EndpointSlices] {
        assert!(
            cache
                .store(kind)
                .subscribe(Some(before))
                .unwrap()
                .replay
                .is_empty(),
            "no {kind} event for the Service's deletion"
        );
    }
    assert_eq!(slice_ips(&cache, &key), ["10.0.0.70", "10.0.1.72"]);
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.70", "10.0.1.72"]
    );

    // The garbage collector deletes the slice: its DELETED event is the
    // filtered view, and nothing is kept of the Service after it.
    let upstream = p.upstream_value(EndpointSlices, &key, None).unwrap();
    p.handle(EndpointSlices, W::Delete(obj(upstream)));
    let sub = cache.store(EndpointSlices).subscribe(Some(before)).unwrap();
    assert_eq!(sub.replay.len(), 1);
    assert_eq!(sub.replay[0].event_type, EventType::Deleted);
    let gone = sub.replay[0].object.native_body_value();
    let addrs: Vec<_> = gone["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["addresses"][0].clone())
        .collect();
    assert_eq!(addrs, [json!("10.0.0.70"), json!("10.0.1.72")]);
    assert_eq!(p.services.keys("default/servicegrid-demo-svc"), None);

    // Made again without keys while its Endpoints remain: every site's.
    p.handle(
        Services,
        W::Apply(service("servicegrid-demo-svc", None, 82)),
    );
    assert_eq!(
        ips(&cache, "servicegrid-demo-svc"),
        ["10.0.0.139", "10.0.0.70", "10.0.1.72", "10.0.1.8"]
    );
}

/// A slice of a deleted Service changed before the garbage collector
/// deletes it (its pods going meanwhile) keeps its site's view: the keys
/// kept for it stay while it does.
#[test]
fn a_deleted_services_slice_changed_before_it_goes_stays_filtered() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let key = slice_key("servicegrid-demo-svc");
    let name = key.trim_start_matches("default/");
    p.handle(
        Services,
        W::Delete(service("servicegrid-demo-svc", Some(r#"["location"]"#), 80)),
    );
    // A guangzhou pod goes, a beijing one stays.
    let eps = [("10.0.0.70", "bj-1"), ("10.0.0.139", "gz-2")];
    p.handle(
        EndpointSlices,
        W::Apply(slice(name, "servicegrid-demo-svc", &eps, 81)),
    );
    assert_eq!(slice_ips(&cache, &key), ["10.0.0.70"]);
    assert_eq!(
        p.services
            .keys("default/servicegrid-demo-svc")
            .map(|k| k.0.len()),
        Some(1),
        "the deleted Service's keys stay with its slice"
    );
}

/// Deleted, then made again while its slice remains: with other keys the
/// slice is projected anew; without any, unfiltered.
#[test]
fn a_service_made_again_before_its_slices_went_reprojects_them() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let key = slice_key("servicegrid-demo-svc");
    p.handle(
        Services,
        W::Delete(service("servicegrid-demo-svc", Some(r#"["location"]"#), 80)),
    );
    p.handle(
        Services,
        W::Apply(service("servicegrid-demo-svc", None, 81)),
    );
    assert_eq!(
        slice_ips(&cache, &key),
        ["10.0.0.70", "10.0.1.72", "10.0.0.139", "10.0.1.8"]
    );
    p.handle(
        Services,
        W::Apply(service("servicegrid-demo-svc", Some(r#"["location"]"#), 82)),
    );
    assert_eq!(slice_ips(&cache, &key), ["10.0.0.70", "10.0.1.72"]);
}

/// `--drop-managed-fields`: every view is served without
/// `metadata.managedFields`, the rest of the object as it came; without the
/// flag they are served as the API server sent them.
#[test]
fn managed_fields_are_dropped_from_views_only_when_asked() {
    for drop in [false, true] {
        let config = CacheConfig {
            drop_managed_fields: drop,
            ..CacheConfig::default()
        };
        let (cache, slot) = with_start_rv(config, 1000);
        let mut p = slot.start("bj-1", ApiVersion::V1);
        two_sites(&mut p);
        let managed = json!([{"manager": "kube-controller-manager", "operation": "Update",
            "apiVersion": "v1", "time": "2026-11-28T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:ports": {}}}}]);
        let mut svc = world_object(Services, "default", "plain-echo");
        svc["metadata"]["managedFields"] = managed.clone();
        svc["metadata"]["resourceVersion"] = json!("60");
        // A change that counts (managedFields alone would be no event).
        svc["metadata"]["labels"]["tier"] = json!("edge");
        p.handle(Services, W::Apply(obj(svc.clone())));
        let key = slice_key("servicegrid-demo-svc");
        let mut slice_json = p.upstream_value(EndpointSlices, &key, None).unwrap();
        slice_json["metadata"]["managedFields"] = managed.clone();
        slice_json["metadata"]["resourceVersion"] = json!("61");
        slice_json["endpoints"][0]["conditions"]["ready"] = json!(false);
        p.handle(EndpointSlices, W::Apply(obj(slice_json)));
        for (kind, key) in [
            (Services, "default/plain-echo".to_owned()),
            (EndpointSlices, key),
        ] {
            let served = cache.store(kind).get(&key).unwrap().native_body_value();
            assert_eq!(
                served["metadata"].get("managedFields"),
                (!drop).then_some(&managed),
                "{kind} with drop_managed_fields={drop}"
            );
        }
        let served = cache
            .store(Services)
            .get("default/plain-echo")
            .unwrap()
            .native_body_value();
        assert_eq!(served["spec"], svc["spec"]);
        assert_eq!(served["metadata"]["labels"], svc["metadata"]["labels"]);
    }
}

/// Offline, bj-1's kubelet reports its pod back at a new address
/// (`local.rs`); the API server answers again, the report is let go and its
/// view wins (the old address, until the endpoints controller hears of the
/// pod's status). Each step reaches watchers as an ordinary MODIFIED event
/// at a higher resourceVersion, and a watch resumed from any version on the
/// way gets exactly the steps after it, in order: nothing replayed, nothing
/// going back.
#[test]
fn the_kubelets_word_then_the_api_servers_view_reach_resumed_watches_in_order() {
    let (cache, mut p) = writer("bj-1");
    two_sites(&mut p);
    let served = |cache: &Cache| {
        let mut v = ips(cache, "servicegrid-demo-svc");
        v.sort();
        v
    };
    let mut upstream = world_object(Endpoints, "default", "servicegrid-demo-svc");
    let uid = upstream["subsets"][0]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["ip"] == "10.0.0.70")
        .unwrap()["targetRef"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let store = cache.store(Endpoints);
    let online = store.last_rv();

    p.local_changed(vec![super::LocalPod {
        uid,
        node: "bj-1".into(),
        ips: vec!["10.0.0.99".into()],
        ready: true,
        running: true,
    }]);
    assert_eq!(served(&cache), ["10.0.0.99", "10.0.1.72"]);
    let reported = store.last_rv();

    p.local_changed(Vec::new());
    assert_eq!(
        served(&cache),
        ["10.0.0.70", "10.0.1.72"],
        "the API server's view wins"
    );
    let back = store.last_rv();

    for a in upstream["subsets"][0]["addresses"].as_array_mut().unwrap() {
        if a["ip"] == "10.0.0.70" {
            a["ip"] = json!("10.0.0.99");
        }
    }
    upstream["metadata"]["resourceVersion"] = json!("900");
    p.handle(Endpoints, W::Apply(obj(upstream)));
    assert_eq!(served(&cache), ["10.0.0.99", "10.0.1.72"]);
    let caught_up = store.last_rv();
    assert!(online < reported && reported < back && back < caught_up);

    let resumed = |from: u64| -> Vec<(EventType, u64, Vec<String>)> {
        store
            .subscribe(Some(from))
            .unwrap()
            .replay
            .iter()
            .filter(|e| e.object.key() == "default/servicegrid-demo-svc")
            .map(|e| {
                let v = e
                    .object
                    .body(cache.codec(), ApiVersion::V1, ApiVersion::V1)
                    .to_value();
                let mut ips: Vec<String> = v["subsets"][0]["addresses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["ip"].as_str().unwrap().to_owned())
                    .collect();
                ips.sort();
                (e.event_type, e.rv, ips)
            })
            .collect()
    };
    let step = |rv: u64, ips: [&str; 2]| (EventType::Modified, rv, ips.map(String::from).to_vec());
    let all = vec![
        step(reported, ["10.0.0.99", "10.0.1.72"]),
        step(back, ["10.0.0.70", "10.0.1.72"]),
        step(caught_up, ["10.0.0.99", "10.0.1.72"]),
    ];
    assert_eq!(resumed(online), all);
    assert_eq!(resumed(reported), all[1..]);
    assert_eq!(resumed(back), all[2..]);
    assert_eq!(resumed(caught_up), []);
}

/// What a watch of each kind resumed from `since` is told, and what each
/// kind serves: (kind, type, key, rv, body) in order.
fn told_and_served(cache: &Cache, since: u64) -> Vec<(ResourceKind, String, String, u64, Value)> {
    let body = |v: &crate::View, kind: ResourceKind| {
        v.body(cache.codec(), ApiVersion::V1, cache.native(kind))
            .to_value()
    };
    let mut out = Vec::new();
    for kind in [Nodes, Services, Endpoints, EndpointSlices] {
        let sub = cache.store(kind).subscribe(Some(since)).unwrap();
        for e in &sub.replay {
            out.push((
                kind,
                format!("{:?}", e.event_type),
                e.object.key().to_owned(),
                e.rv,
                body(&e.object, kind),
            ));
        }
        for v in cache.store(kind).snapshot("").0 {
            out.push((
                kind,
                "served".into(),
                v.key().to_owned(),
                v.rv,
                body(&v, kind),
            ));
        }
    }
    out
}

#[tokio::test]
async fn events_taken_together_serve_and_tell_watches_what_they_would_one_by_one() {
    let script = || {
        vec![
            (Nodes, W::Apply(node("gz-2", "beijing", 20))),
            (
                Endpoints,
                W::Apply(endpoints("plain-echo", &[("10.0.0.81", "bj-2")], 21)),
            ),
            // The same object twice in one batch, the second a no-op.
            (
                Endpoints,
                W::Apply(endpoints("plain-echo", &[("10.0.0.99", "bj-2")], 22)),
            ),
            (
                Endpoints,
                W::Apply(endpoints("plain-echo", &[("10.0.0.99", "bj-2")], 23)),
            ),
            (
                Services,
                W::Apply(service("servicegrid-demo-svc", None, 24)),
            ),
            // A relist in the middle: one slice gone, the rest as they were.
            (EndpointSlices, W::Init),
            (
                EndpointSlices,
                W::InitApply(world(EndpointSlices).remove(0)),
            ),
            (EndpointSlices, W::InitDone),
            (Nodes, W::Delete(node("gz-3", "guangzhou", 25))),
            (
                Services,
                W::Apply(service("servicegrid-demo-svc", Some("location"), 26)),
            ),
        ]
    };
    // One by one.
    let (one_by_one, mut p) = writer("bj-1");
    two_sites(&mut p);
    let since = *one_by_one.0.clock.borrow();
    for (kind, event) in script() {
        p.handle(kind, event);
    }
    // All waiting when the writer runs: taken and committed together (the
    // same key twice, a relist, a Service and the node labels its views
    // depend on, in one batch).
    let (together, mut q) = writer("bj-1");
    two_sites(&mut q);
    assert_eq!(*together.0.clock.borrow(), since);
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    for (kind, event) in script() {
        tx.try_send((kind, event).into()).unwrap();
    }
    drop(tx);
    q.run(rx, None).await;
    let told = told_and_served(&one_by_one, since);
    let events = told.iter().filter(|(_, t, ..)| t != "served").count();
    assert!(events >= 5, "the script changes views: {told:?}");
    assert_eq!(told_and_served(&together, since), told);
}
