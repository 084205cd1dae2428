//! Each test runs passes against a small simulated API server (merge
//! patches applied as RFC 7386 says, finalizers holding deletions, owner
//! references collected) until a pass writes nothing, then checks what
//! the nodes, units and groups carry.

mod sim;

use k8s_openapi::api::core::v1::Taint;

use super::*;
use crate::site_manager::membership::tests::{map, node};
use sim::{group, named_unit, selected_unit, Sim};

/// The seed: bj-1..3 by name, gz-1..3 by selector, group `location`.
fn seed() -> Sim {
    let nodes = vec![
        node("bj-1", &[]),
        node("bj-2", &[]),
        node("bj-3", &[]),
        node("gz-1", &[("rack", "gz")]),
        node("gz-2", &[("rack", "gz")]),
        node("gz-3", &[("rack", "gz")]),
    ];
    let units = vec![
        named_unit("beijing", &["bj-1", "bj-2", "bj-3"]),
        selected_unit("guangzhou", "rack", &["gz"]),
    ];
    Sim::new(
        nodes,
        units,
        vec![group("location", &["beijing", "guangzhou"])],
    )
}

#[test]
fn the_seed_sites_converge_and_then_nothing_is_written() {
    let mut sim = seed();
    sim.settle();
    for (n, unit) in [
        ("bj-1", "beijing"),
        ("bj-3", "beijing"),
        ("gz-2", "guangzhou"),
    ] {
        assert_eq!(sim.label(n, "location"), Some(unit), "{n}");
        assert_eq!(sim.label(n, unit), Some(UNIT_LABEL_VALUE), "{n}");
        assert_eq!(sim.label(n, DEFAULT_UNIT), Some(UNIT_LABEL_VALUE), "{n}");
    }
    assert_eq!(sim.label("gz-1", "beijing"), None);
    let bj = sim.unit("beijing");
    assert_eq!(
        bj.spec.set_node.labels,
        map(&[("beijing", UNIT_LABEL_VALUE), ("location", "beijing")]),
        "describe nodeunit shows what its nodes get"
    );
    let status = bj.status.clone().expect("status");
    assert_eq!(status.ready_rate, "3/3");
    assert_eq!(status.ready_nodes, ["bj-1", "bj-2", "bj-3"]);
    let all = sim.unit(DEFAULT_UNIT);
    assert_eq!(
        all.spec.unit_type,
        sitegrid_api::site_manager::NodeUnitType::Other
    );
    assert_eq!(all.status.as_ref().expect("status").ready_rate, "6/6");
    let g = sim.groups[0].status.clone().expect("group status");
    assert_eq!(
        (g.unit_number, g.node_units.as_slice()),
        (2, &["beijing".to_owned(), "guangzhou".to_owned()][..])
    );
    for u in &sim.units {
        assert!(
            u.finalizers().iter().any(|f| f == FINALIZER),
            "{}",
            u.name_any()
        );
    }
    assert!(sim.warnings.is_empty(), "{:?}", sim.warnings);

    // At rest, and after a heartbeat-like no-op, nothing is written.
    let before = sim.writes;
    for _ in 0..5 {
        assert!(sim.pass().is_empty());
    }
    assert_eq!(sim.writes, before);
}

#[test]
fn a_node_leaving_and_joining_moves_exactly_its_site_labels() {
    let mut sim = seed();
    sim.node_mut("bj-3")
        .labels
        .insert("team".into(), "ops".into());
    sim.settle();
    // bj-3 moves to guangzhou.
    sim.unit_mut("beijing").spec.nodes.retain(|n| n != "bj-3");
    sim.node_mut("bj-3")
        .labels
        .insert("rack".into(), "gz".into());
    sim.settle();
    assert_eq!(sim.label("bj-3", "location"), Some("guangzhou"));
    assert_eq!(sim.label("bj-3", "guangzhou"), Some(UNIT_LABEL_VALUE));
    assert_eq!(sim.label("bj-3", "beijing"), None);
    assert_eq!(sim.label("bj-3", "team"), Some("ops"), "not sitegrid's");
    let gz = sim.unit("guangzhou").status.clone().expect("status");
    assert_eq!(gz.ready_rate, "4/4");
    assert_eq!(
        sim.unit("beijing").status.clone().expect("s").ready_rate,
        "2/2"
    );
    // setNode changes: the old label goes, the new one comes.
    sim.unit_mut("guangzhou")
        .spec
        .set_node
        .labels
        .insert("tier".into(), "a".into());
    sim.settle();
    assert_eq!(sim.label("gz-1", "tier"), Some("a"));
    sim.unit_mut("guangzhou")
        .spec
        .set_node
        .labels
        .remove("tier");
    sim.settle();
    assert_eq!(sim.label("gz-1", "tier"), None);
}

