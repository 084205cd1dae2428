//! What the API server sends the proxy: objects and watch frames.

use kube::{
    core::{Status, WatchEvent},
    runtime::watcher::Event,
};
use serde_json::Value;
use sitegrid_apimachinery::protobuf::{self, Kind};
use sitegrid_cache::{
    self as cache, ApiVersion, CacheConfig, ResourceKind, UpstreamBody, UpstreamObject,
};

use crate::text;

/// Upstream objects through the projector (the topology filter and the
/// per-kind views), then every served view encoded as each version's JSON
/// and protobuf, as clients ask for them.
///
/// The input is a script, one event a line: `<event><kind> <object JSON>`,
/// `<event>` one of `[` (a list begins), `=` (a listed object), `]` (the
/// list ends), `+` (added or modified), `-` (deleted); `<kind>` one of
/// `s` Services, `e` Endpoints, `l` EndpointSlices, `n` Nodes. A first line
/// `v1beta1` makes the upstream serve EndpointSlices in v1beta1. The writer
/// projects for node `bj-1` of the two-site world.
pub fn projector(data: &[u8]) {
    let Some(script) = text(data) else { return };
    let mut lines = script.lines().peekable();
    let slice_version = match lines.peek() {
        Some(&"v1beta1") => {
            lines.next();
            ApiVersion::V1beta1
        }
        _ => ApiVersion::V1,
    };
    let (cache, slot) = cache::with_start_rv(CacheConfig::default(), 1000);
    let mut writer = slot.start("bj-1", slice_version);
    for line in lines {
        let mut chars = line.chars();
        let (Some(event), Some(kind)) = (chars.next(), chars.next()) else {
            continue;
        };
        let kind = match kind {
            's' => ResourceKind::Services,
            'e' => ResourceKind::Endpoints,
            'l' => ResourceKind::EndpointSlices,
            'n' => ResourceKind::Nodes,
            _ => continue,
        };
        let object = || UpstreamObject::from_json(chars.as_str().trim_start()).ok();
        let event = match event {
            '[' => Event::Init,
            ']' => Event::InitDone,
            '=' => match object() {
                Some(o) => Event::InitApply(o),
                None => continue,
            },
            '+' => match object() {
                Some(o) => Event::Apply(o),
                None => continue,
            },
            '-' => match object() {
                Some(o) => Event::Delete(o),
                None => continue,
            },
            _ => continue,
        };
        writer.handle(kind, event);
    }
    super::encode_every_view(&cache);
}

/// A JSON watch stream from the API server as kube-runtime's watcher
/// decodes it for the proxy (one `{"type":…,"object":…}` a line, an
/// `ERROR` frame's object a `Status`), each object as the proxy keeps it
/// ([`UpstreamObject`]: raw JSON plus parsed metadata).
pub fn watch_frames(data: &[u8]) {
    for line in data.split(|&b| b == b'\n') {
        match serde_json::from_slice::<WatchEvent<UpstreamObject>>(line) {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                let _ = (o.key(), o.upstream_rv());
                let _ = UpstreamObject::from_json(&o.json());
            }
            Ok(WatchEvent::Bookmark(b)) => {
                let _ = b.metadata.resource_version;
            }
            Ok(WatchEvent::Error(e)) => {
                let _ = e.to_string();
            }
            Err(_) => {
                let _ = serde_json::from_slice::<Status>(line);
            }
        }
    }
}

/// An object's JSON (as the API server sends it) converted to its protobuf
/// message, for protobuf clients; the first byte picks the message.
pub fn protobuf(data: &[u8]) {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let kind = match pick % 5 {
        0 => Kind::Service,
        1 => Kind::Endpoints,
        2 => Kind::Node,
        3 => Kind::EndpointSliceV1,
        _ => Kind::EndpointSliceV1beta1,
    };
    if let Ok(message) = protobuf::message(kind, json) {
        let _ = protobuf::envelope("v1", "Fuzz", &message);
    }
}

