//! HTTP dispatch: route the request, run the one generic handler for its
//! verb, and turn every error into a `Status` with its HTTP code. GETs are
//! answered as plain JSON or, when the Accept header asks (kubectl), as a
//! Table (`super::table`).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, CACHE_CONTROL, CONTENT_TYPE, HOST};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use serde_json::Value;
use sitegrid_apimachinery::Status;

use super::discovery;
use super::filter::Filter;
use super::list;
use super::object::Obj;
use super::patch::PatchKind;
use super::query::ListOptions;
use super::resource::ResourceType;
use super::routing::{route, Route};
use super::table::TableRequest;
use super::watch;
use super::write::{not_found, UpdateMode};
use super::{Body, RequestRecord, Shared};

/// Largest request body accepted, as kube-apiserver's 3 MiB limit.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Serve one request. Never fails: errors become Status responses.
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
) -> Result<Response<Body>, Infallible>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    shared.requests.lock().push(RequestRecord {
        method: req.method().to_string(),
        path: req.uri().path().to_owned(),
        query: req.uri().query().unwrap_or("").to_owned(),
        credentials: req
            .headers()
            .iter()
            .filter(|(k, _)| {
                *k == http::header::AUTHORIZATION || k.as_str().starts_with("impersonate-")
            })
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
    });
    Ok(match dispatch(&shared, req).await {
        Ok(resp) => resp,
        Err(status) => status_response(&status),
    })
}

/// A JSON response with kube-apiserver's headers.
fn json_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = code;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    resp
}

/// The response for a Status error.
pub(crate) fn status_response(status: &Status) -> Response<Body> {
    let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, Bytes::from(status.to_json()))
}

fn value_response(code: StatusCode, v: &Value) -> Response<Body> {
    // Serializing a Value cannot fail.
    let mut body = serde_json::to_vec(v).unwrap_or_default();
    body.push(b'\n');
    json_response(code, Bytes::from(body))
}

fn object_response(code: StatusCode, rt: &ResourceType, obj: &Obj) -> Response<Body> {
    let mut out = Vec::with_capacity(obj.json.len() + 64);
    obj.encode_typed(rt, &mut out);
    out.push(b'\n');
    json_response(code, Bytes::from(out))
}

fn not_allowed() -> Status {
    Status::method_not_allowed("the server does not allow this method on the requested resource")
}

async fn dispatch<B>(shared: &Arc<Shared>, req: Request<B>) -> Result<Response<Body>, Status>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let resources = &shared.store.resources;
    let route = route(resources, req.uri().path());
    let query = req.uri().query().unwrap_or("").to_owned();
    let method = req.method().clone();
    let get = method == Method::GET || method == Method::HEAD;
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    match route {
        Route::Root if get => Ok(value_response(StatusCode::OK, &discovery::root(resources))),
        Route::Version if get => Ok(value_response(StatusCode::OK, &discovery::version())),
        Route::Health if get => {
            let mut resp = json_response(StatusCode::OK, Bytes::from_static(b"ok"));
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Ok(resp)
        }
        Route::CoreVersions if get => {
            let host = req
                .headers()
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1:6443");
            Ok(value_response(
                StatusCode::OK,
                &discovery::core_versions(host),
            ))
        }
        Route::Groups if get => Ok(value_response(
            StatusCode::OK,
            &discovery::groups(resources),
        )),
        Route::Group(g) if get => discovery::group(resources, &g)
            .map(|v| value_response(StatusCode::OK, &v))
            .ok_or_else(Status::not_found_resource),
        Route::Resources { group, version } if get => {
            discovery::resource_list(resources, &group, &version)
                .map(|v| value_response(StatusCode::OK, &v))
                .ok_or_else(Status::not_found_resource)
        }
        Route::Collection {
            rt,
            namespace,
            watch,
        } => {
            let rt = resource(shared, rt)?;
            match method {
                Method::GET => {
                    let namespace = namespace.as_deref();
                    collection_get(shared, &rt, namespace, &query, watch, accept.as_deref())
                }
                Method::POST if !watch => {
                    let Some(ns) = namespace.as_deref().or((!rt.namespaced).then_some("")) else {
                        return Err(not_allowed());
                    };
                    let body = read_json(req).await?;
                    let obj = shared.store.create(&rt, ns, body, false)?;
                    Ok(object_response(StatusCode::CREATED, &rt, &obj))
                }
                _ => Err(not_allowed()),
            }
        }
        Route::Object {
            rt,
            namespace,
            name,
            status,
            watch,
        } => {
            let rt = resource(shared, rt)?;
            let ns = namespace.unwrap_or_default();
            let mode = if status {
                UpdateMode::Status
            } else {
                UpdateMode::Main
            };
            let store = &shared.store;
            match method {
                Method::GET if watch || ListOptions::parse(&query)?.watch => {
                    let mut opts = ListOptions::parse(&query)?;
                    opts.watch = true;
                    let by_name = format!("metadata.name={name}");
                    opts.field_selector = if opts.field_selector.is_empty() {
                        by_name
                    } else {
                        format!("{},{by_name}", opts.field_selector)
                    };
                    let namespace = rt.namespaced.then_some(ns.as_str());
                    watch_or_list(shared, &rt, namespace, &opts, None)
                }
                Method::GET => {
                    let obj = store
                        .get(&rt, &super::store::key_of(&rt, &ns, &name))
                        .ok_or_else(|| not_found(&rt, &name))?;
                    let table = TableRequest::negotiate(&rt, accept.as_deref(), &query)?;
                    Ok(match table {
                        Some(table) => json_response(StatusCode::OK, table.object(&rt, &obj)),
                        None => object_response(StatusCode::OK, &rt, &obj),
                    })
                }
                Method::PUT => {
                    let body = read_json(req).await?;
                    let obj = store.update(&rt, &ns, &name, body, mode)?;
                    Ok(object_response(StatusCode::OK, &rt, &obj))
                }
                Method::PATCH => {
                    let ct = req
                        .headers()
                        .get(CONTENT_TYPE)
                        .and_then(|h| h.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    let kind = PatchKind::from_content_type(&ct)?;
                    let patch = read_json(req).await?;
                    let obj = store.patch(&rt, &ns, &name, kind, &patch, mode)?;
                    Ok(object_response(StatusCode::OK, &rt, &obj))
                }
                Method::DELETE if !status => {
                    let obj = store.delete(&rt, &ns, &name)?;
                    Ok(object_response(StatusCode::OK, &rt, &obj))
                }
                _ => Err(not_allowed()),
            }
        }
        Route::NotFound => Err(Status::not_found_resource()),
        _ => Err(not_allowed()),
    }
}

