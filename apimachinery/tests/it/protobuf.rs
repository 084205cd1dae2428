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

/// The events of a protobuf watch stream, each without its 4-byte length.
fn raw_frames(mut wire: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while wire.has_remaining() {
        let len = wire.get_u32() as usize;
        out.push(&wire[..len]);
        wire.advance(len);
    }
    out
}

/// The frames of a protobuf watch stream: (type, envelope of the object).
fn frames(wire: &[u8]) -> Vec<(String, Vec<u8>)> {
    raw_frames(wire)
        .into_iter()
        .map(|frame| {
            let event = meta::WatchEvent::decode(frame).unwrap();
            (event.r#type.unwrap(), event.object.unwrap().raw.unwrap())
        })
        .collect()
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

/// `unknown_fields` names exactly the fields protobuf would drop: none for
/// kube-apiserver's own objects nor for the 1.29–1.33 fields kube-proxy
/// reads (hints for zones and nodes, serving/terminating, traffic
/// distribution, IP families, internal traffic policy); the path of a field
/// no type here has.
#[test]
fn unknown_fields_are_the_ones_protobuf_would_drop() {
    for (name, kind) in [
        ("endpoints-list.json", Kind::Endpoints),
        ("endpointslices-list.json", Kind::EndpointSliceV1beta1),
        ("services-list.json", Kind::Service),
        ("nodes-list.json", Kind::Node),
    ] {
        for item in golden_json(name)["items"].as_array().unwrap() {
            let unknown = protobuf::unknown_fields(kind, item).unwrap();
            assert!(unknown.is_empty(), "{name}: {unknown:?}");
        }
    }
    let slice = serde_json::json!({
        "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"name": "s", "namespace": "default"}, "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"],
            "conditions": {"ready": true, "serving": true, "terminating": false},
            "hints": {"forZones": [{"name": "a"}], "forNodes": [{"name": "n"}]}}],
    });
    assert_eq!(
        protobuf::unknown_fields(Kind::EndpointSliceV1, &slice).unwrap(),
        Vec::<String>::new()
    );
    let service = serde_json::json!({
        "metadata": {"name": "svc"},
        "spec": {"ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose"},
    });
    assert!(protobuf::unknown_fields(Kind::Service, &service)
        .unwrap()
        .is_empty());
    let mut future = slice.clone();
    future["endpoints"][0]["hints"]["forRegions"] = serde_json::json!([{"name": "r"}]);
    future["futureTop"] = serde_json::json!(true);
    let mut got = protobuf::unknown_fields(Kind::EndpointSliceV1, &future).unwrap();
    got.sort();
    assert_eq!(got, ["endpoints.0.hints.forRegions", "futureTop"]);
}

/// kube-apiserver's protobuf answers, read back as JSON, equal its JSON
/// answers to the same requests (lists, one object, an error), field by
/// field: what a JSON client that asks for protobuf then reads.
#[test]
fn protobuf_answers_read_as_the_apiservers_json() {
    for name in [
        "endpoints-list",
        "endpointslices-list",
        "services-list",
        "endpoints-get",
        "notfound",
    ] {
        let ours: Value = serde_json::from_slice(
            &protobuf::to_json::answer(&golden(&format!("{name}.pb")))
                .unwrap_or_else(|e| panic!("{name}: {e}")),
        )
        .unwrap();
        assert_eq!(ours, golden_json(&format!("{name}.json")), "{name}");
    }
}

