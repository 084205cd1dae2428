use sitegrid_apimachinery::selector::LabelSelector;

use super::*;

/// A node as a watch delivers it: full (the local node) or metadata-only.
fn node(name: &str, rv: u64, labels: &[(&str, &str)]) -> UpstreamObject {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let v = json!({"kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "resourceVersion": rv.to_string(), "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    UpstreamObject::from_json(&v.to_string()).unwrap()
}

fn listed(nodes: Vec<UpstreamObject>) -> Vec<watcher::Event<UpstreamObject>> {
    let mut out = vec![watcher::Event::Init];
    out.extend(nodes.into_iter().map(watcher::Event::InitApply));
    out.push(watcher::Event::InitDone);
    out
}

/// Feeds a whole list; returns the steps' commands and events, concatenated.
fn feed(
    m: &mut Membership,
    source: &Source,
    generation: u64,
    events: Vec<watcher::Event<UpstreamObject>>,
) -> Step {
    let mut all = Step::default();
    for e in events {
        let s = m.event(source, generation, e);
        all.commands.extend(s.commands);
        all.out.extend(s.out);
    }
    all
}

/// `ADDED n@rv`-style summaries of what the writer hears.
fn summary(out: &[watcher::Event<UpstreamObject>]) -> Vec<String> {
    out.iter()
        .map(|e| match e {
            watcher::Event::Init => "Init".to_owned(),
            watcher::Event::InitDone => "InitDone".to_owned(),
            watcher::Event::InitApply(o) => format!("InitApply {}@{}", o.key(), o.upstream_rv()),
            watcher::Event::Apply(o) => format!("Apply {}@{}", o.key(), o.upstream_rv()),
            watcher::Event::Delete(o) => format!("Delete {}", o.key()),
        })
        .collect()
}

fn keys(k: &[&str]) -> BTreeSet<String> {
    k.iter().map(|s| s.to_string()).collect()
}

fn scope_watch(step: &Step) -> Vec<(String, u64, String)> {
    step.commands
        .iter()
        .filter_map(|c| match c {
            Command::Watch {
                source: Source::Scope(k),
                generation,
                labels: Some(l),
                metadata_only: true,
                ..
            } => Some((k.clone(), *generation, l.clone())),
            _ => None,
        })
        .collect()
}

const BJ1: &[(&str, &str)] = &[("kubernetes.io/hostname", "bj-1"), ("zone", "bj")];
const BJ2: &[(&str, &str)] = &[("kubernetes.io/hostname", "bj-2"), ("zone", "bj")];
const GZ1: &[(&str, &str)] = &[("kubernetes.io/hostname", "gz-1"), ("zone", "gz")];

/// A node proxy for bj-1 whose Services name `zone`, listed: bj-1 whole, bj-2 by labels.
fn listed_bj1() -> (Membership, u64) {
    let (mut m, first) = Membership::new(Locality::Node("bj-1".into()));
    assert_eq!(
        first.commands,
        [Command::Watch {
            source: Source::Local,
            generation: 0,
            labels: None,
            fields: Some("metadata.name=bj-1".into()),
            metadata_only: false,
        }],
        "the local node is watched whole, by name"
    );
    let s = feed(
        &mut m,
        &Source::Local,
        0,
        listed(vec![node("bj-1", 10, BJ1)]),
    );
    assert!(
        s.out.is_empty() && s.commands.is_empty(),
        "no keys known yet: nothing to watch or say"
    );
    let s = m.keys_changed(keys(&["zone"]));
    let watches = scope_watch(&s);
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].2, "zone in (bj)", "only the local site's nodes");
    assert!(s.out.is_empty(), "held until the scope is listed");
    let generation = watches[0].1;
    let s = feed(
        &mut m,
        &Source::Scope("zone".into()),
        generation,
        listed(vec![node("bj-1", 10, BJ1), node("bj-2", 11, BJ2)]),
    );
    assert_eq!(
        summary(&s.out),
        ["Init", "InitApply bj-1@10", "InitApply bj-2@11", "InitDone"]
    );
    assert!(m.started());
    (m, generation)
}

#[test]
fn lists_the_local_node_and_its_sites_nodes_once_everything_is_known() {
    let (m, _) = listed_bj1();
    // The writer got the local node whole (its status too) and bj-2's labels.
    let sent = m.sent.get("bj-1").unwrap();
    assert!(sent.1.json().contains("\"status\""));
    assert_eq!(
        m.sent.get("bj-2").unwrap().0,
        Sent::Labels(BTreeMap::from([
            ("kubernetes.io/hostname".into(), "bj-2".into()),
            ("zone".into(), "bj".into()),
        ]))
    );
}

