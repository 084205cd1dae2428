//! Create, update, patch and delete with kube-apiserver's rules: name and
//! namespace checks, uid and creationTimestamp, optimistic concurrency on
//! resourceVersion, no-op updates that write nothing, and `/status`.

use std::sync::Arc;

use serde_json::{Map, Value};
use sitegrid_apimachinery::status::{StatusCause, StatusDetails};
use sitegrid_apimachinery::Status;

use super::object::{canonicalize, meta_mut, meta_str, name_suffix, new_uid, now_rfc3339, Obj};
use super::patch::{self, PatchKind};
use super::resource::{split_api_version, ResourceType, DISCOVERY_GROUP};
use super::store::{key_of, EventType, Store, Txn};

/// How an update treats the stored object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpdateMode {
    /// PUT/PATCH on the object: a stale resourceVersion conflicts; `status` is
    /// kept from the stored object when the type has a status subresource.
    Main,
    /// PUT/PATCH on `/status`: only `status` changes.
    Status,
    /// In-process `apply`: replace everything, no precondition.
    Force,
}

/// `services "x"` or `endpointslices.discovery.k8s.io "x"`.
fn qualified(rt: &ResourceType, name: &str) -> String {
    if rt.group.is_empty() {
        format!("{} \"{name}\"", rt.plural)
    } else {
        format!("{}.{} \"{name}\"", rt.plural, rt.group)
    }
}

fn with_details(mut s: Status, rt: &ResourceType, name: &str) -> Status {
    s.details = Some(StatusDetails {
        name: name.into(),
        group: rt.group.into(),
        kind: rt.plural.into(),
        ..Default::default()
    });
    s
}

/// `409 AlreadyExists`.
fn already_exists(rt: &ResourceType, name: &str) -> Status {
    let s = Status::failure(
        409,
        Some("AlreadyExists"),
        format!("{} already exists", qualified(rt, name)),
    );
    with_details(s, rt, name)
}

/// `409 Conflict` for a stale resourceVersion.
fn conflict(rt: &ResourceType, name: &str) -> Status {
    let msg = format!(
        "Operation cannot be fulfilled on {}: the object has been modified; please apply your changes to the latest version and try again",
        qualified(rt, name)
    );
    with_details(Status::failure(409, Some("Conflict"), msg), rt, name)
}

/// `404 NotFound` for a named object.
pub(crate) fn not_found(rt: &ResourceType, name: &str) -> Status {
    Status::not_found(rt.plural, rt.group, name)
}

/// `422 Invalid` for one field, worded like kube-apiserver.
fn invalid(rt: &ResourceType, name: &str, field: &str, message: &str) -> Status {
    let mut s = Status::invalid(
        rt.kind,
        rt.group,
        name,
        vec![StatusCause {
            reason: "FieldValueRequired".into(),
            message: message.into(),
            field: field.into(),
        }],
    );
    if rt.group.is_empty() {
        s.message = format!("{} \"{name}\" is invalid: {field}: {message}", rt.kind);
    }
    s
}

/// Check the body's kind and apiVersion against `rt`, strip them, convert
/// EndpointSlices to the served version, and check the namespace.
fn prepare(rt: &ResourceType, namespace: &str, body: Value) -> Result<Map<String, Value>, Status> {
    let Value::Object(mut body) = body else {
        return Err(Status::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let api_version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(&rt.api_version)
        .to_owned();
    let kind = body
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(rt.kind)
        .to_owned();
    let (group, version) = split_api_version(&api_version);
    let convertible = rt.group == DISCOVERY_GROUP && (version == "v1" || version == "v1beta1");
    if kind != rt.kind || group != rt.group || (version != rt.version && !convertible) {
        return Err(Status::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}",
            rt.kind
        )));
    }
    if rt.group == DISCOVERY_GROUP && version != rt.version {
        let mut v = Value::Object(body);
        if rt.version == "v1" {
            sitegrid_apimachinery::endpointslice::v1beta1_to_v1(&mut v);
        } else {
            sitegrid_apimachinery::endpointslice::v1_to_v1beta1(&mut v);
        }
        let Value::Object(converted) = v else {
            return Err(Status::internal_error(
                "EndpointSlice conversion lost the object",
            ));
        };
        body = converted;
    }
    let mut body = canonicalize(body);
    let meta = meta_mut(&mut body);
    if rt.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != namespace => {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => {}
        }
        meta.insert("namespace".into(), Value::String(namespace.into()));
        body = canonicalize(body);
    } else {
        meta.shift_remove("namespace");
    }
    Ok(body)
}

