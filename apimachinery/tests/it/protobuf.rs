//! Protobuf answers built by sitegrid against kube-apiserver 1.20's, for the
//! same objects: the golden `.json` answer's objects are encoded here and
//! compared, decoded, with the golden `.pb` answer (field by field through
//! the k8s-pb messages; field order aside, prost then writes the same bytes).

use std::path::PathBuf;

use bytes::Buf;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::discovery::v1beta1;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::Value;
use sitegrid_apimachinery::protobuf::{self, Kind};
use sitegrid_apimachinery::Status;

fn golden(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn golden_json(name: &str) -> Value {
    serde_json::from_slice(&golden(name)).unwrap()
}

/// The `runtime.Unknown` after the `k8s\0` magic.
fn unknown(wire: &[u8]) -> Unknown {
    assert_eq!(&wire[..4], b"k8s\0", "the protobuf magic");
    Unknown::decode(&wire[4..]).unwrap()
}

/// Each item of a golden JSON list, encoded by sitegrid.
fn encoded_items(list: &Value, kind: Kind) -> Vec<Vec<u8>> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| protobuf::message(kind, item.to_string().as_bytes()).unwrap())
        .collect()
}

/// A list of `kind` built by sitegrid from the JSON list equals the golden one.
fn same_list<L: Message + Default + PartialEq + std::fmt::Debug>(name: &str, kind: Kind) {
    let json = golden_json(&format!("{name}.json"));
    let wire = golden(&format!("{name}.pb"));
    let theirs = unknown(&wire);
    let items = encoded_items(&json, kind);
    let meta = protobuf::list_meta(
        json["metadata"]["resourceVersion"].as_str().unwrap(),
        "",
        None,
    );
    let api_version = json["apiVersion"].as_str().unwrap();
    let list_kind = json["kind"].as_str().unwrap();
    let ours = protobuf::list(
        api_version,
        list_kind,
        &meta,
        items.iter().map(Vec::as_slice),
    );
    let ours = unknown(&ours);
    assert_eq!(ours.type_meta, theirs.type_meta, "{name}: typeMeta");
    assert_eq!(
        (
            ours.content_encoding.as_deref(),
            ours.content_type.as_deref()
        ),
        (Some(""), Some("")),
        "{name}: the envelope's empty strings are written"
    );
    assert_eq!(theirs.content_encoding.as_deref(), Some(""));
    let ours_list = L::decode(ours.raw.as_deref().unwrap()).unwrap();
    let theirs_list = L::decode(theirs.raw.as_deref().unwrap()).unwrap();
    assert_eq!(ours_list, theirs_list, "{name}: the list, decoded");
    // With the same fields, prost writes the same bytes for both.
    assert_eq!(
        ours_list.encode_to_vec(),
        theirs_list.encode_to_vec(),
        "{name}"
    );
}

#[test]
fn endpoints_list_equals_the_apiservers() {
    same_list::<core::EndpointsList>("endpoints-list", Kind::Endpoints);
}

#[test]
fn endpointslices_v1beta1_list_equals_the_apiservers() {
    same_list::<v1beta1::EndpointSliceList>("endpointslices-list", Kind::EndpointSliceV1beta1);
}

#[test]
fn services_list_equals_the_apiservers() {
    same_list::<core::ServiceList>("services-list", Kind::Service);
}

#[test]
fn nodes_list_equals_the_apiservers() {
    same_list::<core::NodeList>("nodes-list", Kind::Node);
}

#[test]
fn a_single_object_equals_the_apiservers() {
    let json = golden("endpoints-get.json");
    let theirs = unknown(&golden("endpoints-get.pb"));
    let ours = unknown(&protobuf::envelope(
        "v1",
        "Endpoints",
        &protobuf::message(Kind::Endpoints, &json).unwrap(),
    ));
    assert_eq!(ours.type_meta, theirs.type_meta);
    assert_eq!(
        core::Endpoints::decode(ours.raw.as_deref().unwrap()).unwrap(),
        core::Endpoints::decode(theirs.raw.as_deref().unwrap()).unwrap()
    );
}

#[test]
fn a_status_equals_the_apiservers() {
    let theirs = unknown(&golden("notfound.pb"));
    let ours = unknown(&protobuf::status(&Status::not_found(
        "services", "", "nope",
    )));
    assert_eq!(ours.type_meta, theirs.type_meta);
    assert_eq!(
        meta::Status::decode(ours.raw.as_deref().unwrap()).unwrap(),
        meta::Status::decode(theirs.raw.as_deref().unwrap()).unwrap()
    );
}

