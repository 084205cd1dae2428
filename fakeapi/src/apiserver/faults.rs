//! Faults a test switches on at run time, to play a broken API server: an
//! object sent as malformed JSON or with fields of the wrong type, an object
//! deleted right after a list was served, a list whose body never ends, a
//! watch that goes silent without closing, and storms of error responses.
//!
//! They act on the HTTP exchange around the real handler ([`handle`]), so the
//! store, the lists and the watches stay those of kube-apiserver; with no
//! fault set a request goes straight through.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::Frame;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::query::ListOptions;
use super::routing::{route, Route};
use super::{Body, Shared};

/// Which read of a collection a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// A LIST (a GET of the collection without `watch`).
    List,
    /// A WATCH.
    Watch,
}

/// How an object is spoiled on its way out.
#[derive(Debug, Clone)]
pub enum Corruption {
    /// Its JSON is cut in the middle and followed by a control character: not JSON any more.
    Malformed,
    /// These fields are merged into it (RFC 7386), e.g. `{"subsets": 5}`: JSON
    /// still, but not of its type.
    Merge(Value),
}

/// One object to spoil in lists and watch events.
#[derive(Debug, Clone)]
struct Spoiled {
    resource: String,
    namespace: Option<String>,
    name: String,
    how: Corruption,
}

/// Error responses to answer the next requests with.
#[derive(Debug, Clone)]
struct Storm {
    resource: String,
    verb: Verb,
    code: u16,
    retry_after: Option<u32>,
    left: usize,
}

/// Every fault currently set.
#[derive(Debug, Default)]
struct Set {
    spoiled: Vec<Spoiled>,
    stalled: Vec<(String, Verb)>,
    storms: Vec<Storm>,
    delete_after_list: Vec<(String, Option<String>, String)>,
    /// Responses a fault changed or made up.
    injected: usize,
}

/// The faults of one server, shared with its handlers; see the module doc.
#[derive(Debug, Default)]
pub struct Faults {
    set: Mutex<Set>,
}

impl Faults {
    /// Spoil object `name` of `resource` (plural; `namespace` None when
    /// cluster-scoped) in every list page and watch event that carries it.
    pub fn corrupt(&self, resource: &str, namespace: Option<&str>, name: &str, how: Corruption) {
        self.set.lock().spoiled.push(Spoiled {
            resource: resource.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            how,
        });
    }

    /// Reads of `resource` by `verb` stall: a list sends the start of its
    /// body and then a space every 100 ms, forever; a watch sends its headers
    /// and then nothing, the connection left open.
    pub fn stall(&self, resource: &str, verb: Verb) {
        self.set.lock().stalled.push((resource.to_owned(), verb));
    }

    /// The next `times` reads of `resource` by `verb` get `code` with a
    /// `Status` body (and `Retry-After`, in the header and the Status'
    /// details, when given), as kube-apiserver answers when overloaded.
    pub fn fail(
        &self,
        resource: &str,
        verb: Verb,
        code: u16,
        retry_after: Option<u32>,
        times: usize,
    ) {
        self.set.lock().storms.push(Storm {
            resource: resource.to_owned(),
            verb,
            code,
            retry_after,
            left: times,
        });
    }

    /// Once, right after a list of `resource` is read (and before it is
    /// sent), delete object `name`: it is in that list, and a watch from the
    /// list's resourceVersion sees it deleted.
    pub fn delete_after_list(&self, resource: &str, namespace: Option<&str>, name: &str) {
        self.set.lock().delete_after_list.push((
            resource.to_owned(),
            namespace.map(str::to_owned),
            name.to_owned(),
        ));
    }

    /// Turn every fault off (streams already stalled stay so).
    pub fn clear(&self) {
        let mut set = self.set.lock();
        let injected = set.injected;
        *set = Set {
            injected,
            ..Set::default()
        };
    }

    /// How many responses the faults changed or made up so far.
    pub fn injected(&self) -> usize {
        self.set.lock().injected
    }

    fn count(&self) {
        self.set.lock().injected += 1;
    }
}

