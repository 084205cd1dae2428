//! Membership and what each node should carry, by value; also the nodes
//! and maps the other site-manager tests build on.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

use super::*;
pub(crate) use crate::fixtures::labels as map;

/// A Ready node with these labels.
pub(crate) fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        labels: map(labels),
        ready: true,
        ..NodeInfo::default()
    }
}

fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn by_expr(exprs: Vec<LabelSelectorRequirement>) -> Selector {
    Selector {
        match_expressions: exprs,
        ..Selector::default()
    }
}

#[test]
fn selectors_with_every_operator() {
    let labels = map(&[("zone", "bj"), ("gpu", "true")]);
    let none = BTreeMap::new();
    let cases = [
        (req("zone", "In", &["bj", "sh"]), true),
        (req("zone", "In", &["gz"]), false),
        (req("zone", "NotIn", &["gz"]), true),
        (req("zone", "NotIn", &["bj"]), false),
        (req("missing", "NotIn", &["x"]), true),
        (req("gpu", "Exists", &[]), true),
        (req("missing", "Exists", &[]), false),
        (req("missing", "DoesNotExist", &[]), true),
        (req("gpu", "DoesNotExist", &[]), false),
    ];
    for (r, want) in cases {
        let text = format!("{} {} {:?}", r.key, r.operator, r.values);
        assert_eq!(
            selector_matches(&by_expr(vec![r]), &labels, &none),
            Ok(want),
            "{text}"
        );
    }
    // All requirements, matchLabels and annotations must hold together.
    let sel = Selector {
        match_labels: map(&[("gpu", "true")]),
        match_expressions: vec![req("zone", "In", &["bj"])],
        annotations: map(&[("owner", "ops")]),
    };
    assert_eq!(
        selector_matches(&sel, &labels, &map(&[("owner", "ops")])),
        Ok(true)
    );
    assert_eq!(selector_matches(&sel, &labels, &none), Ok(false));
    // The empty selector matches everything.
    assert_eq!(
        selector_matches(&Selector::default(), &none, &none),
        Ok(true)
    );
    // Malformed requirements are errors, not silent mismatches.
    for bad in [
        req("zone", "In", &[]),
        req("zone", "Exists", &["x"]),
        req("zone", "Gt", &["1"]),
    ] {
        assert!(selector_matches(&by_expr(vec![bad]), &labels, &none).is_err());
    }
}

#[test]
fn members_by_name_and_by_selector() {
    let nodes = [
        node("bj-1", &[("zone", "bj")]),
        node("bj-2", &[("zone", "bj")]),
        node("gz-1", &[("zone", "gz")]),
    ];
    let spec = NodeUnitSpec {
        nodes: vec!["gz-1".into(), "gone".into()],
        selector: Some(by_expr(vec![req("zone", "In", &["bj"])])),
        ..NodeUnitSpec::default()
    };
    let got: Vec<String> = members(&spec, &nodes).unwrap().into_iter().collect();
    assert_eq!(
        got,
        ["bj-1", "bj-2", "gz-1"],
        "a named node that does not exist is no member"
    );
    let all: Vec<String> = members(&default_unit_spec(), &nodes)
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(all.len(), 3, "the default unit holds every node");
}

/// The seed's sites: NodeUnits beijing and guangzhou, NodeGroup location.
#[test]
fn the_seeds_sites_give_each_node_its_unit_and_group_labels() {
    let nodes = [node("bj-1", &[]), node("gz-1", &[]), node("other", &[])];
    let beijing = NodeUnitSpec {
        nodes: vec!["bj-1".into()],
        set_node: sitegrid_api::site_manager::SetNode {
            labels: map(&[("location", "beijing")]),
            ..Default::default()
        },
        ..NodeUnitSpec::default()
    };
    let guangzhou = NodeUnitSpec {
        nodes: vec!["gz-1".into()],
        ..NodeUnitSpec::default()
    };
    let empty = BTreeMap::new();
    let unit = |name, spec| UnitInfo {
        name,
        spec,
        labels: &empty,
        annotations: &empty,
    };
    let units = [
        (
            unit("beijing", &beijing),
            members(&beijing, &nodes).unwrap(),
        ),
        (
            unit("guangzhou", &guangzhou),
            members(&guangzhou, &nodes).unwrap(),
        ),
    ];
    let location = NodeGroupSpec {
        node_units: vec!["beijing".into(), "guangzhou".into()],
        ..NodeGroupSpec::default()
    };
    let (want, conflicts) = desired(&units, &[("location", &location)], &nodes);
    assert!(conflicts.is_empty(), "{conflicts:?}");
    let set = |pairs: &[(&str, &str)]| -> BTreeMap<String, Want> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Want::Set(v.to_string())))
            .collect()
    };
    assert_eq!(
        want["bj-1"].labels,
        set(&[
            ("beijing", "nodeunits.superedge.io"),
            ("location", "beijing")
        ])
    );
    assert_eq!(
        want["gz-1"].labels,
        set(&[
            ("guangzhou", "nodeunits.superedge.io"),
            ("location", "guangzhou")
        ])
    );
    assert!(want["other"].labels.is_empty());
}