/// A protobuf watch stream, read frame by frame as JSON, is the JSON watch
/// stream of the same events (compared ordered by version, as above).
#[test]
fn protobuf_watch_frames_read_as_the_apiservers_json_lines() {
    for name in ["endpoints-watch", "endpoints-watch-history"] {
        let wire = golden(&format!("{name}.pb"));
        let mut ours: Vec<Value> = raw_frames(&wire)
            .into_iter()
            .map(|frame| {
                let line = protobuf::to_json::watch_event(frame).unwrap();
                serde_json::from_slice(&line).unwrap()
            })
            .collect();
        let mut theirs: Vec<Value> = String::from_utf8(golden(&format!("{name}.json")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(!theirs.is_empty(), "{name}: the capture has events");
        let by_version = |e: &Value| {
            (
                e["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .parse::<u64>()
                    .unwrap_or(0),
                e["object"]["metadata"]["name"].to_string(),
            )
        };
        ours.sort_by_key(by_version);
        theirs.sort_by_key(by_version);
        assert_eq!(ours, theirs, "{name}");
    }
}

/// A field this build's messages do not know (1.20's `spec.topologyKeys`,
/// field 16 of ServiceSpec, or a newer API's) is not dropped silently: the
/// answer is refused as incomplete, so the caller reads JSON instead.
#[test]
fn a_field_the_messages_do_not_know_makes_the_answer_incomplete() {
    let wire = golden("services-list.pb");
    let outer = unknown(&wire);
    let mut list = core::ServiceList::decode(outer.raw.as_deref().unwrap()).unwrap();
    // Complete as captured (the headless Service's empty selector value and
    // all): read.
    protobuf::to_json::answer(&wire).unwrap();
    // Service 0 with `topologyKeys: ["location"]` appended to its spec.
    let item = list.items.remove(0);
    let mut spec = item.spec.clone().unwrap().encode_to_vec();
    prost::encoding::string::encode(16, &"location".to_owned(), &mut spec);
    let mut service = Vec::new();
    prost::encoding::message::encode(1, &item.metadata.clone().unwrap(), &mut service);
    prost::encoding::bytes::encode(2, &spec, &mut service);
    prost::encoding::message::encode(3, &item.status.clone().unwrap(), &mut service);
    let with_keys = protobuf::envelope("v1", "Service", &service);
    let err = protobuf::to_json::answer(&with_keys).unwrap_err();
    assert!(
        matches!(err, protobuf::to_json::DecodeError::Incomplete(ref kind, _) if kind == "Service"),
        "{err}"
    );
    // The same Service without it reads.
    let plain = protobuf::envelope("v1", "Service", &item.encode_to_vec());
    let json: Value = serde_json::from_slice(&protobuf::to_json::answer(&plain).unwrap()).unwrap();
    assert_eq!(json["kind"], "Service");
    assert_eq!(
        json["spec"],
        golden_json("services-list.json")["items"][0]["spec"]
    );
}

/// What a sitegrid proxy serves in protobuf (prost leaves out the empty
/// label values Go writes: `service.kubernetes.io/headless: ""` here) reads
/// back completely as the JSON it was made from: a node proxy behind a site
/// proxy reads its answers in protobuf.
#[test]
fn sitegrid_protobuf_lists_read_back_as_the_json_they_were_made_from() {
    for (name, kind) in [
        ("endpoints-list", Kind::Endpoints),
        ("endpointslices-list", Kind::EndpointSliceV1beta1),
        ("services-list", Kind::Service),
    ] {
        let json = golden_json(&format!("{name}.json"));
        let items = encoded_items(&json, kind);
        let wire = protobuf::list(
            json["apiVersion"].as_str().unwrap(),
            json["kind"].as_str().unwrap(),
            &protobuf::list_meta(
                json["metadata"]["resourceVersion"].as_str().unwrap(),
                "",
                None,
            ),
            items.iter().map(Vec::as_slice),
        );
        let back: Value = serde_json::from_slice(
            &protobuf::to_json::answer(&wire).unwrap_or_else(|e| panic!("{name}: {e}")),
        )
        .unwrap();
        assert_eq!(back, json, "{name}");
    }
}

/// A list as it is on the wire: its items' messages as they are.
#[derive(Clone, PartialEq, prost::Message)]
struct RawItems {
    #[prost(bytes = "vec", repeated, tag = "2")]
    items: Vec<Vec<u8>>,
}

/// An EndpointSlice read as its message (as a watch event's is): whole, it
/// reads as kube-apiserver's JSON of it; what a filter reads of each
/// endpoint is what its JSON says (the node by `nodeName` or the hostname
/// label, readiness unset read as ready, the pod's uid); with a filter, the
/// endpoints it keeps are written, in order, and no other.
#[test]
fn an_endpointslice_read_as_its_message_reads_as_the_apiservers_json() {
    use protobuf::to_json::{self, Decoded};
    let json = golden_json("endpointslices-list.json");
    let theirs = unknown(&golden("endpointslices-list.pb"));
    let raw = RawItems::decode(theirs.raw.as_deref().unwrap()).unwrap();
    let items = json["items"].as_array().unwrap();
    assert_eq!(raw.items.len(), items.len());
    let mut endpoints = 0;
    for (message, item) in raw.items.iter().zip(items) {
        let wire = protobuf::envelope("discovery.k8s.io/v1beta1", "EndpointSlice", message);
        let Decoded::Slice(slice) = to_json::object(wire.clone()).unwrap() else {
            panic!("an EndpointSlice is read as its message");
        };
        // As the API server wrote it (its kind and apiVersion first, as in
        // a watch event's object).
        let theirs = format!(
            r#"{{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1beta1",{}"#,
            &serde_json::to_string(item).unwrap()[1..]
        );
        let whole: Value = serde_json::from_str(&theirs).unwrap();
        let listed: Vec<Value> = item["endpoints"].as_array().cloned().unwrap_or_default();
        endpoints += listed.len();
        let facts: Vec<(Option<String>, bool, Option<String>)> = slice
            .endpoints()
            .map(|f| {
                (
                    f.node.map(str::to_owned),
                    f.ready,
                    f.pod_uid.map(str::to_owned),
                )
            })
            .collect();
        let said: Vec<(Option<String>, bool, Option<String>)> = listed
            .iter()
            .map(|e| {
                let node = e["nodeName"]
                    .as_str()
                    .or(e["topology"]["kubernetes.io/hostname"].as_str());
                (
                    node.map(str::to_owned),
                    e["conditions"]["ready"].as_bool().unwrap_or(true),
                    e["targetRef"]["uid"].as_str().map(str::to_owned),
                )
            })
            .collect();
        assert_eq!(facts, said, "{}", item["metadata"]["name"]);
        // Every other endpoint, counted as the filter is asked.
        let mut asked = 0;
        let odd = slice.clone().into_value_keeping(|_| {
            asked += 1;
            asked % 2 == 1
        });
        let mut expected = whole.clone();
        if !listed.is_empty() {
            expected["endpoints"] = listed.iter().step_by(2).cloned().collect();
        }
        assert_eq!(
            serde_json::to_string(&odd).unwrap(),
            serde_json::to_string(&expected).unwrap(),
            "{}",
            item["metadata"]["name"]
        );
        assert_eq!(asked, listed.len(), "each endpoint asked about once");
        let none = slice.clone().into_value_keeping(|_| false);
        assert_eq!(
            none["endpoints"],
            if listed.is_empty() {
                Value::Null
            } else {
                Value::Array(Vec::new())
            },
            "a list the filter emptied stays a list"
        );
        // Byte for byte.
        assert_eq!(serde_json::to_string(&slice.into_value()).unwrap(), theirs);
    }
    assert!(endpoints > 2, "the capture has endpoints to choose from");
}

/// What a filter reads of an endpoint, in both versions, where the capture
/// has no example: a node named by `nodeName` and the hostname label at
/// once (`nodeName` wins; v1's `deprecatedTopology` names none), by the
/// label alone, by an empty name; readiness unset (ready), false; an empty
/// pod uid (none, as the JSON leaves it out).
#[test]
fn an_endpointslice_message_tells_each_endpoints_node_readiness_and_pod() {
    use k8s_pb::api::core::v1::ObjectReference;
    use k8s_pb::api::discovery::v1 as disc_v1;
    use protobuf::to_json::{self, Decoded};
    let pod = |uid: &str| {
        Some(ObjectReference {
            kind: Some("Pod".into()),
            name: Some("p".into()),
            uid: Some(uid.into()),
            ..Default::default()
        })
    };
    let hostname = |h: &str| [("kubernetes.io/hostname".to_owned(), h.to_owned())].into();
    let meta = Some(meta::ObjectMeta {
        name: Some("s".into()),
        namespace: Some("ns".into()),
        ..Default::default()
    });
    let v1 = disc_v1::EndpointSlice {
        metadata: meta.clone(),
        address_type: Some("IPv4".into()),
        endpoints: vec![
            disc_v1::Endpoint {
                addresses: vec!["10.0.0.1".into()],
                node_name: Some("n1".into()),
                deprecated_topology: hostname("h1"),
                target_ref: pod(""),
                ..Default::default()
            },
            disc_v1::Endpoint {
                addresses: vec!["10.0.0.2".into()],
                deprecated_topology: hostname("h2"),
                conditions: Some(disc_v1::EndpointConditions {
                    ready: Some(false),
                    ..Default::default()
                }),
                target_ref: pod("u2"),
                ..Default::default()
            },
            disc_v1::Endpoint {
                addresses: vec!["10.0.0.3".into()],
                node_name: Some(String::new()),
                conditions: Some(disc_v1::EndpointConditions::default()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let v1beta1 = v1beta1::EndpointSlice {
        metadata: meta,
        address_type: Some("IPv4".into()),
        endpoints: v1
            .endpoints
            .iter()
            .map(|e| v1beta1::Endpoint {
                addresses: e.addresses.clone(),
                conditions: e.conditions.map(|c| v1beta1::EndpointConditions {
                    ready: c.ready,
                    ..Default::default()
                }),
                target_ref: e.target_ref.clone(),
                topology: e.deprecated_topology.clone(),
                node_name: e.node_name.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    type Said = Vec<(Option<&'static str>, bool, Option<&'static str>)>;
    let cases: [(&str, Vec<u8>, Said); 2] = [
        (
            "discovery.k8s.io/v1",
            v1.encode_to_vec(),
            vec![
                (Some("n1"), true, None),
                (None, false, Some("u2")),
                (Some(""), true, None),
            ],
        ),
        (
            "discovery.k8s.io/v1beta1",
            v1beta1.encode_to_vec(),
            vec![
                (Some("n1"), true, None),
                (Some("h2"), false, Some("u2")),
                (Some(""), true, None),
            ],
        ),
    ];
    for (api_version, message, said) in cases {
        let wire = protobuf::envelope(api_version, "EndpointSlice", &message);
        let Decoded::Slice(slice) = to_json::object(wire.clone()).unwrap() else {
            panic!("{api_version}: an EndpointSlice is read as its message");
        };
        let facts: Vec<_> = slice
            .endpoints()
            .map(|f| (f.node, f.ready, f.pod_uid))
            .collect();
        assert_eq!(facts, said, "{api_version}");
        // Filtered by what it read: the whole object's text, with only the
        // endpoints kept, in place.
        let whole = to_json::object_value(&wire).unwrap();
        let mut expected = whole.clone();
        expected["endpoints"] = Value::Array(
            whole["endpoints"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["conditions"]["ready"] != false)
                .cloned()
                .collect(),
        );
        let ready = slice.clone().into_value_keeping(|f| f.ready);
        assert_eq!(
            serde_json::to_string(&ready).unwrap(),
            serde_json::to_string(&expected).unwrap(),
            "{api_version}"
        );
        assert_eq!(
            serde_json::to_string(&slice.into_value()).unwrap(),
            serde_json::to_string(&whole).unwrap(),
            "{api_version}"
        );
    }
}

/// An EndpointSlice read as its message is read whole, though its endpoints
/// are written only when a filter keeps them: every field of an endpoint of
/// either version reads back as the whole object's JSON says (Go's empty
/// map values included), and a field this build does not know, a map entry
/// written twice, or a string that is not UTF-8, in any endpoint makes the
/// slice unread as it does the whole object (incomplete, or malformed: so
/// the caller reads JSON instead) where no filter would have kept it.
#[test]
fn an_endpointslice_message_is_checked_whole_where_its_endpoints_are_not_written() {
    use k8s_pb::api::core::v1::ObjectReference;
    use k8s_pb::api::discovery::v1 as disc_v1;
    use protobuf::to_json::{self, DecodeError, Decoded};
    let target_ref = Some(ObjectReference {
        kind: Some("Pod".into()),
        namespace: Some("ns".into()),
        name: Some("p".into()),
        uid: Some("u1".into()),
        api_version: Some("v1".into()),
        resource_version: Some("7".into()),
        field_path: Some("spec".into()),
    });
    let conditions = (Some(true), Some(false), Some(true));
    let v1 = disc_v1::Endpoint {
        addresses: vec!["10.0.0.1".into(), "10.0.0.2".into()],
        conditions: Some(disc_v1::EndpointConditions {
            ready: conditions.0,
            serving: conditions.1,
            terminating: conditions.2,
        }),
        hostname: Some("h".into()),
        target_ref: target_ref.clone(),
        deprecated_topology: [("kubernetes.io/hostname".to_owned(), "n1".to_owned())].into(),
        node_name: Some("n1".into()),
        zone: Some("z".into()),
        hints: Some(disc_v1::EndpointHints {
            for_zones: vec![disc_v1::ForZone {
                name: Some("z".into()),
            }],
            for_nodes: vec![disc_v1::ForNode {
                name: Some("n1".into()),
            }],
        }),
    };
    let v1beta1 = v1beta1::Endpoint {
        addresses: v1.addresses.clone(),
        conditions: Some(v1beta1::EndpointConditions {
            ready: conditions.0,
            serving: conditions.1,
            terminating: conditions.2,
        }),
        hostname: v1.hostname.clone(),
        target_ref,
        topology: v1.deprecated_topology.clone(),
        node_name: v1.node_name.clone(),
        hints: Some(v1beta1::EndpointHints {
            for_zones: vec![v1beta1::ForZone {
                name: Some("z".into()),
            }],
            for_nodes: vec![v1beta1::ForNode {
                name: Some("n1".into()),
            }],
        }),
    };
    // A map entry as Go writes one with an empty value (prost leaves the
    // empty value out): field 5, key "empty", value "".
    let mut go_entry = Vec::new();
    prost::encoding::string::encode(1, &"empty".to_owned(), &mut go_entry);
    go_entry.extend_from_slice(&[0x12, 0x00]);
    let with_go_entry = |mut endpoint: Vec<u8>| {
        prost::encoding::bytes::encode(5, &go_entry, &mut endpoint);
        endpoint
    };
    // A slice of two endpoints, the second as `second` is.
    let meta = meta::ObjectMeta {
        name: Some("s".into()),
        namespace: Some("ns".into()),
        ..Default::default()
    };
    let slice = |first: &[u8], second: &[u8]| {
        let mut out = Vec::new();
        prost::encoding::message::encode(1, &meta, &mut out);
        prost::encoding::bytes::encode(2, &first.to_vec(), &mut out);
        prost::encoding::bytes::encode(2, &second.to_vec(), &mut out);
        prost::encoding::string::encode(4, &"IPv4".to_owned(), &mut out);
        out
    };
    for (api_version, endpoint) in [
        ("discovery.k8s.io/v1", with_go_entry(v1.encode_to_vec())),
        (
            "discovery.k8s.io/v1beta1",
            with_go_entry(v1beta1.encode_to_vec()),
        ),
    ] {
        let wire = |second: &[u8]| {
            protobuf::envelope(api_version, "EndpointSlice", &slice(&endpoint, second))
        };
        let whole = wire(&endpoint);
        let Decoded::Slice(read) = to_json::object(whole.clone()).unwrap() else {
            panic!("{api_version}: an EndpointSlice is read as its message");
        };
        let value = to_json::object_value(&whole).unwrap();
        let topology = if api_version.ends_with("v1") {
            "deprecatedTopology"
        } else {
            "topology"
        };
        assert_eq!(
            value["endpoints"][1][topology]["empty"], "",
            "{api_version}"
        );
        assert_eq!(value["endpoints"][1]["targetRef"]["fieldPath"], "spec");
        assert_eq!(value["endpoints"][1]["hints"]["forNodes"][0]["name"], "n1");
        assert_eq!(
            read.endpoints()
                .map(|f| (f.node, f.ready, f.pod_uid))
                .collect::<Vec<_>>(),
            vec![(Some("n1"), true, Some("u1")); 2],
            "{api_version}"
        );
        assert_eq!(read.into_value(), value, "{api_version}");
        // A field no version of the message has, in the second endpoint.
        let mut unknown_field = endpoint.clone();
        prost::encoding::string::encode(99, &"new".to_owned(), &mut unknown_field);
        let incomplete = wire(&unknown_field);
        for err in [
            to_json::object(incomplete.clone()).err(),
            to_json::object_value(&incomplete).err(),
        ] {
            assert!(
                matches!(err, Some(DecodeError::Incomplete(ref kind, _)) if kind == "EndpointSlice"),
                "{api_version}: {err:?}"
            );
        }
        // A topology entry written twice (a map keeps one of them).
        let twice = with_go_entry(endpoint.clone());
        for err in [
            to_json::object(wire(&twice)).err(),
            to_json::object_value(&wire(&twice)).err(),
        ] {
            assert!(
                matches!(err, Some(DecodeError::Incomplete(ref kind, _)) if kind == "EndpointSlice"),
                "{api_version}: {err:?}"
            );
        }
        // A hostname that is not UTF-8, in the second endpoint: after its
        // own (so written twice), or before it (the last one read is UTF-8).
        let mut after = endpoint.clone();
        prost::encoding::bytes::encode(3, &vec![0xff, 0xfe], &mut after);
        let mut before = Vec::new();
        prost::encoding::bytes::encode(3, &vec![0xff, 0xfe], &mut before);
        before.extend_from_slice(&endpoint);
        for not_utf8 in [after, before] {
            for err in [
                to_json::object(wire(&not_utf8)).err(),
                to_json::object_value(&wire(&not_utf8)).err(),
            ] {
                assert!(
                    matches!(err, Some(DecodeError::Malformed(_))),
                    "{api_version}: {err:?}"
                );
            }
        }
    }
}

/// A map entry as Go writes it when its value is empty (key, then an empty
/// value, which prost would leave out).
fn go_entry_with_empty_value(key: &str) -> Vec<u8> {
    let mut entry = Vec::new();
    prost::encoding::string::encode(1, &key.to_owned(), &mut entry);
    entry.extend_from_slice(&[0x12, 0x00]);
    entry
}

/// `ObjectMeta` as a 1.24 or older kube-apiserver writes it: with the empty
/// `clusterName` (field 15, unknown to this build's messages) and a label
/// whose value is empty, both of which prost leaves out.
fn go_meta(name: &str, label: &str, annotation: &str) -> Vec<u8> {
    let mut meta = meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        annotations: if annotation.is_empty() {
            Default::default()
        } else {
            [("note".to_owned(), annotation.to_owned())].into()
        },
        ..Default::default()
    }
    .encode_to_vec();
    prost::encoding::bytes::encode(11, &go_entry_with_empty_value(label), &mut meta);
    meta.extend_from_slice(&[0x7a, 0x00]);
    meta
}

/// Go writes empty strings prost leaves out; where they make a part of the
/// message one byte longer to prefix with its length (a length of 127 or
/// less becoming 128 or more, 16,383 becoming 16,384), the object still
/// reads complete, as kube-apiserver's JSON of it would: at every length
/// around those, for a Service's metadata, label and selector, an
/// EndpointSlice's endpoint and a list's item, read whole or (a watch
/// event's slice) as its message.
#[test]
fn empty_strings_go_writes_read_complete_at_every_length() {
    use protobuf::to_json::{self, Decoded};
    // Whether a part Go wrote `go_len` long, which prost writes `shorter`
    // bytes shorter, has a length prefix of another size in prost's: each
    // sweep below must cross at least once.
    let crosses = |go_len: usize, shorter: usize| {
        let prefix = |n: usize| prost::encoding::encoded_len_varint(n as u64);
        prefix(go_len) != prefix(go_len - shorter)
    };
    let (mut metas, mut labels, mut selectors, mut endpoints, mut items) = (0, 0, 0, 0, 0);
    let service = |meta: &[u8], spec: &[u8]| {
        let mut service = Vec::new();
        prost::encoding::bytes::encode(1, &meta.to_vec(), &mut service);
        prost::encoding::bytes::encode(2, &spec.to_vec(), &mut service);
        protobuf::envelope("v1", "Service", &service)
    };
    // The metadata (name), the label's entry and the selector's entry
    // (their keys) across 128.
    for n in 100..140 {
        let name = "n".repeat(n);
        let key = "k".repeat(n);
        for (name, label) in [(name.as_str(), "headless"), ("s", key.as_str())] {
            let meta = go_meta(name, label, "");
            metas += usize::from(crosses(meta.len(), 4));
            labels += usize::from(crosses(go_entry_with_empty_value(label).len(), 2));
            let wire = service(&meta, &[]);
            let value = to_json::object_value(&wire)
                .unwrap_or_else(|e| panic!("name {}, label {}: {e}", name.len(), label.len()));
            assert_eq!(value["metadata"]["name"], name);
            assert_eq!(value["metadata"]["labels"][label], "");
        }
        let entry = go_entry_with_empty_value(&key);
        selectors += usize::from(crosses(entry.len(), 2));
        let mut spec = Vec::new();
        prost::encoding::bytes::encode(2, &entry, &mut spec);
        let wire = service(&go_meta("s", "headless", ""), &spec);
        let value = to_json::object_value(&wire).unwrap_or_else(|e| panic!("selector {n}: {e}"));
        assert_eq!(value["spec"]["selector"][key.as_str()], "");
    }
    // An endpoint (its hostname) across 128, with an empty topology value.
    for n in 90..130 {
        let hostname = "h".repeat(n);
        let mut endpoint = v1beta1::Endpoint {
            addresses: vec!["10.0.0.1".into()],
            hostname: Some(hostname.clone()),
            ..Default::default()
        }
        .encode_to_vec();
        prost::encoding::bytes::encode(5, &go_entry_with_empty_value("zone"), &mut endpoint);
        endpoints += usize::from(crosses(endpoint.len(), 2));
        let mut slice = Vec::new();
        prost::encoding::bytes::encode(1, &go_meta("s", "headless", ""), &mut slice);
        prost::encoding::bytes::encode(2, &endpoint, &mut slice);
        prost::encoding::string::encode(4, &"IPv4".to_owned(), &mut slice);
        let wire = protobuf::envelope("discovery.k8s.io/v1beta1", "EndpointSlice", &slice);
        let value = to_json::object_value(&wire).unwrap_or_else(|e| panic!("hostname {n}: {e}"));
        assert_eq!(value["endpoints"][0]["hostname"], hostname.as_str());
        assert_eq!(value["endpoints"][0]["topology"]["zone"], "");
        match to_json::object(wire) {
            Ok(Decoded::Slice(message)) => assert_eq!(message.into_value(), value),
            other => panic!("hostname {n}: read as its message: {other:?}"),
        }
    }
    // A list's item across 16,384 (its annotation's length).
    for n in 16_250..16_400 {
        let item = go_meta("s", "headless", &"a".repeat(n));
        let mut service = Vec::new();
        prost::encoding::bytes::encode(1, &item, &mut service);
        items += usize::from(crosses(service.len(), 4));
        let mut list = Vec::new();
        prost::encoding::message::encode(1, &protobuf::list_meta("7", "", None), &mut list);
        prost::encoding::bytes::encode(2, &service, &mut list);
        let wire = protobuf::envelope("v1", "ServiceList", &list);
        let value: Value = serde_json::from_slice(
            &to_json::answer(&wire).unwrap_or_else(|e| panic!("annotation {n}: {e}")),
        )
        .unwrap();
        assert_eq!(value["items"][0]["metadata"]["labels"]["headless"], "");
        assert_eq!(
            value["items"][0]["metadata"]["annotations"]["note"]
                .as_str()
                .map(str::len),
            Some(n)
        );
    }
    assert!(
        [metas, labels, selectors, endpoints, items]
            .iter()
            .all(|&c| c > 0),
        "every sweep crosses a length prefix's size: {:?}",
        [metas, labels, selectors, endpoints, items]
    );
}