/// A protobuf answer from upstream read as the reflectors read Services
/// and endpoints: byte 0 even, the rest is a whole answer (an object, a
/// list, a `Status`); odd, a watch stream (length-prefixed events), cut and
/// read event by event as the proxy's watch body does, until one does not
/// read. Each is written as JSON with its objects carried
/// (`apimachinery::protobuf::to_json::answer_carried`,
/// `watch_event_carried`), which kube-runtime then decodes into the proxy's
/// `UpstreamObject`s, decoding each carried object there. Invariants: what
/// is written is JSON; a carried object that decodes is what the whole
/// conversion (`answer`, `watch_event`) writes for it, and a watch event's
/// object, or a list's Endpoints or EndpointSlice, keeps the bytes it was
/// read from (the writer's copy of it).
pub fn protobuf_answer(data: &[u8]) {
    let Some((&pick, wire)) = data.split_first() else {
        return;
    };
    if pick % 2 == 0 {
        let Ok(json) = protobuf::to_json::answer_carried(wire) else {
            return;
        };
        let value: Value = serde_json::from_slice(&json).expect("the answer read is JSON");
        let whole = protobuf::to_json::answer(wire)
            .ok()
            .map(|j| serde_json::from_slice::<Value>(&j).expect("the whole answer is JSON"));
        let expected = whole.as_ref().and_then(|w| w["items"].as_array());
        for (i, item) in value["items"].as_array().into_iter().flatten().enumerate() {
            let o = UpstreamObject::from_json(&item.to_string()).expect("any JSON value decodes");
            let _ = (o.key(), o.upstream_rv());
            let decoded = matches!(
                o.body,
                UpstreamBody::ProtobufText(_)
                    | UpstreamBody::Protobuf { .. }
                    | UpstreamBody::ProtobufSlice { .. }
                    | UpstreamBody::ProtobufListed(_)
            );
            if let (true, Some(expected)) = (decoded, expected) {
                let mut v = o
                    .value()
                    .expect("a listed object decoded from protobuf reads as JSON");
                // An Endpoints or EndpointSlice keeps the bytes the writer
                // keeps, and they read back as the same object.
                if v["kind"] == "Endpoints" || v["kind"] == "EndpointSlice" {
                    let kept = o.body.wire().map(|w| protobuf::to_json::object_value(w));
                    assert!(
                        matches!(&kept, Some(Ok(again)) if again == &v),
                        "a listed item's kept protobuf reads as the object"
                    );
                }
                if let Some(m) = v.as_object_mut() {
                    m.shift_remove("kind");
                    m.shift_remove("apiVersion");
                }
                assert_eq!(Some(&v), expected.get(i), "item {i} carried and decoded");
            }
        }
        return;
    }
    let mut buf = bytes::BytesMut::from(wire);
    let mut events = sitegrid_proxy::upstream::protobuf::watch_events();
    while let Ok(Some(frame)) = tokio_util::codec::Decoder::decode(&mut events, &mut buf) {
        // As the proxy reads it: the frame frozen in the codec's buffer.
        let frame = frame.freeze();
        let mut line = Vec::new();
        if protobuf::to_json::watch_event_carried(frame.clone(), &mut line).is_err() {
            break;
        }
        let whole = protobuf::to_json::watch_event(&frame)
            .ok()
            .map(|j| serde_json::from_slice::<Value>(&j).expect("the whole event is JSON"));
        match serde_json::from_slice::<WatchEvent<UpstreamObject>>(&line) {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) => {
                let _ = (o.key(), o.upstream_rv());
                let decoded = matches!(
                    o.body,
                    UpstreamBody::Protobuf { .. } | UpstreamBody::ProtobufSlice { .. }
                );
                if let (true, Ok(v), Some(whole)) = (decoded, o.value(), &whole) {
                    assert_eq!(v, whole["object"], "the event's object carried and decoded");
                    // What the writer keeps of it reads back as the same.
                    let kept = o.body.wire().map(|w| protobuf::to_json::object_value(w));
                    assert!(
                        matches!(&kept, Some(Ok(again)) if again == &v),
                        "the kept protobuf reads as the object"
                    );
                }
            }
            Ok(_) => {}
            Err(_) => {
                let _: Value = serde_json::from_slice(&line).expect("the event read is JSON");
            }
        }
    }
}
