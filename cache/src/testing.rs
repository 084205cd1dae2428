//! What tests of the writer, in this crate and the proxy's, feed it: objects
//! as the API server sends them, and a kind's list as a reflector delivers
//! it (`testing` feature; always in this crate's own tests).

use kube::runtime::watcher::Event;
use serde_json::Value;

use crate::{ResourceKind, UpstreamObject, Writer};

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