fn resource(shared: &Shared, idx: usize) -> Result<ResourceType, Status> {
    shared
        .store
        .resources
        .iter()
        .nth(idx)
        .cloned()
        .ok_or_else(Status::not_found_resource)
}

/// GET on a collection: WATCH with `watch=true` or the `/watch/` prefix,
/// else LIST, as a Table when `accept` asks for one.
fn collection_get(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    namespace: Option<&str>,
    query: &str,
    watch_prefix: bool,
    accept: Option<&str>,
) -> Result<Response<Body>, Status> {
    let mut opts = ListOptions::parse(query)?;
    opts.watch |= watch_prefix;
    // Watches stay JSON.
    let table = if opts.watch {
        None
    } else {
        TableRequest::negotiate(rt, accept, query)?
    };
    watch_or_list(shared, rt, namespace, &opts, table)
}

/// A WATCH, or a LIST encoded as `table` says (plain JSON for `None`).
fn watch_or_list(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    namespace: Option<&str>,
    opts: &ListOptions,
    table: Option<TableRequest>,
) -> Result<Response<Body>, Status> {
    let filter = Filter::new(rt, namespace, &opts.label_selector, &opts.field_selector)?;
    if opts.watch {
        let body = watch::watch(shared, rt, filter, opts)?;
        let mut resp = Response::new(body);
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
        return Ok(resp);
    }
    let page = list::list(&shared.store, rt, &filter, opts)?;
    let body = match table {
        Some(table) => table.list(rt, &page),
        None => page.to_json(rt),
    };
    Ok(json_response(StatusCode::OK, body))
}

/// Read a JSON request body of at most [`MAX_BODY`] bytes. Other media types
/// (kubectl sends protobuf for built-in types) get `415`, on which client-go
/// retries the request as JSON.
async fn read_json<B>(req: Request<B>) -> Result<Value, Status>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let media = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if !(media.is_empty() || media == "application/json" || media.ends_with("+json")) {
        return Err(Status::failure(
            415,
            Some("UnsupportedMediaType"),
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json (got {media:?})"
            ),
        ));
    }
    let collected = Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Status::request_entity_too_large(format!(
                    "Request entity too large: limit is {MAX_BODY}"
                ))
            } else {
                Status::bad_request(format!("error reading the request body: {e}"))
            }
        })?;
    let bytes = collected.to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| {
        Status::bad_request(format!(
            "the body of the request could not be decoded as JSON: {e}"
        ))
    })
}