/// The frames of a protobuf watch stream: (type, envelope of the object).
fn frames(mut wire: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while wire.has_remaining() {
        let len = wire.get_u32() as usize;
        let event = meta::WatchEvent::decode(&wire[..len]).unwrap();
        wire.advance(len);
        out.push((event.r#type.unwrap(), event.object.unwrap().raw.unwrap()));
    }
    out
}

#[test]
fn watch_frames_equal_the_apiservers() {
    for name in ["endpoints-watch", "endpoints-watch-history"] {
        let theirs = frames(&golden(&format!("{name}.pb")));
        let json = String::from_utf8(golden(&format!("{name}.json"))).unwrap();
        let ours: Vec<(String, Vec<u8>)> = json
            .lines()
            .map(|line| {
                let event: Value = serde_json::from_str(line).unwrap();
                let object = event["object"].to_string();
                let envelope = protobuf::envelope(
                    "v1",
                    "Endpoints",
                    &protobuf::message(Kind::Endpoints, object.as_bytes()).unwrap(),
                );
                let frame = protobuf::watch_event(event["type"].as_str().unwrap(), &envelope);
                frames(&frame).remove(0)
            })
            .collect();
        assert_eq!(ours.len(), theirs.len(), "{name}: frames");
        assert!(!ours.is_empty(), "{name}: the capture has frames");
        // The two captures are two watches: initial events come in the watch
        // cache's order, which may differ. Compare them ordered by version.
        let decoded = |frames: &[(String, Vec<u8>)]| {
            let mut events: Vec<(String, core::Endpoints)> = frames
                .iter()
                .map(|(event_type, object)| {
                    let object = unknown(object);
                    assert_eq!(
                        object.type_meta.as_ref().and_then(|t| t.kind.as_deref()),
                        Some("Endpoints")
                    );
                    (
                        event_type.clone(),
                        core::Endpoints::decode(object.raw.as_deref().unwrap()).unwrap(),
                    )
                })
                .collect();
            events.sort_by_key(|(_, e)| {
                let m = e.metadata.clone().unwrap_or_default();
                (
                    m.resource_version
                        .unwrap_or_default()
                        .parse::<u64>()
                        .unwrap_or(0),
                    m.name,
                )
            });
            events
        };
        assert_eq!(decoded(&ours), decoded(&theirs), "{name}");
    }
}

/// `readable` (the check a cache makes on every object it takes in) accepts
/// exactly what `message` (the encoder) accepts: every object of the API
/// server's own lists, and none of the same objects with a field of the
/// wrong type.
#[test]
fn readable_accepts_what_the_encoder_accepts() {
    let lists = [
        ("endpoints-list.json", Kind::Endpoints),
        ("endpointslices-list.json", Kind::EndpointSliceV1beta1),
        ("services-list.json", Kind::Service),
        ("nodes-list.json", Kind::Node),
    ];
    let spoil: [(&str, Value); 4] = [
        ("metadata", serde_json::json!({"labels": {"app": 5}})),
        ("spec", serde_json::json!(5)),
        ("subsets", serde_json::json!([{"ports": [{"port": "80"}]}])),
        ("endpoints", serde_json::json!("x")),
    ];
    let mut checked = 0;
    for (name, kind) in lists {
        for item in golden_json(name)["items"].as_array().unwrap() {
            assert!(protobuf::readable(kind, item).is_ok(), "{name}: {item}");
            for (field, bad) in &spoil {
                let mut spoiled = item.clone();
                if spoiled.get(*field).is_none() {
                    continue;
                }
                match (&mut spoiled[*field], bad) {
                    (Value::Object(map), Value::Object(over)) => {
                        map.extend(over.clone());
                    }
                    (slot, _) => *slot = bad.clone(),
                }
                let encoder = protobuf::message(kind, spoiled.to_string().as_bytes());
                assert!(encoder.is_err(), "{name}: the encoder took {spoiled}");
                assert!(
                    protobuf::readable(kind, &spoiled).is_err(),
                    "{name}: readable took {spoiled}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "only {checked} spoiled objects were checked");
}

/// A ServiceCIDR (no 1.20 golden answer: 1.20 has no such resource) decodes
/// from sitegrid's message with every field it had, in both versions.
#[test]
fn service_cidrs_carry_their_cidrs_and_conditions_in_both_versions() {
    let json = serde_json::json!({
        "metadata": {"name": "kubernetes", "uid": "4a38af75", "resourceVersion": "12",
            "creationTimestamp": "2026-11-21T15:12:23Z"},
        "spec": {"cidrs": ["10.96.0.0/16", "fd00:10:96::/112"]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
            "message": "Kubernetes Service CIDR is ready",
            "lastTransitionTime": "2026-11-21T15:12:23Z"}]}
    })
    .to_string();
    use k8s_pb::api::networking::{v1, v1beta1};
    let v1 =
        v1::ServiceCIDR::decode(&*protobuf::message(Kind::ServiceCidrV1, json.as_bytes()).unwrap())
            .unwrap();
    let beta = v1beta1::ServiceCIDR::decode(
        &*protobuf::message(Kind::ServiceCidrV1beta1, json.as_bytes()).unwrap(),
    )
    .unwrap();
    for (meta, cidrs, conditions) in [
        (
            &v1.metadata,
            &v1.spec.as_ref().unwrap().cidrs,
            &v1.status.as_ref().unwrap().conditions,
        ),
        (
            &beta.metadata,
            &beta.spec.as_ref().unwrap().cidrs,
            &beta.status.as_ref().unwrap().conditions,
        ),
    ] {
        assert_eq!(meta.as_ref().unwrap().name.as_deref(), Some("kubernetes"));
        assert_eq!(cidrs, &["10.96.0.0/16", "fd00:10:96::/112"]);
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].r#type.as_deref(), Some("Ready"));
        assert_eq!(
            conditions[0].message.as_deref(),
            Some("Kubernetes Service CIDR is ready")
        );
    }
    let table_row = sitegrid_apimachinery::table::row_cells(
        "servicecidrs",
        &serde_json::from_str(&json).unwrap(),
        1_795_273_943 + 90,
    );
    assert_eq!(
        table_row,
        ["kubernetes", "10.96.0.0/16,fd00:10:96::/112", "90s"]
    );
}