#[test]
fn another_nodes_heartbeat_goes_no_further_but_the_local_nodes_does() {
    let (mut m, g) = listed_bj1();
    let scope = Source::Scope("zone".into());
    let s = m.event(&scope, g, watcher::Event::Apply(node("bj-2", 20, BJ2)));
    assert!(s.out.is_empty(), "bj-2's status write changed no label");
    let s = m.event(
        &Source::Local,
        0,
        watcher::Event::Apply(node("bj-1", 21, BJ1)),
    );
    assert_eq!(
        summary(&s.out),
        ["Apply bj-1@21"],
        "kube-proxy reads its own Node"
    );
    // The local node's copy in a scope is not what the writer gets.
    let s = m.event(&scope, g, watcher::Event::Apply(node("bj-1", 21, BJ1)));
    assert!(s.out.is_empty());
}

#[test]
fn a_label_change_and_a_node_leaving_the_site_reach_the_writer() {
    let (mut m, g) = listed_bj1();
    let scope = Source::Scope("zone".into());
    let relabelled = [
        ("kubernetes.io/hostname", "bj-2"),
        ("zone", "bj"),
        ("rack", "r2"),
    ];
    let s = m.event(
        &scope,
        g,
        watcher::Event::Apply(node("bj-2", 30, &relabelled)),
    );
    assert_eq!(summary(&s.out), ["Apply bj-2@30"]);
    // Relabelled to gz: the selector watch says DELETED.
    let s = m.event(&scope, g, watcher::Event::Delete(node("bj-2", 31, BJ2)));
    assert_eq!(summary(&s.out), ["Delete bj-2"]);
    assert!(!m.sent.contains_key("bj-2"));
}

#[test]
fn the_local_node_moving_site_rewatches_and_is_applied_between_arrivals_and_departures() {
    let (mut m, old) = listed_bj1();
    let moved = [("kubernetes.io/hostname", "bj-1"), ("zone", "gz")];
    let s = m.event(
        &Source::Local,
        0,
        watcher::Event::Apply(node("bj-1", 40, &moved)),
    );
    let watches = scope_watch(&s);
    assert_eq!(watches.len(), 1);
    assert_eq!(watches[0].2, "zone in (gz)");
    assert!(watches[0].1 > old, "a new generation");
    assert!(s.out.is_empty(), "held until gz's nodes are listed");
    // The old watch's late events are dropped.
    let scope = Source::Scope("zone".into());
    let s = m.event(&scope, old, watcher::Event::Apply(node("bj-3", 41, BJ2)));
    assert!(s.out.is_empty());
    let s = feed(
        &mut m,
        &scope,
        watches[0].1,
        listed(vec![node("bj-1", 40, &moved), node("gz-1", 42, GZ1)]),
    );
    // gz-1 first (the views do not change yet: bj-1 is still in bj), then
    // bj-1 in gz (now gz-1 is its site), then bj-2 goes (it no longer matters).
    assert_eq!(
        summary(&s.out),
        ["Apply gz-1@42", "Apply bj-1@40", "Delete bj-2"]
    );
}

#[test]
fn keys_coming_and_going_start_and_stop_scopes() {
    let (mut m, _) = listed_bj1();
    let s = m.keys_changed(keys(&["zone", "kubernetes.io/hostname"]));
    let watches = scope_watch(&s);
    assert_eq!(
        watches.len(),
        1,
        "zone's watch stays; one more for the hostname"
    );
    assert_eq!(watches[0].2, "kubernetes.io/hostname in (bj-1)");
    let s = feed(
        &mut m,
        &Source::Scope("kubernetes.io/hostname".into()),
        watches[0].1,
        listed(vec![node("bj-1", 10, BJ1)]),
    );
    assert!(s.out.is_empty(), "nothing new: bj-1 is known");
    let s = m.keys_changed(keys(&[]));
    let stopped: Vec<&Command> = s.commands.iter().collect();
    assert_eq!(
        stopped,
        [
            &Command::Stop(Source::Scope("kubernetes.io/hostname".into())),
            &Command::Stop(Source::Scope("zone".into())),
        ]
    );
    assert_eq!(summary(&s.out), ["Delete bj-2"], "the local node stays");
}

#[test]
fn without_topology_keys_only_the_local_node_is_listed() {
    let (mut m, _) = Membership::new(Locality::Node("bj-1".into()));
    let s = m.keys_changed(keys(&[]));
    assert!(s.out.is_empty(), "the local node is not listed yet");
    let s = feed(
        &mut m,
        &Source::Local,
        0,
        listed(vec![node("bj-1", 10, BJ1)]),
    );
    assert!(s.commands.is_empty(), "no scope to watch");
    assert_eq!(summary(&s.out), ["Init", "InitApply bj-1@10", "InitDone"]);
}

