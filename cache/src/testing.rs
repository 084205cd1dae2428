//! What tests of the writer, in this crate and the proxy's, feed it: objects
//! as the API server sends them, and a kind's list as a reflector delivers
//! it (`testing` feature; always in this crate's own tests).

use kube::runtime::watcher::Event;
use serde_json::Value;

use crate::{ResourceKind, Served, UpstreamObject, Writer};

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

/// `v` (a Service, Endpoints or EndpointSlice of `served`, as JSON) as a
/// reflector reading protobuf hands it to the writer: carried, through the
/// converters the proxy reads with, from a list (`listed`) or a watch event.
pub fn carried(served: Served, v: &Value, listed: bool) -> UpstreamObject {
    use sitegrid_apimachinery::protobuf::{self as pb, to_json};
    let (api_version, kind) = (served.api_version(), served.kind.kind());
    let message = pb::message(served.message(), v.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("{v} is not a {kind}: {e}"));
    let text = if listed {
        let items = std::iter::once(&message[..]);
        let list = pb::list(api_version, served.list_kind(), &Default::default(), items);
        let answer = to_json::answer_carried(&list).expect("a list read");
        serde_json::from_slice::<Value>(&answer).expect("JSON")["items"][0].clone()
    } else {
        let event = pb::watch_event("MODIFIED", &pb::envelope(api_version, kind, &message));
        let mut line = Vec::new();
        to_json::watch_event_carried(bytes::Bytes::copy_from_slice(&event[4..]), &mut line)
            .expect("an event read");
        serde_json::from_slice::<Value>(&line).expect("JSON")["object"].clone()
    };
    assert!(text.is_string(), "{kind}: carried, not converted");
    obj(&text)
}