/// Serve `req` with the faults set for it.
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
) -> Result<Response<Body>, Infallible>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let Some((resource, verb)) = read_of(&shared, &req) else {
        return super::handler::handle(shared, req).await;
    };
    let faults = &shared.faults;
    let (storm, stalled, spoiled, delete) = {
        let mut set = faults.set.lock();
        let storm = set
            .storms
            .iter_mut()
            .find(|s| s.resource == resource && s.verb == verb && s.left > 0)
            .map(|s| {
                s.left -= 1;
                s.clone()
            });
        let stalled = set.stalled.iter().any(|s| s.0 == resource && s.1 == verb);
        let spoiled: Vec<Spoiled> = set
            .spoiled
            .iter()
            .filter(|s| s.resource == resource)
            .cloned()
            .collect();
        let delete = match verb {
            Verb::List => set
                .delete_after_list
                .iter()
                .position(|d| d.0 == resource)
                .map(|i| set.delete_after_list.remove(i)),
            Verb::Watch => None,
        };
        (storm, stalled, spoiled, delete)
    };
    if let Some(storm) = storm {
        faults.count();
        return Ok(storm_response(&storm));
    }
    if stalled {
        faults.count();
        return Ok(stalled_response(verb));
    }
    let resp = super::handler::handle(Arc::clone(&shared), req).await?;
    if let Some((resource, namespace, name)) = delete {
        faults.count();
        let store = &shared.store;
        if let Some(rt) = store.resources.by_id(&resource) {
            let ns = if rt.namespaced {
                namespace.unwrap_or_default()
            } else {
                String::new()
            };
            // Already gone is fine: the list still had it.
            let _gone = store.delete(rt, &ns, &name).is_err();
        }
    }
    if !resp.status().is_success() {
        return Ok(resp);
    }
    Ok(match verb {
        Verb::List if spoiled.is_empty() => resp,
        Verb::List => spoil_list_response(Arc::clone(&shared), resp, spoiled),
        // An open watch spoils what is set when each event goes out.
        Verb::Watch => spoil_watch_response(Arc::clone(&shared), resp, resource),
    })
}

/// The resource and verb of a read of a collection, None for anything else.
fn read_of<B>(shared: &Shared, req: &Request<B>) -> Option<(String, Verb)> {
    if req.method() != http::Method::GET {
        return None;
    }
    let Route::Collection { rt, watch, .. } = route(&shared.store.resources, req.uri().path())
    else {
        return None;
    };
    let resource = shared.store.resources.iter().nth(rt)?.id.clone();
    let watch = watch
        || ListOptions::parse(req.uri().query().unwrap_or(""))
            .map(|o| o.watch)
            .unwrap_or(false);
    Some((resource, if watch { Verb::Watch } else { Verb::List }))
}