#[test]
fn a_missing_local_node_lists_nothing_but_completes() {
    let (mut m, _) = Membership::new(Locality::Node("bj-9".into()));
    m.keys_changed(keys(&["zone"]));
    let s = feed(&mut m, &Source::Local, 0, listed(vec![]));
    assert!(s.commands.is_empty(), "no local value: no scope");
    assert_eq!(summary(&s.out), ["Init", "InitDone"]);
}

#[test]
fn a_site_watches_its_nodes_by_selector_and_each_key_by_all_their_values() {
    let site = LabelSelector::parse("zone=bj").unwrap();
    let (mut m, first) = Membership::new(Locality::Site(site));
    assert_eq!(
        first.commands,
        [Command::Watch {
            source: Source::Local,
            generation: 0,
            labels: Some("zone=bj".into()),
            fields: None,
            metadata_only: true,
        }]
    );
    feed(
        &mut m,
        &Source::Local,
        0,
        listed(vec![node("bj-1", 10, BJ1), node("bj-2", 11, BJ2)]),
    );
    let s = m.keys_changed(keys(&["kubernetes.io/hostname", "zone", "region"]));
    let selectors: Vec<String> = scope_watch(&s).into_iter().map(|w| w.2).collect();
    assert_eq!(
        selectors,
        ["kubernetes.io/hostname in (bj-1,bj-2)"],
        "no local node has a region: no scope for it; `zone in (bj)` is the site's own watch"
    );
    // A site's members are metadata too: a status write is not news.
    for w in scope_watch(&s) {
        feed(&mut m, &Source::Scope(w.0.clone()), w.1, listed(vec![]));
    }
    assert!(m.started());
    let scopes = m.scopes();
    assert_eq!(
        scopes.get("zone"),
        Some(&keys(&["bj"])),
        "the zone scope is served from the site's own nodes"
    );
    let s = m.event(
        &Source::Local,
        0,
        watcher::Event::Apply(node("bj-2", 50, BJ2)),
    );
    assert!(s.out.is_empty());
    // A node joining the site widens the hostname scope.
    let bj3 = [("kubernetes.io/hostname", "bj-3"), ("zone", "bj")];
    let s = m.event(
        &Source::Local,
        0,
        watcher::Event::Apply(node("bj-3", 51, &bj3)),
    );
    let selectors: Vec<String> = scope_watch(&s).into_iter().map(|w| w.2).collect();
    assert_eq!(selectors, ["kubernetes.io/hostname in (bj-1,bj-2,bj-3)"]);
}

#[test]
fn a_site_still_watches_a_scope_its_selector_does_not_hold() {
    // The site is chosen by another key, or by more than one requirement:
    // nodes of its zone values may lie outside it, so the scope is watched.
    for selector in ["region=north", "zone=bj,region=north", "zone notin (gz)"] {
        let site = LabelSelector::parse(selector).unwrap();
        let (mut m, _) = Membership::new(Locality::Site(site));
        let north_bj1 = [("zone", "bj"), ("region", "north")];
        feed(
            &mut m,
            &Source::Local,
            0,
            listed(vec![node("bj-1", 10, &north_bj1)]),
        );
        let s = m.keys_changed(keys(&["zone"]));
        let selectors: Vec<String> = scope_watch(&s).into_iter().map(|w| w.2).collect();
        assert_eq!(selectors, ["zone in (bj)"], "site {selector}");
        assert!(
            !m.started(),
            "site {selector}: held until the scope is listed"
        );
    }
}

#[test]
fn slim_keeps_name_uid_version_and_labels_only() {
    let meta: PartialObjectMeta<UpstreamObject> = PartialObjectMeta {
        types: None,
        _phantom: std::marker::PhantomData,
        metadata: ObjectMeta {
            name: Some("bj-2".into()),
            uid: Some("u-2".into()),
            resource_version: Some("77".into()),
            labels: Some(BTreeMap::from([("zone".into(), "bj".into())])),
            annotations: Some(BTreeMap::from([("a".into(), "b".into())])),
            ..ObjectMeta::default()
        },
    };
    let o = slim(meta);
    let v: serde_json::Value = serde_json::from_str(&o.json()).unwrap();
    assert_eq!(
        v,
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {
            "name": "bj-2", "uid": "u-2", "resourceVersion": "77", "labels": {"zone": "bj"}}})
    );
    assert_eq!(o.key(), "bj-2");
    assert_eq!(o.upstream_rv(), "77");
}
