//! HTTP dispatch: route the request, run the one generic handler for its
//! verb, and turn every error into a `Status` with its HTTP code. Reads are
//! answered in the representation the Accept header negotiates
//! (`super::negotiate`): the objects, a Table (`super::table`, kubectl) or
//! their metadata only (`super::metadata`). Every read of a resource is
//! tagged for egress accounting (`super::egress`).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, ACCEPT, CACHE_CONTROL, CONTENT_TYPE, HOST};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use serde_json::Value;
use sitegrid_apimachinery::negotiate::negotiate_status;
use sitegrid_apimachinery::protobuf;
use sitegrid_apimachinery::Status;

use super::discovery;
use super::egress::{Tag, Verb};
use super::filter::Filter;
use super::list;
use super::metadata;
use super::negotiate::{produced, Form};
use super::object::Obj;
use super::patch::PatchKind;
use super::query::ListOptions;
use super::resource::ResourceType;
use super::routing::{route, Route};
use super::table::TableRequest;
use super::watch::{self, Objects};
use super::write::{not_found, UpdateMode};
use super::{Body, RequestRecord, Shared};
use sitegrid_apimachinery::negotiate::Format;

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
        client: req
            .extensions()
            .get::<super::ClientUser>()
            .map(|c| c.0.clone()),
    });
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned);
    let errors = Errors::for_accept(accept.as_deref());
    Ok(
        match dispatch(&shared, req, accept.as_deref(), errors).await {
            Ok(resp) => resp,
            Err(status) => errors.response(&status),
        },
    )
}

/// How this request's error Statuses are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Errors {
    /// Compact JSON, as every answer.
    Compact,
    /// 2-space indented JSON: the Accept header offers no plain media type
    /// (only `as=Table` or `as=PartialObjectMetadata[List]`), so kube-apiserver
    /// falls back to its indented writer (reference §0, §9).
    Indented,
}

impl Errors {
    fn for_accept(accept: Option<&str>) -> Errors {
        match negotiate_status(accept) {
            Some(_) => Errors::Compact,
            None => Errors::Indented,
        }
    }