#[test]
fn a_key_someone_else_set_is_never_touched_and_reported_once() {
    let mut sim = seed();
    sim.node_mut("bj-1")
        .labels
        .insert("location".into(), "lab".into());
    sim.settle();
    assert_eq!(sim.label("bj-1", "location"), Some("lab"));
    assert_eq!(sim.label("bj-2", "location"), Some("beijing"));
    let message = sim.conflict("beijing");
    assert!(
        message.contains("bj-1") && message.contains("location"),
        "{message}"
    );
    assert_eq!(sim.conflict("guangzhou"), "");
    assert_eq!(sim.warnings.len(), 1, "{:?}", sim.warnings);
    assert_eq!(sim.warnings[0].target, Target::Unit("beijing".into()));
    assert_eq!(sim.warnings[0].reason, "Conflict");
    // Still there after more passes: the same conflict is not re-announced.
    sim.settle();
    assert_eq!(sim.warnings.len(), 1);
    // Deleting the group removes location where sitegrid set it only.
    sim.delete_group("location");
    sim.settle();
    assert!(sim.groups.is_empty(), "released and gone");
    assert_eq!(sim.label("bj-1", "location"), Some("lab"));
    assert_eq!(sim.label("bj-2", "location"), None);
    assert_eq!(sim.conflict("beijing"), "", "the conflict clears");
    let bj = sim.unit("beijing");
    assert_eq!(
        bj.spec.set_node.labels,
        map(&[("beijing", UNIT_LABEL_VALUE)])
    );
}