fn storm_response(storm: &Storm) -> Response<Body> {
    let code = StatusCode::from_u16(storm.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match storm.code {
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    };
    let mut status = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":format!("injected fault: {code}"),"reason":reason,"code":storm.code});
    if let Some(secs) = storm.retry_after {
        status["details"] = json!({ "retryAfterSeconds": secs });
    }
    let mut resp = Response::new(full(Bytes::from(status.to_string())));
    *resp.status_mut() = code;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(secs) = storm.retry_after {
        h.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

fn stalled_response(verb: Verb) -> Response<Body> {
    let stream = match verb {
        Verb::List => {
            let start = futures::stream::once(async {
                Bytes::from_static(b"{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":")
            });
            let trickle = futures::stream::unfold((), |()| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Some((Bytes::from_static(b" "), ()))
            });
            start.chain(trickle).boxed()
        }
        Verb::Watch => futures::stream::pending().boxed(),
    };
    let frames = stream.map(|b| Ok::<_, Infallible>(Frame::data(b)));
    let mut resp = Response::new(StreamBody::new(frames).boxed_unsync());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn full(body: Bytes) -> Body {
    Full::new(body)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A list response with the `spoiled` objects spoiled (read whole, rewritten).
fn spoil_list_response(
    shared: Arc<Shared>,
    resp: Response<Body>,
    spoiled: Vec<Spoiled>,
) -> Response<Body> {
    let (parts, body) = resp.into_parts();
    let rewritten = async move {
        let bytes = match body.collect().await {
            Ok(c) => c.to_bytes(),
            Err(never) => match never {},
        };
        Ok::<_, Infallible>(Frame::data(spoil_list(&shared, &bytes, &spoiled)))
    };
    let body = StreamBody::new(futures::stream::once(rewritten)).boxed_unsync();
    Response::from_parts(parts, body)
}

/// A watch response whose events of objects spoiled at the time they go out
/// are rewritten, line by line (every chunk ends a line).
fn spoil_watch_response(
    shared: Arc<Shared>,
    resp: Response<Body>,
    resource: String,
) -> Response<Body> {
    let (parts, body) = resp.into_parts();
    let body = body
        .map_frame(move |frame| match frame.into_data() {
            Ok(data) => {
                let spoiled: Vec<Spoiled> = shared
                    .faults
                    .set
                    .lock()
                    .spoiled
                    .iter()
                    .filter(|s| s.resource == resource)
                    .cloned()
                    .collect();
                if spoiled.is_empty() {
                    Frame::data(data)
                } else {
                    Frame::data(spoil_lines(&shared, &data, &spoiled))
                }
            }
            Err(frame) => frame,
        })
        .boxed_unsync();
    Response::from_parts(parts, body)
}

/// A list body with its spoiled items replaced.
fn spoil_list(shared: &Shared, body: &Bytes, spoiled: &[Spoiled]) -> Bytes {
    let Ok(Value::Object(mut list)) = serde_json::from_slice::<Value>(body) else {
        return body.clone();
    };
    let items = match list.remove("items") {
        Some(Value::Array(items)) => items,
        _ => return body.clone(),
    };
    let texts: Vec<String> = items
        .iter()
        .map(|item| match spoiled.iter().find(|s| hits(s, item)) {
            Some(s) => {
                shared.faults.count();
                spoiled_text(item, &s.how)
            }
            None => item.to_string(),
        })
        .collect();
    // Put the items back as text: a malformed one cannot be a Value.
    let mut out = Value::Object(list).to_string();
    out.pop(); // the closing brace
    out.push_str(",\"items\":[");
    out.push_str(&texts.join(","));
    out.push_str("]}\n");
    Bytes::from(out)
}

/// Watch lines with the spoiled objects' events rewritten.
fn spoil_lines(shared: &Shared, data: &Bytes, spoiled: &[Spoiled]) -> Bytes {
    let mut out = Vec::with_capacity(data.len());
    for line in data.split_inclusive(|b| *b == b'\n') {
        let event = serde_json::from_slice::<Value>(line).ok();
        let hit = event
            .as_ref()
            .and_then(|ev| spoiled.iter().find(|s| hits(s, &ev["object"])));
        match (event.as_ref(), hit) {
            (Some(ev), Some(s)) => {
                shared.faults.count();
                let object = spoiled_text(&ev["object"], &s.how);
                let ty = ev["type"].as_str().unwrap_or("MODIFIED");
                out.extend_from_slice(
                    format!("{{\"type\":\"{ty}\",\"object\":{object}}}\n").as_bytes(),
                );
            }
            _ => out.extend_from_slice(line),
        }
    }
    Bytes::from(out)
}

fn hits(s: &Spoiled, object: &Value) -> bool {
    let meta = &object["metadata"];
    meta["name"].as_str() == Some(s.name.as_str())
        && meta["namespace"].as_str() == s.namespace.as_deref()
}

fn spoiled_text(object: &Value, how: &Corruption) -> String {
    match how {
        Corruption::Malformed => {
            let text = object.to_string();
            let mut cut = text.len() / 2;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            // Cut short and then a control character, invalid in and out of
            // a string: a syntax error, not merely an early end (which
            // kube-client drops from a watch unreported).
            format!("{}\u{1}", &text[..cut])
        }
        Corruption::Merge(patch) => {
            let mut object = object.clone();
            json_patch::merge(&mut object, patch);
            object.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spoiled_text_is_cut_or_merged() {
        let o = json!({"metadata":{"name":"a"},"subsets":[]});
        let cut = spoiled_text(&o, &Corruption::Malformed);
        assert!(serde_json::from_str::<Value>(&cut).is_err(), "{cut}");
        let merged = spoiled_text(&o, &Corruption::Merge(json!({"subsets": 5})));
        assert_eq!(
            serde_json::from_str::<Value>(&merged).unwrap()["subsets"],
            5
        );
    }
}
