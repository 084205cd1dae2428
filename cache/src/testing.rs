//! What tests of the writer, in this crate and the proxy's, feed it: objects
//! as the API server sends them, and a kind's list as a reflector delivers
//! it (`testing` feature; always in this crate's own tests).

use kube::runtime::watcher::Event;
use serde_json::Value;

use crate::{ApiVersion, ResourceKind, UpstreamObject, Writer};

/// `v` as the reflectors decode an object the API server sent.
pub fn obj(v: &Value) -> UpstreamObject {
    match UpstreamObject::from_json(&v.to_string()) {
        Ok(o) => o,
        // Any JSON value decodes (an unreadable one says why in `invalid`).
        Err(e) => panic!("{v} does not decode: {e}"),
    }
}

/// `objs` given to `writer` as one list of `kind`: `Init`, an `InitApply`
/// each, `InitDone`.
pub fn sync(
    writer: &mut Writer,
    kind: ResourceKind,
    objs: impl IntoIterator<Item = UpstreamObject>,
) {
    writer.handle(kind, Event::Init);
    for o in objs {
        writer.handle(kind, Event::InitApply(o));
    }
    writer.handle(kind, Event::InitDone);
}

/// `v` (a Service, Endpoints or EndpointSlice of `version`, as JSON) as a
/// reflector reading protobuf hands it to the writer: carried, through the
/// converters the proxy reads with, from a list (`listed`) or a watch event.
pub fn carried(kind: ResourceKind, version: ApiVersion, v: &Value, listed: bool) -> UpstreamObject {
    use sitegrid_apimachinery::protobuf::{self as pb, to_json, Kind};
    let (pb_kind, api_version, kind_name) = match (kind, version) {
        (ResourceKind::Services, _) => (Kind::Service, "v1", "Service"),
        (ResourceKind::Endpoints, _) => (Kind::Endpoints, "v1", "Endpoints"),
        (ResourceKind::EndpointSlices, ApiVersion::V1) => (
            Kind::EndpointSliceV1,
            "discovery.k8s.io/v1",
            "EndpointSlice",
        ),
        (ResourceKind::EndpointSlices, ApiVersion::V1beta1) => (
            Kind::EndpointSliceV1beta1,
            "discovery.k8s.io/v1beta1",
            "EndpointSlice",
        ),
        _ => panic!("{kind} is not read in protobuf"),
    };
    let message = pb::message(pb_kind, v.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("{v} is not a {kind_name}: {e}"));
    let text = if listed {
        let list = pb::list(
            api_version,
            &format!("{kind_name}List"),
            &Default::default(),
            std::iter::once(&message[..]),
        );
        let answer = to_json::answer_carried(&list).expect("a list read");
        serde_json::from_slice::<Value>(&answer).expect("JSON")["items"][0].clone()
    } else {
        let event = pb::watch_event("MODIFIED", &pb::envelope(api_version, kind_name, &message));
        let line = to_json::watch_event_carried(&event[4..]).expect("an event read");
        serde_json::from_slice::<Value>(&line).expect("JSON")["object"].clone()
    };
    assert!(text.is_string(), "{kind_name}: carried, not converted");
    obj(&text)
}