    /// The response for `status`.
    fn response(self, status: &Status) -> Response<Body> {
        let code = StatusCode::from_u16(status.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = match self {
            Errors::Compact => status.to_json(),
            Errors::Indented => status.to_json_fallback(),
        };
        json_response(code, Bytes::from(body))
    }

    /// `result`, or the response for its error.
    fn or_status(self, result: Result<Response<Body>, Status>) -> Response<Body> {
        result.unwrap_or_else(|status| self.response(&status))
    }
}

/// A response of media type `content_type` with kube-apiserver's headers.
fn typed_response(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut resp = json_response(code, body);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
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

fn value_response(code: StatusCode, v: &Value) -> Response<Body> {
    // Serializing a Value cannot fail.
    let mut body = serde_json::to_vec(v).unwrap_or_default();
    body.push(b'\n');
    json_response(code, Bytes::from(body))
}

/// The answer to a write or GET of `obj`: the object, or its metadata when
/// `as=PartialObjectMetadata` was negotiated (kube-rs' `patch_metadata`).
fn object_response(
    code: StatusCode,
    rt: &ResourceType,
    obj: &Obj,
    output: Format,
) -> Result<Response<Body>, Status> {
    match output {
        Format::Metadata { list: false } => Ok(json_response(code, metadata::object(obj))),
        Format::Metadata { list: true } => Err(metadata::not_acceptable(rt, true)),
        Format::Protobuf => match rt.protobuf_kind() {
            Some(kind) => Ok(typed_response(
                code,
                protobuf::MEDIA_TYPE,
                obj.envelope(rt, kind)?,
            )),
            None => object_response(code, rt, obj, Format::Json),
        },
        // Only GETs are answered with Tables (`get`); writes send the object.
        Format::Json | Format::Table { .. } => {
            let mut out = Vec::with_capacity(obj.json.len() + 64);
            obj.encode_typed(rt, &mut out);
            out.push(b'\n');
            Ok(json_response(code, Bytes::from(out)))
        }
    }
}

fn not_allowed() -> Status {
    Status::method_not_allowed("the server does not allow this method on the requested resource")
}

async fn dispatch<B>(
    shared: &Arc<Shared>,
    req: Request<B>,
    accept: Option<&str>,
    errors: Errors,
) -> Result<Response<Body>, Status>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let resources = &shared.store.resources;
    let route = route(resources, req.uri().path());
    let query = req.uri().query().unwrap_or("").to_owned();
    let method = req.method().clone();
    let get = method == Method::GET || method == Method::HEAD;
    match route {
        Route::Root if get => Ok(value_response(StatusCode::OK, &discovery::root(resources))),
        Route::Version if get => Ok(value_response(
            StatusCode::OK,
            &discovery::version(shared.profile.version),
        )),
        Route::Health if get => {
            let mut resp = json_response(StatusCode::OK, Bytes::from_static(b"ok"));
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Ok(resp)
        }
        Route::DebugEgress if get => {
            let egress = shared.egress.snapshot(resources);
            // Serializing a struct of maps and integers cannot fail.
            let mut body = serde_json::to_vec(&egress).unwrap_or_default();
            body.push(b'\n');
            Ok(Tag::Uncounted.attach(json_response(StatusCode::OK, Bytes::from(body))))
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
            let output = produced(&rt, accept);
            match method {
                Method::GET => {
                    let read = Read {
                        rt: &rt,
                        namespace: namespace.as_deref(),
                        query: &query,
                        output,
                    };
                    Ok(read.collection(shared, watch, errors))
                }
                Method::POST if !watch => {
                    let Some(ns) = namespace.as_deref().or((!rt.namespaced).then_some("")) else {
                        return Err(not_allowed());
                    };
                    let body = read_json(req).await?;
                    let obj = shared.store.create(&rt, ns, body, false)?;
                    object_response(StatusCode::CREATED, &rt, &obj, output)
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
            let output = produced(&rt, accept);
            let ns = namespace.unwrap_or_default();
            let mode = if status {
                UpdateMode::Status
            } else {
                UpdateMode::Main
            };
            let store = &shared.store;
            match method {
                Method::GET => {
                    let read = Read {
                        rt: &rt,
                        namespace: rt.namespaced.then_some(ns.as_str()),
                        query: &query,
                        output,
                    };
                    Ok(read.object(shared, &name, watch, errors))
                }
                Method::PUT => {
                    let body = read_json(req).await?;
                    let obj = store.update(&rt, &ns, &name, body, mode)?;
                    object_response(StatusCode::OK, &rt, &obj, output)
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
                    object_response(StatusCode::OK, &rt, &obj, output)
                }
                Method::DELETE if !status => {
                    let obj = store.delete(&rt, &ns, &name)?;
                    object_response(StatusCode::OK, &rt, &obj, output)
                }
                _ => Err(not_allowed()),
            }
        }
        Route::Token { namespace, name } if method == Method::POST => {
            let request = read_json(req).await?;
            super::token::issue(shared, &namespace, &name, request)
                .map(|v| value_response(StatusCode::CREATED, &v))
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

/// A GET of a resource: a LIST, a WATCH or one object, answered in `output`.
struct Read<'a> {
    rt: &'a ResourceType,
    /// The namespace of a namespaced request.
    namespace: Option<&'a str>,
    /// The raw query.
    query: &'a str,
    /// The negotiated representation.
    output: Format,
}

impl Read<'_> {
    /// GET on a collection: WATCH with `watch=true` or the `/watch/` prefix,
    /// else LIST. The response is tagged for egress, errors included.
    fn collection(
        &self,
        shared: &Arc<Shared>,
        watch_prefix: bool,
        errors: Errors,
    ) -> Response<Body> {
        self.many(
            shared,
            ListOptions::parse(self.query),
            watch_prefix,
            None,
            errors,
        )
    }

    /// GET on an object: the object, or a watch of it (`watch=true` or the
    /// `/watch/` prefix). Tagged for egress, errors included.
    fn object(
        &self,
        shared: &Arc<Shared>,
        name: &str,
        watch_prefix: bool,
        errors: Errors,
    ) -> Response<Body> {
        let opts = ListOptions::parse(self.query);
        if watch_prefix || opts.as_ref().is_ok_and(|o| o.watch) {
            return self.many(shared, opts, true, Some(name), errors);
        }
        let tag = Tag::Read {
            resource: self.rt.idx,
            form: Form::of(self.output),
            verb: Verb::Get,
        };
        let result = opts.and_then(|_| self.get(shared, name));
        tag.attach(errors.or_status(result))
    }

    /// A LIST or WATCH of the collection (`watch`), or a watch of one object
    /// (`name`), tagged for egress.
    fn many(
        &self,
        shared: &Arc<Shared>,
        opts: Result<ListOptions, Status>,
        watch: bool,
        name: Option<&str>,
        errors: Errors,
    ) -> Response<Body> {
        let watch = watch || opts.as_ref().is_ok_and(|o| o.watch);
        let tag = Tag::Read {
            resource: self.rt.idx,
            form: Form::of(self.output),
            verb: if watch { Verb::Watch } else { Verb::List },
        };
        let result = opts.and_then(|mut opts| {
            opts.watch = watch;
            if let Some(name) = name {
                let by_name = format!("metadata.name={name}");
                opts.field_selector = if opts.field_selector.is_empty() {
                    by_name
                } else {
                    format!("{},{by_name}", opts.field_selector)
                };
            }
            self.watch_or_list(shared, &opts)
        });
        tag.attach(errors.or_status(result))
    }

    /// The object `name` in `self.output`.
    fn get(&self, shared: &Arc<Shared>, name: &str) -> Result<Response<Body>, Status> {
        let rt = self.rt;
        let key = super::store::key_of(rt, self.namespace.unwrap_or(""), name);
        let obj = shared
            .store
            .get(rt, &key)
            .ok_or_else(|| not_found(rt, name))?;
        match self.output {
            Format::Table { api_version, .. } => Ok(json_response(
                StatusCode::OK,
                TableRequest::new(api_version, self.query)?.object(rt, &obj),
            )),
            output => object_response(StatusCode::OK, rt, &obj, output),
        }
    }

    /// A WATCH, or a LIST page in `self.output`.
    fn watch_or_list(
        &self,
        shared: &Arc<Shared>,
        opts: &ListOptions,
    ) -> Result<Response<Body>, Status> {
        let rt = self.rt;
        let opts = &opts.for_release(shared.profile)?;
        let filter = Filter::new(
            rt,
            self.namespace,
            &opts.label_selector,
            &opts.field_selector,
        )?;
        if opts.watch {
            let body = match watch_objects(rt, self.output, self.query)? {
                Some(objects) => watch::watch(shared, rt, filter, objects, opts)?,
                // kube-apiserver fails to encode an object as a list: the
                // watch ends before its first event.
                None => Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            };
            let content_type = match self.output {
                Format::Protobuf => protobuf::WATCH_MEDIA_TYPE,
                _ => "application/json",
            };
            let mut resp = Response::new(body);
            let h = resp.headers_mut();
            h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
            h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
            return Ok(resp);
        }
        let page = list::list(&shared.store, rt, &filter, opts)?;
        let body = match (self.output, rt.protobuf_kind()) {
            (Format::Protobuf, Some(kind)) => {
                return Ok(typed_response(
                    StatusCode::OK,
                    protobuf::MEDIA_TYPE,
                    page.to_protobuf(rt, kind)?,
                ));
            }
            (Format::Json | Format::Protobuf, _) => page.to_json(rt),
            (Format::Table { api_version, .. }, _) => {
                TableRequest::new(api_version, self.query)?.list(rt, &page)
            }
            (Format::Metadata { list: true }, _) => metadata::list(&page),
            (Format::Metadata { list: false }, _) => {
                return Err(metadata::not_acceptable(rt, false))
            }
        };
        Ok(json_response(StatusCode::OK, body))
    }
}

/// How a watch sends objects for `output`; `None` for `as=PartialObjectMetadataList`,
/// which kube-apiserver cannot apply to an event's object. A Table watch
/// sends one Table per event.
fn watch_objects(
    rt: &ResourceType,
    output: Format,
    query: &str,
) -> Result<Option<Objects>, Status> {
    Ok(match (output, rt.protobuf_kind()) {
        (Format::Protobuf, Some(kind)) => Some(Objects::Protobuf(kind)),
        (Format::Json | Format::Protobuf, _) => Some(Objects::Full),
        (Format::Table { api_version, .. }, _) => {
            Some(Objects::table(TableRequest::new(api_version, query)?))
        }
        (Format::Metadata { list: false }, _) => Some(Objects::Metadata),
        (Format::Metadata { list: true }, _) => None,
    })
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