#[test]
fn a_node_claimed_by_two_units_of_a_group_keeps_its_value_and_both_are_told() {
    let mut bj3 = node("bj-3", &[("location", "beijing")]);
    let nodes = [bj3.clone()];
    let a = NodeUnitSpec {
        nodes: vec!["bj-3".into()],
        ..NodeUnitSpec::default()
    };
    let empty = BTreeMap::new();
    // guangzhou joins the group by the label site-manager puts on units it finds.
    let marked = map(&[("location", GROUP_LABEL_VALUE)]);
    let units = [
        (
            UnitInfo {
                name: "beijing",
                spec: &a,
                labels: &empty,
                annotations: &empty,
            },
            members(&a, &nodes).unwrap(),
        ),
        (
            UnitInfo {
                name: "guangzhou",
                spec: &a,
                labels: &marked,
                annotations: &empty,
            },
            members(&a, &nodes).unwrap(),
        ),
    ];
    let group = NodeGroupSpec {
        node_units: vec!["beijing".into()],
        ..NodeGroupSpec::default()
    };
    let (want, conflicts) = desired(&units, &[("location", &group)], &nodes);
    assert_eq!(want["bj-3"].labels["location"], Want::Set("beijing".into()));
    assert_eq!(
        conflicts,
        [Conflict {
            node: "bj-3".into(),
            key: "label location".into(),
            units: vec!["beijing".into(), "guangzhou".into()],
        }]
    );
    // Without a current value among the candidates: nothing is set.
    bj3.labels.clear();
    let (want, _) = desired(&units, &[("location", &group)], &[bj3]);
    assert_eq!(want["bj-3"].labels["location"], Want::Hold);
}

#[test]
fn auto_found_units_are_named_from_the_values_stably_and_validly() {
    let nodes = [
        node("a", &[("zone", "bj"), ("rack", "r1")]),
        node("b", &[("zone", "bj"), ("rack", "r1")]),
        node("c", &[("zone", "gz"), ("rack", "r2")]),
        node("d", &[("zone", "sh")]),
        node("e", &[("zone", "Shang_Hai"), ("rack", "r9")]),
    ];
    let keys = vec!["zone".to_owned(), "rack".to_owned()];
    let found = auto_found_units(&keys, &nodes);
    let names: Vec<&str> = found.keys().map(String::as_str).collect();
    // Values sorted by key (rack, zone); d lacks rack; e is cleaned and hashed.
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(found.contains_key("r1-bj"));
    assert!(found.contains_key("r2-gz"));
    assert_eq!(found["r1-bj"], map(&[("rack", "r1"), ("zone", "bj")]));
    let hashed = names
        .iter()
        .find(|n| n.starts_with("r9-shang-hai-"))
        .expect("hashed name");
    assert_eq!(hashed.len(), "r9-shang-hai-".len() + 8);
    assert_eq!(auto_found_units(&keys, &nodes), found, "stable");
    let long = node("f", &[("zone", &"x".repeat(80)), ("rack", "r")]);
    for name in auto_found_units(&keys, &[long]).keys() {
        assert!(name.len() <= 63, "{name}");
    }
}

#[test]
fn readiness_counts_members_only() {
    let mut nodes = vec![
        node("bj-1", &[]),
        node("bj-2", &[]),
        node("bj-3", &[]),
        node("gz-1", &[]),
    ];
    nodes[1].ready = false;
    let members: BTreeSet<String> = ["bj-1", "bj-2", "bj-3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (rate, ready, not_ready) = readiness(&members, &nodes);
    assert_eq!(rate, "2/3");
    assert_eq!(ready, ["bj-1", "bj-3"]);
    assert_eq!(not_ready, ["bj-2"]);
}
