//! Chained proxies give the answer of a direct one: a node proxy whose
//! upstream is its site's proxy serves exactly what it would serve talking
//! to the API server, under random worlds and churn (deterministic seeds).
//!
//! Three writers per node of the site are compared after every change:
//! *direct* (a node proxy fed what the API server has), the *site* proxy
//! (fed the same, serving the union of its nodes' views), and *chained* (a
//! node proxy fed what the site proxy serves: its Services, its Endpoints
//! and EndpointSlices, and of its Nodes those a node proxy's membership asks
//! for — the nodes sharing one of the node's values of a key in use — plus
//! the node itself whole, which passes through to the API server).

use std::collections::{BTreeMap, BTreeSet};

use fastrand::Rng;
use kube::runtime::watcher::Event as W;
use serde_json::{json, Value};
use sitegrid_apimachinery::selector::LabelSelector;

use super::Writer;
use crate::testing::obj;
use crate::{
    topology::TopologyKeys, with_start_rv, ApiVersion, Cache, CacheConfig, Locality, ResourceKind,
    ResourceKind::*, Served, UpstreamObject,
};

const ZONES: [&str; 3] = ["z0", "z1", "z2"];
const HOST: &str = "kubernetes.io/hostname";
/// Topology annotations a Service may carry (None: no annotation).
const KEYS: [Option<&str>; 10] = [
    Some(r#"["zone"]"#),
    Some(r#"["kubernetes.io/hostname","zone","*"]"#),
    Some(r#"["rack","zone"]"#),
    Some(r#"["region"]"#),
    Some(r#"["kubernetes.io/hostname"]"#),
    Some(r#"["zone","*"]"#),
    Some(r#"["rack","region","*"]"#),
    Some(r#"["kubernetes.io/hostname","rack"]"#),
    None,
    Some("not json"),
];

/// The API server's state, and the version it would stamp next.
struct World {
    rng: Rng,
    rv: u64,
    nodes: BTreeMap<String, Value>,
    services: BTreeMap<String, Value>,
    endpoints: BTreeMap<String, Value>,
    slices: BTreeMap<String, Value>,
}

impl World {
    fn new(seed: u64) -> World {
        let mut w = World {
            rng: Rng::with_seed(seed),
            rv: 1,
            nodes: BTreeMap::new(),
            services: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            slices: BTreeMap::new(),
        };
        for (z, zone) in ZONES.iter().enumerate() {
            for i in 0..w.rng.usize(2..5) {
                let name = format!("{zone}-n{i}");
                let n = w.node(&name, zone, z);
                w.nodes.insert(name, n);
            }
        }
        for s in 0..6 {
            let name = format!("svc-{s}");
            let svc = w.service(&name);
            w.services.insert(format!("default/{name}"), svc);
            let ep = w.endpoints_of(&name);
            w.endpoints.insert(format!("default/{name}"), ep);
            for k in 0..w.rng.usize(1..3) {
                let slice = w.slice_of(&name, k);
                w.slices.insert(format!("default/{name}-{k}"), slice);
            }
        }
        w
    }

    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    fn node(&mut self, name: &str, zone: &str, z: usize) -> Value {
        let mut labels = json!({HOST: name, "zone": zone,
            "region": if z < 2 { "east" } else { "west" }});
        if self.rng.u8(0..4) > 0 {
            labels["rack"] = json!(format!("{zone}-r{}", self.rng.u8(0..2)));
        }
        json!({"metadata": {"name": name, "resourceVersion": self.next_rv(), "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn service(&mut self, name: &str) -> Value {
        let mut meta =
            json!({"name": name, "namespace": "default", "resourceVersion": self.next_rv()});
        if let Some(keys) = KEYS[self.rng.usize(0..KEYS.len())] {
            meta["annotations"] = json!({"topologyKeys": keys});
        }
        json!({"metadata": meta, "spec": {"clusterIP": "10.96.0.1"}})
    }

    fn random_node(&mut self) -> Option<String> {
        let names: Vec<&String> = self.nodes.keys().collect();
        // Now and then an endpoint without a node, or on a node that is gone.
        match self.rng.u8(0..12) {
            0 => None,
            1 => Some("gone-node".into()),
            _ => Some(names[self.rng.usize(0..names.len())].clone()),
        }
    }

    fn endpoints_of(&mut self, name: &str) -> Value {
        let mut subsets = Vec::new();
        for port in 0..self.rng.usize(1..3) {
            let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
            for i in 0..self.rng.usize(0..6) {
                let mut a = json!({"ip": format!("10.{port}.{}.{i}", self.rng.u8(..))});
                if let Some(n) = self.random_node() {
                    a["nodeName"] = json!(n);
                }
                if self.rng.u8(0..4) == 0 {
                    not_ready.push(a);
                } else {
                    ready.push(a);
                }
            }
            let mut subset = json!({"ports": [{"port": 8080 + port}]});
            if !ready.is_empty() {
                subset["addresses"] = json!(ready);
            }
            if !not_ready.is_empty() {
                subset["notReadyAddresses"] = json!(not_ready);
            }
            subsets.push(subset);
        }
        json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": self.next_rv()},
            "subsets": subsets})
    }

    fn slice_of(&mut self, svc: &str, k: usize) -> Value {
        let mut eps = Vec::new();
        for i in 0..self.rng.usize(0..6) {
            let mut ep = json!({"addresses": [format!("10.9.{}.{i}", self.rng.u8(..))]});
            match self.rng.u8(0..4) {
                0 => ep["conditions"] = json!({"ready": false}),
                1 => {}
                _ => ep["conditions"] = json!({"ready": true}),
            }
            if let Some(n) = self.random_node() {
                ep["nodeName"] = json!(n);
            }
            eps.push(ep);
        }
        json!({"metadata": {"name": format!("{svc}-{k}"), "namespace": "default",
            "resourceVersion": self.next_rv(), "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4", "endpoints": eps})
    }

    /// One random change; returns the kind and the changed object.
    fn churn(&mut self) -> (ResourceKind, Value) {
        let pick = |rng: &mut Rng, keys: Vec<String>| keys[rng.usize(0..keys.len())].clone();
        match self.rng.u8(0..10) {
            0..=2 => {
                let key = pick(&mut self.rng, self.endpoints.keys().cloned().collect());
                let name = key.trim_start_matches("default/").to_owned();
                let mut ep = self.endpoints_of(&name);
                stamp(&self.endpoints[&key], &mut ep);
                self.endpoints.insert(key, ep.clone());
                (Endpoints, ep)
            }
            3..=5 => {
                let key = pick(&mut self.rng, self.slices.keys().cloned().collect());
                let (svc, k) = key.trim_start_matches("default/").rsplit_once('-').unwrap();
                let mut slice = self.slice_of(svc, k.parse().unwrap());
                let old = &self.slices[&key];
                // Half the time one endpoint changes and the others stay:
                // views without it see only what the API server stamps on
                // every write (generation, managedFields, trigger time).
                if self.rng.bool() {
                    if let Some(kept) = old["endpoints"].as_array().filter(|e| !e.is_empty()) {
                        let mut endpoints = kept.clone();
                        let i = self.rng.usize(0..endpoints.len());
                        endpoints[i] = slice["endpoints"][0].clone();
                        if endpoints[i].is_null() {
                            endpoints.remove(i);
                        }
                        slice["endpoints"] = json!(endpoints);
                    }
                }
                stamp(old, &mut slice);
                self.slices.insert(key, slice.clone());
                (EndpointSlices, slice)
            }
            6..=7 => {
                // A node moves zone, or gets another rack.
                let name = pick(&mut self.rng, self.nodes.keys().cloned().collect());
                let z = self.rng.usize(0..ZONES.len());
                let rv = self.next_rv();
                let node = self.nodes.get_mut(&name).unwrap();
                if self.rng.bool() {
                    node["metadata"]["labels"]["zone"] = json!(ZONES[z]);
                    node["metadata"]["labels"]["region"] =
                        json!(if z < 2 { "east" } else { "west" });
                } else {
                    node["metadata"]["labels"]["rack"] =
                        json!(format!("{}-r{}", ZONES[z], self.rng.u8(0..2)));
                }
                node["metadata"]["resourceVersion"] = json!(rv);
                (Nodes, node.clone())
            }
            _ => {
                let key = pick(&mut self.rng, self.services.keys().cloned().collect());
                let name = key.trim_start_matches("default/").to_owned();
                let svc = self.service(&name);
                self.services.insert(key, svc.clone());
                (Services, svc)
            }
        }
    }

    fn all(&self, kind: ResourceKind) -> Vec<Value> {
        let m = match kind {
            Nodes => &self.nodes,
            Services => &self.services,
            Endpoints => &self.endpoints,
            EndpointSlices => &self.slices,
            // Served as they are: nothing to compare between placements.
            ServiceCidrs => return Vec::new(),
        };
        m.values().cloned().collect()
    }

    /// The nodes `site` selects, by name.
    fn members(&self, site: &LabelSelector) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(n["metadata"]["labels"].clone()).unwrap();
                site.matches(&labels)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// What kube-apiserver and the endpoints controllers write on every write of
/// `new`, which replaces `old`: the next generation, a managedFields entry
/// and a trigger-time annotation with the write's time.
fn stamp(old: &Value, new: &mut Value) {
    let generation = old["metadata"]["generation"].as_u64().unwrap_or(1) + 1;
    let rv: u64 = new["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // RFC 3339, as managedFields' `time` must be (else the object is unreadable).
    let time = format!(
        "2026-11-28T{:02}:{:02}:{:02}Z",
        rv / 3600 % 24,
        rv / 60 % 60,
        rv % 60
    );
    let meta = &mut new["metadata"];
    meta["generation"] = json!(generation);
    meta["managedFields"] = json!([{"manager": "kube-controller-manager", "time": time}]);
    meta["annotations"] = json!({"endpoints.kubernetes.io/last-change-trigger-time": time});
}

fn sync(p: &mut Writer, kind: ResourceKind, objs: &[Value]) {
    crate::testing::sync(p, kind, objs.iter().map(obj));
}

fn writer(locality: Locality) -> (Cache, Writer) {
    let (cache, slot) = with_start_rv(CacheConfig::default(), 1000);
    (cache, slot.start(locality, ApiVersion::V1))
}

/// What a store serves, as the JSON a client decodes.
fn served(cache: &Cache, kind: ResourceKind) -> Vec<Value> {
    cache
        .store(kind)
        .snapshot("")
        .0
        .iter()
        .map(|v| v.native_body_value())
        .collect()
}

/// The same, without the versions (each proxy numbers its own) and the
/// stamps that carry no meaning for a client (`crate::meaning`): a view
/// recomputed when a node joins the site takes the upstream's newest
/// stamps, where the site proxy kept those of its last meaningful change.
fn content(cache: &Cache, kind: ResourceKind) -> BTreeMap<String, Value> {
    served(cache, kind)
        .into_iter()
        .map(|mut v| {
            let meta = v["metadata"].as_object_mut().unwrap();
            for stamp in ["resourceVersion", "generation", "managedFields"] {
                meta.remove(stamp);
            }
            if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                a.remove("endpoints.kubernetes.io/last-change-trigger-time");
                if a.is_empty() {
                    meta.remove("annotations");
                }
            }
            let key = format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or(""),
                meta["name"].as_str().unwrap()
            );
            (key, v)
        })
        .collect()
}

/// The label keys the Services name.
fn keys_in_use(services: &[Value]) -> BTreeSet<String> {
    services
        .iter()
        .filter_map(|s| {
            let annotations: Option<BTreeMap<String, String>> =
                serde_json::from_value(s["metadata"]["annotations"].clone()).ok();
            TopologyKeys::from_annotations(annotations.as_ref())
                .ok()
                .flatten()
        })
        .flat_map(|k| k.label_keys().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// What node `name`'s membership pulls from the site proxy: the nodes
/// sharing one of its values of a key in use (metadata: name and labels),
/// and itself whole from the API server.
fn membership_of(name: &str, world: &World, site: &Cache) -> Vec<Value> {
    let keys = keys_in_use(&served(site, Services));
    let own = world.nodes[name].clone();
    let own_labels = &own["metadata"]["labels"];
    let mut out: Vec<Value> = served(site, Nodes)
        .into_iter()
        .filter(|n| n["metadata"]["name"] != name)
        .filter(|n| {
            keys.iter().any(|k| {
                own_labels.get(k).is_some() && n["metadata"]["labels"].get(k) == own_labels.get(k)
            })
        })
        .map(|n| json!({"metadata": {"name": n["metadata"]["name"],
            "resourceVersion": n["metadata"]["resourceVersion"], "labels": n["metadata"]["labels"]}}))
        .collect();
    out.push(own);
    out
}

/// Feeds every writer the world (or, chained ones, the site proxy's state).
fn refresh(
    world: &World,
    site: &Cache,
    members: &[String],
    chained: &mut BTreeMap<String, (Cache, Writer)>,
) {
    for (name, (_, p)) in chained.iter_mut() {
        if !members.contains(name) {
            continue;
        }
        sync(p, Services, &served(site, Services));
        sync(p, Nodes, &membership_of(name, world, site));
        sync(p, Endpoints, &served(site, Endpoints));
        sync(p, EndpointSlices, &served(site, EndpointSlices));
    }
}

fn apply(p: &mut Writer, kind: ResourceKind, v: &Value) {
    p.handle(kind, W::Apply(obj(v)));
}

#[test]
fn a_node_proxy_behind_its_site_proxy_answers_as_a_direct_one_under_churn() {
    let mut compared = 0;
    for seed in 0..24u64 {
        let mut world = World::new(seed);
        let zone = ZONES[(seed % 3) as usize];
        let site_selector = LabelSelector::parse(&format!("zone={zone}")).unwrap();
        let (site_cache, mut site) = writer(Locality::Site(site_selector.clone()));
        let names: Vec<String> = world.nodes.keys().cloned().collect();
        let mut direct: BTreeMap<String, (Cache, Writer)> = names
            .iter()
            .map(|n| (n.clone(), writer(Locality::Node(n.clone()))))
            .collect();
        let mut chained: BTreeMap<String, (Cache, Writer)> = names
            .iter()
            .map(|n| (n.clone(), writer(Locality::Node(n.clone()))))
            .collect();
        for kind in [Nodes, Services, Endpoints, EndpointSlices] {
            let objs = world.all(kind);
            sync(&mut site, kind, &objs);
            for (_, p) in direct.values_mut() {
                sync(p, kind, &objs);
            }
        }
        for step in 0..25 {
            if step > 0 {
                let (kind, v) = world.churn();
                apply(&mut site, kind, &v);
                for (_, p) in direct.values_mut() {
                    apply(p, kind, &v);
                }
            }
            let members = world.members(&site_selector);
            refresh(&world, &site_cache, &members, &mut chained);
            for name in members {
                for kind in [Endpoints, EndpointSlices] {
                    let want = content(&direct[&name].0, kind);
                    let got = content(&chained[&name].0, kind);
                    assert_eq!(
                        got, want,
                        "seed {seed}, step {step}: {kind} of node {name} behind site {zone}"
                    );
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 500, "only {compared} comparisons");
}

/// The site proxy filters at all: an endpoint no node of the site would
/// route to is not sent to the site's node proxies.
#[test]
fn the_site_proxy_sends_only_what_some_node_of_the_site_would_see() {
    let mut dropped = 0;
    for seed in 0..20u64 {
        let world = World::new(seed);
        let site_selector = LabelSelector::parse("zone=z0").unwrap();
        let (site_cache, mut site) = writer(Locality::Site(site_selector.clone()));
        let members = world.members(&site_selector);
        let mut direct: Vec<(Cache, Writer)> = members
            .iter()
            .map(|n| writer(Locality::Node(n.clone())))
            .collect();
        for kind in [Nodes, Services, Endpoints, EndpointSlices] {
            let objs = world.all(kind);
            sync(&mut site, kind, &objs);
            for (_, p) in direct.iter_mut() {
                sync(p, kind, &objs);
            }
        }
        // Every address the site serves is one some node of the site serves, and back.
        let addresses = |c: &Cache| -> BTreeSet<String> {
            served(c, EndpointSlices)
                .iter()
                .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                .map(|e| e["addresses"][0].as_str().unwrap().to_owned())
                .collect()
        };
        let union: BTreeSet<String> = direct.iter().flat_map(|(c, _)| addresses(c)).collect();
        let all: BTreeSet<String> = world
            .slices
            .values()
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .map(|e| e["addresses"][0].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(addresses(&site_cache), union, "seed {seed}");
        dropped += all.len() - union.len();
    }
    assert!(dropped > 0, "the worlds never had anything to filter");
}

/// What a reflector reading `kind` in protobuf hands the writer for `v` (a
/// list's item when `listed`, else a watch event's object), and what one
/// reading JSON hands it for the same object: the JSON kube-apiserver
/// would have sent. Nodes are read in JSON either way.
fn read_both(kind: ResourceKind, v: &Value, listed: bool) -> (UpstreamObject, UpstreamObject) {
    if !matches!(kind, Services | Endpoints | EndpointSlices) {
        return (obj(v), obj(v));
    }
    let served = Served {
        kind,
        version: ApiVersion::V1,
    };
    let carried = crate::testing::carried(served, v, listed);
    let json = carried.value().expect("decoded");
    (carried, obj(&json))
}

/// How many `kind` objects `writer` keeps as the protobuf they came in.
fn kept_in_protobuf(writer: &Writer, kind: ResourceKind) -> usize {
    writer.upstream[kind]
        .objects
        .values()
        .filter_map(|s| s.raw.as_ref())
        .filter(|raw| {
            raw.unpack()
                .starts_with(sitegrid_apimachinery::protobuf::MAGIC)
        })
        .count()
}

/// A writer keeps what came in protobuf as protobuf, and recomputes views
/// from it (a node moving site, a Service's topology changing, another
/// slice of a Service changing) exactly as from the JSON of the same objects.
#[test]
fn a_proxy_reading_protobuf_serves_what_one_reading_json_serves_under_churn() {
    // Changes of Nodes and Services (which recompute views from what the
    // writer keeps) while some of what it keeps is protobuf.
    let mut recomputing = 0;
    for seed in 0..16u64 {
        let mut world = World::new(seed);
        let names: Vec<String> = world.nodes.keys().cloned().collect();
        let locality = match seed % 2 {
            0 => Locality::Node(names[seed as usize % names.len()].clone()),
            _ => Locality::Site(
                LabelSelector::parse(&format!("zone={}", ZONES[seed as usize % 3])).unwrap(),
            ),
        };
        let (json_cache, mut json) = writer(locality.clone());
        let (pb_cache, mut pb) = writer(locality);
        for kind in [Nodes, Services, Endpoints, EndpointSlices] {
            let (carried, plain): (Vec<_>, Vec<_>) = world
                .all(kind)
                .iter()
                .map(|v| read_both(kind, v, true))
                .unzip();
            crate::testing::sync(&mut pb, kind, carried);
            crate::testing::sync(&mut json, kind, plain);
        }
        // What a list brought is kept as it came, as a watch event's object
        // is: half the size of its JSON.
        for kind in [Endpoints, EndpointSlices] {
            assert_eq!(
                kept_in_protobuf(&pb, kind),
                world.all(kind).len(),
                "seed {seed}: listed {kind} kept in protobuf"
            );
        }
        for step in 0..40 {
            let (kind, v) = world.churn();
            let (carried, plain) = read_both(kind, &v, false);
            if matches!(kind, Nodes | Services)
                && kept_in_protobuf(&pb, EndpointSlices) + kept_in_protobuf(&pb, Endpoints) > 0
            {
                recomputing += 1;
            }
            pb.handle(kind, W::Apply(carried));
            json.handle(kind, W::Apply(plain));
            // As text: in the same order too.
            let text = |cache: &Cache, kind| -> Vec<String> {
                served(cache, kind).iter().map(Value::to_string).collect()
            };
            for kind in [Services, Endpoints, EndpointSlices] {
                assert_eq!(
                    text(&pb_cache, kind),
                    text(&json_cache, kind),
                    "seed {seed}, step {step}: {kind}"
                );
            }
        }
    }
    assert!(
        recomputing > 50,
        "only {recomputing} changes of Nodes or Services met kept protobuf"
    );
}