#[test]
fn a_deleted_unit_keeps_its_finalizer_until_its_nodes_are_clean() {
    let mut sim = seed();
    sim.unit_mut("guangzhou").spec.set_node.taints = vec![Taint {
        key: "site".into(),
        value: Some("gz".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    }];
    sim.node_mut("gz-1")
        .labels
        .insert("keep".into(), "me".into());
    sim.settle();
    assert_eq!(sim.node("gz-2").taints.len(), 1);
    sim.delete_unit("guangzhou");
    // One pass: the node patches and the release come together (the
    // shell releases only if every node patch succeeded).
    let a = sim.pass();
    assert_eq!(a.release, [Target::Unit("guangzhou".into())]);
    assert!(a.node_patches.iter().any(|(n, _)| n == "gz-1"));
    sim.settle();
    assert!(sim.units.iter().all(|u| u.name_any() != "guangzhou"));
    for n in ["gz-1", "gz-2", "gz-3"] {
        assert_eq!(sim.label(n, "location"), None, "{n}");
        assert_eq!(sim.label(n, "guangzhou"), None, "{n}");
        assert!(sim.node(n).taints.is_empty(), "{n}");
        assert_eq!(sim.label(n, DEFAULT_UNIT), Some(UNIT_LABEL_VALUE), "{n}");
    }
    assert_eq!(sim.label("gz-1", "keep"), Some("me"));
    let g = sim.groups[0].status.clone().expect("status");
    assert_eq!(g.node_units, ["beijing"]);
}

#[test]
fn a_node_two_units_of_a_group_claim_keeps_its_value_without_flapping() {
    let mut sim = seed();
    sim.settle();
    // beijing now also names gz-1, which guangzhou selects.
    sim.unit_mut("beijing").spec.nodes.push("gz-1".into());
    let writes = sim.settle();
    assert!(writes > 0);
    assert_eq!(sim.label("gz-1", "location"), Some("guangzhou"), "held");
    for u in ["beijing", "guangzhou"] {
        let m = sim.conflict(u);
        assert!(m.contains("gz-1") && m.contains("location"), "{u}: {m}");
    }
    let g = sim.groups[0].status.clone().expect("status");
    let c = g
        .conditions
        .iter()
        .find(|c| c.type_ == "Conflict")
        .expect("c");
    assert_eq!(c.status, "True");
    assert!(c.message.contains("gz-1"));
    let before = sim.writes;
    for _ in 0..5 {
        assert!(sim.pass().is_empty(), "no flapping");
    }
    assert_eq!(sim.writes, before);
    // The claim ends: beijing's value is no longer contested.
    sim.unit_mut("beijing").spec.nodes.retain(|n| n != "gz-1");
    sim.settle();
    assert_eq!(sim.conflict("beijing"), "");
    assert_eq!(sim.label("gz-1", "beijing"), None);
}

#[test]
fn readiness_and_cordon_follow_the_nodes() {
    let mut sim = seed();
    sim.node_mut("gz-3").unschedulable = true; // an operator's cordon
    sim.settle();
    sim.node_mut("bj-2").ready = false;
    sim.settle();
    let bj = sim.unit("beijing").status.clone().expect("status");
    assert_eq!(bj.ready_rate, "2/3");
    assert_eq!(bj.not_ready_nodes, ["bj-2"]);
    assert_eq!(
        sim.unit(DEFAULT_UNIT).status.clone().expect("s").ready_rate,
        "5/6"
    );

    sim.unit_mut("guangzhou").spec.unschedulable = true;
    sim.unit_mut("beijing").spec.unschedulable = true;
    sim.settle();
    assert!(sim.nodes.iter().all(|n| n.unschedulable));
    sim.unit_mut("guangzhou").spec.unschedulable = false;
    sim.settle();
    assert!(!sim.node("gz-1").unschedulable);
    assert!(sim.node("gz-3").unschedulable, "cordoned by someone else");
    // A node that leaves a cordoned unit is uncordoned.
    sim.unit_mut("beijing").spec.nodes.retain(|n| n != "bj-1");
    sim.settle();
    assert!(!sim.node("bj-1").unschedulable);
    assert!(sim.node("bj-2").unschedulable);
}

#[test]
fn auto_found_units_are_created_owned_and_deleted_with_their_nodes() {
    let nodes = vec![
        node("a", &[("zone", "bj")]),
        node("b", &[("zone", "bj")]),
        node("c", &[("zone", "gz")]),
        node("d", &[]),
    ];
    let mut g = group("zone-sites", &[]);
    g.spec.auto_find_node_keys = vec!["zone".into()];
    let mut sim = Sim::new(nodes, vec![], vec![g]);
    sim.default_unit = false;
    sim.settle();
    let names: Vec<String> = sim.units.iter().map(|u| u.name_any()).collect();
    assert_eq!(names, ["bj", "gz"]);
    let bj = sim.unit("bj");
    assert_eq!(bj.owner_references()[0].uid, "uid-zone-sites");
    assert_eq!(sim.label("a", "zone-sites"), Some("bj"));
    assert_eq!(sim.label("c", "zone-sites"), Some("gz"));
    assert_eq!(sim.label("d", "zone-sites"), None);
    assert_eq!(sim.groups[0].status.clone().expect("s").unit_number, 2);
    // No node in gz any more: its unit goes, and its labels with it.
    sim.node_mut("c").labels.insert("zone".into(), "bj".into());
    sim.settle();
    let names: Vec<String> = sim.units.iter().map(|u| u.name_any()).collect();
    assert_eq!(names, ["bj"]);
    assert_eq!(sim.label("c", "zone-sites"), Some("bj"));
    assert_eq!(sim.label("c", "gz"), None);
    // The group goes: its units are collected, every label removed.
    sim.delete_group("zone-sites");
    sim.settle();
    assert!(sim.units.is_empty() && sim.groups.is_empty());
    for n in &sim.nodes {
        let ours: Vec<&String> = n.labels.keys().filter(|k| *k != "zone").collect();
        assert!(ours.is_empty(), "{}: {ours:?}", n.name);
        assert!(
            !n.annotations.contains_key(plan::OWNED_ANNOTATION),
            "{}",
            n.name
        );
    }
}

#[test]
fn the_default_unit_can_be_turned_off() {
    let mut sim = seed();
    sim.default_unit = false;
    sim.settle();
    assert!(sim.units.iter().all(|u| u.name_any() != DEFAULT_UNIT));
    assert_eq!(sim.label("bj-1", DEFAULT_UNIT), None);
}

#[test]
fn an_invalid_selector_is_reported_and_claims_nothing() {
    let mut sim = seed();
    let mut bad = selected_unit("odd", "rack", &[]);
    bad.spec.selector.as_mut().expect("sel").match_expressions[0].operator = "Near".into();
    sim.create_unit(bad);
    sim.settle();
    let status = sim.unit("odd").status.clone().expect("status");
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == "InvalidSelector")
        .expect("condition");
    assert_eq!(c.status, "True");
    assert!(c.message.contains("Near"), "{}", c.message);
    assert!(sim.nodes.iter().all(|n| !n.labels.contains_key("odd")));
    assert!(sim.warnings.iter().any(|w| w.reason == "InvalidSelector"));
}