/// The body without metadata and status, for "did the spec change".
fn spec_of(body: &Map<String, Value>) -> Map<String, Value> {
    body.iter()
        .filter(|(k, _)| *k != "metadata" && *k != "status")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl Store {
    /// POST: create `body` in `namespace` (empty for cluster-scoped types).
    /// The uid is always generated, as kube-apiserver does, unless `keep_uid`
    /// (in-process `apply`, so sample data can carry matching ownerReferences).
    pub fn create(
        &self,
        rt: &ResourceType,
        namespace: &str,
        body: Value,
        keep_uid: bool,
    ) -> Result<Arc<Obj>, Status> {
        let mut body = prepare(rt, namespace, body)?;
        let given_uid = meta_str(&body, "uid")
            .filter(|u| keep_uid && !u.is_empty())
            .map(str::to_owned);
        let mut name = meta_str(&body, "name").unwrap_or("").to_owned();
        if name.is_empty() {
            let generate = meta_str(&body, "generateName").unwrap_or("").to_owned();
            if generate.is_empty() {
                return Err(invalid(
                    rt,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{generate}{}", name_suffix());
        }
        self.write(|txn| {
            let key = key_of(rt, namespace, &name);
            if txn.current(rt, &key).is_some() {
                return Err(already_exists(rt, &name));
            }
            let meta = meta_mut(&mut body);
            meta.insert("name".into(), Value::String(name.clone()));
            meta.insert(
                "uid".into(),
                Value::String(given_uid.unwrap_or_else(new_uid)),
            );
            // Placeholder so `canonicalize` puts it in place; `commit` sets it.
            meta.insert("resourceVersion".into(), Value::String(String::new()));
            meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
            if rt.group == DISCOVERY_GROUP {
                meta.insert("generation".into(), Value::from(1));
            }
            let body = canonicalize(body);
            Ok(txn.commit(rt, EventType::Added, namespace, &name, body, None))
        })
    }

    /// PUT: replace `name` with `body`.
    pub fn update(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        mode: UpdateMode,
    ) -> Result<Arc<Obj>, Status> {
        let body = prepare(rt, namespace, body)?;
        self.write(|txn| replace(txn, rt, namespace, name, body, mode))
    }

    /// PATCH `name` with a merge or JSON patch, atomically.
    pub fn patch(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        patch: &Value,
        mode: UpdateMode,
    ) -> Result<Arc<Obj>, Status> {
        self.write(|txn| {
            let current = txn
                .current(rt, &key_of(rt, namespace, name))
                .ok_or_else(|| not_found(rt, name))?;
            let patched = patch::apply(kind, current.to_typed_value(rt), patch)?;
            let body = prepare(rt, namespace, patched)?;
            replace(txn, rt, namespace, name, body, mode)
        })
    }

    /// DELETE: remove `name`; returns its last state.
    pub fn delete(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Obj>, Status> {
        self.write(|txn| {
            let key = key_of(rt, namespace, name);
            let prev = txn.current(rt, &key).ok_or_else(|| not_found(rt, name))?;
            txn.commit(
                rt,
                EventType::Deleted,
                namespace,
                name,
                prev.body.clone(),
                Some(Arc::clone(&prev)),
            );
            Ok(prev)
        })
    }

    /// In-process apply: create, or replace whatever is stored. Returns the
    /// object's type with the stored object.
    pub fn apply(&self, body: Value) -> Result<(ResourceType, Arc<Obj>), Status> {
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
        let rt = self
            .resources
            .by_kind(api_version, kind)
            .ok_or_else(|| {
                Status::bad_request(format!("no resource serves {kind} in {api_version:?}"))
            })?
            .clone();
        let name = body
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let namespace = if rt.namespaced {
            match body.pointer("/metadata/namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() => ns.to_owned(),
                _ => "default".to_owned(),
            }
        } else {
            String::new()
        };
        let exists = !name.is_empty() && self.get(&rt, &key_of(&rt, &namespace, &name)).is_some();
        let obj = if exists {
            self.update(&rt, &namespace, &name, body, UpdateMode::Force)?
        } else {
            self.create(&rt, &namespace, body, true)?
        };
        Ok((rt, obj))
    }
}

/// Replace the stored `name` by `body` (already prepared) under `mode`.
fn replace(
    txn: &mut Txn<'_>,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    mut body: Map<String, Value>,
    mode: UpdateMode,
) -> Result<Arc<Obj>, Status> {
    match meta_str(&body, "name") {
        Some(n) if !n.is_empty() && n != name => {
            return Err(Status::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )))
        }
        _ => {}
    }
    let key = key_of(rt, namespace, name);
    let current = txn.current(rt, &key).ok_or_else(|| not_found(rt, name))?;
    let sent_rv = meta_str(&body, "resourceVersion").unwrap_or("");
    if mode != UpdateMode::Force && !sent_rv.is_empty() && sent_rv != current.rv.to_string() {
        return Err(conflict(rt, name));
    }
    match mode {
        UpdateMode::Status => {
            let status = body.shift_remove("status");
            body = current.body.clone();
            match status {
                Some(s) => body.insert("status".into(), s),
                None => body.shift_remove("status"),
            };
        }
        UpdateMode::Main if rt.has_status => {
            match current.body.get("status") {
                Some(s) => body.insert("status".into(), s.clone()),
                None => body.shift_remove("status"),
            };
        }
        UpdateMode::Main | UpdateMode::Force => {}
    }
    let meta = meta_mut(&mut body);
    meta.insert("name".into(), Value::String(name.into()));
    for field in ["uid", "creationTimestamp"] {
        match current.body.get("metadata").and_then(|m| m.get(field)) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.shift_remove(field),
        };
    }
    meta.insert(
        "resourceVersion".into(),
        Value::String(current.rv.to_string()),
    );
    let generation = current
        .body
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64);
    if let Some(g) = generation {
        meta.insert("generation".into(), Value::from(g));
    }
    let mut body = canonicalize(body);
    if body == current.body {
        // Like kube-apiserver: an update that changes nothing writes nothing.
        return Ok(current);
    }
    if let Some(g) = generation.filter(|_| spec_of(&body) != spec_of(&current.body)) {
        meta_mut(&mut body).insert("generation".into(), Value::from(g + 1));
    }
    Ok(txn.commit(
        rt,
        EventType::Modified,
        namespace,
        name,
        body,
        Some(current),
    ))
}
