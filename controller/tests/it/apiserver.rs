//! A scripted in-memory API server for the reconcilers, behind a real
//! `kube::Client` (no socket): server-side apply of Deployments,
//! StatefulSets, Services and grid status, label-selected lists, Events.
//!
//! It refuses what kube-apiserver 1.20 refuses in the cases the tests need,
//! with the same `Status` bodies (`422 Invalid` with `details.causes`,
//! worded as apps/v1 and core/v1 validation word them; a stored object over
//! etcd's 1.5 MiB is `500 etcdserver: request is too large`).
//! `sitegrid-fakeapi` serves neither Deployments nor server-side apply,
//! which is all the controller writes with.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response};
use kube::client::Body;
use parking_lot::Mutex;
use serde_json::{json, Value};

/// etcd's default `--max-request-bytes`: the largest object it stores.
pub const ETCD_MAX_OBJECT: usize = 1_572_864;

/// Objects by (plural, namespace, name), and the Events posted.
#[derive(Default)]
pub struct State {
    /// Every stored object.
    pub objects: BTreeMap<(String, String, String), Value>,
    /// Every Event created or patched, in order.
    pub events: Vec<Value>,
    /// Writes that reached the store (applies, status, events).
    pub writes: usize,
    /// Writes refused.
    pub refused: usize,
    rv: u64,
}

/// The server; clones share it.
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

impl FakeApi {
    /// A client talking to this server.
    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(req).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Stores `obj` (plural given, namespace from its metadata).
    pub fn put(&self, plural: &str, mut obj: Value) {
        let mut state = self.state.lock();
        state.rv += 1;
        let rv = state.rv.to_string();
        let meta = &mut obj["metadata"];
        meta["resourceVersion"] = json!(rv);
        let key = (
            plural.to_owned(),
            meta["namespace"].as_str().unwrap_or("default").to_owned(),
            meta["name"].as_str().unwrap_or_default().to_owned(),
        );
        state.objects.insert(key, obj);
    }

    /// The stored object.
    pub fn get(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let key = (plural.to_owned(), namespace.to_owned(), name.to_owned());
        self.state.lock().objects.get(&key).cloned()
    }

    /// The names of the stored objects of `plural` carrying `label=value`.
    pub fn names(&self, plural: &str, label: &str, value: &str) -> Vec<String> {
        self.state
            .lock()
            .objects
            .iter()
            .filter(|((p, _, _), obj)| p == plural && obj["metadata"]["labels"][label] == value)
            .map(|((_, _, name), _)| name.clone())
            .collect()
    }

    /// Sets `status` on every stored object of `plural`, as the workload
    /// controllers would once the pods run.
    pub fn set_status_all(&self, plural: &str, status: &Value) {
        for ((p, _, _), obj) in self.state.lock().objects.iter_mut() {
            if p == plural {
                obj["status"] = status.clone();
            }
        }
    }

    /// Reads the state.
    pub fn with<T>(&self, read: impl FnOnce(&State) -> T) -> T {
        read(&self.state.lock())
    }

    async fn handle(&self, req: Request<Body>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let query = parts.uri.query().unwrap_or_default().to_owned();
        if query
            .split('&')
            .any(|q| q == "watch=true" || q == "watch=1")
        {
            // Watches (the fleet's) stay open and quiet.
            futures::future::pending::<()>().await;
        }
        let body = body.collect_bytes().await.unwrap_or_default();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let path = Path::parse(parts.uri.path());
        let result = match parts.method.as_str() {
            "GET" if path.name.is_none() => Ok(self.list(&path, &query)),
            "GET" => self.get_one(&path),
            "PATCH" if path.plural == "events" => self.event(body),
            "POST" if path.plural == "events" => self.event(body),
            "PATCH" if path.status => self.apply_status(&path, body),
            "PATCH" => self.apply(&path, body),
            other => Err(status(405, "MethodNotAllowed", format!("{other} {path:?}"))),
        };
        let (code, body) = match result {
            Ok(obj) => (200, obj),
            Err(status) => (status["code"].as_u64().unwrap_or(500) as u16, status),
        };
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap()
    }

    fn list(&self, path: &Path, query: &str) -> Value {
        let selector = form_value(query, "labelSelector");
        let state = self.state.lock();
        let items: Vec<Value> = state
            .objects
            .iter()
            .filter(|((p, ns, _), _)| {
                *p == path.plural && path.namespace.as_ref().is_none_or(|n| n == ns)
            })
            .map(|(_, obj)| obj)
            .filter(|obj| selector.as_deref().is_none_or(|s| matches(obj, s)))
            .cloned()
            .collect();
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": state.rv.to_string()}, "items": items})
    }

    fn get_one(&self, path: &Path) -> Result<Value, Value> {
        let name = path.name.clone().unwrap_or_default();
        self.get(&path.plural, path.namespace.as_deref().unwrap_or(""), &name)
            .ok_or_else(|| not_found(&path.plural, &name))
    }

    fn event(&self, body: Value) -> Result<Value, Value> {
        let mut state = self.state.lock();
        state.writes += 1;
        state.events.push(body.clone());
        Ok(body)
    }

    fn apply(&self, path: &Path, mut body: Value) -> Result<Value, Value> {
        let name = path.name.clone().unwrap_or_default();
        let namespace = path.namespace.clone().unwrap_or_default();
        if let Err(invalid) = validate(&path.plural, &name, &body) {
            self.state.lock().refused += 1;
            return Err(invalid);
        }
        let mut state = self.state.lock();
        state.writes += 1;
        state.rv += 1;
        let key = (path.plural.clone(), namespace.clone(), name.clone());
        let old = state.objects.get(&key);
        let uid = old
            .and_then(|o| o["metadata"]["uid"].as_str())
            .map_or_else(|| format!("uid-{}", state.rv), str::to_owned);
        if let Some(old_status) = old.and_then(|o| o.get("status")).cloned() {
            body["status"] = old_status;
        }
        body["metadata"]["uid"] = json!(uid);
        body["metadata"]["namespace"] = json!(namespace);
        body["metadata"]["resourceVersion"] = json!(state.rv.to_string());
        state.objects.insert(key, body.clone());
        Ok(body)
    }

    fn apply_status(&self, path: &Path, body: Value) -> Result<Value, Value> {
        let name = path.name.clone().unwrap_or_default();
        let key = (
            path.plural.clone(),
            path.namespace.clone().unwrap_or_default(),
            name.clone(),
        );
        let mut state = self.state.lock();
        let Some(mut obj) = state.objects.get(&key).cloned() else {
            return Err(not_found(&path.plural, &name));
        };
        obj["status"] = body["status"].clone();
        if obj.to_string().len() > ETCD_MAX_OBJECT {
            state.refused += 1;
            return Err(status(500, "", "etcdserver: request is too large".into()));
        }
        state.writes += 1;
        state.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(state.rv.to_string());
        state.objects.insert(key, obj.clone());
        Ok(obj)
    }
}

/// A request path: `/api/v1/namespaces/ns/services/x`,
/// `/apis/apps/v1/namespaces/ns/deployments/x`, `…/x/status`, `…/nodes`.
#[derive(Debug)]
struct Path {
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    status: bool,
}

impl Path {
    fn parse(path: &str) -> Self {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let rest = if parts.first() == Some(&"api") {
            &parts[2..]
        } else {
            &parts[3..]
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
            _ => (None, rest),
        };
        Path {
            namespace,
            plural: rest.first().copied().unwrap_or_default().to_owned(),
            name: rest.get(1).map(|s| (*s).to_owned()),
            status: rest.get(2) == Some(&"status"),
        }
    }
}

fn form_value(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `k=v` and `k` (exists) terms, comma-separated.
fn matches(obj: &Value, selector: &str) -> bool {
    let labels = &obj["metadata"]["labels"];
    selector.split(',').all(|term| match term.split_once('=') {
        Some((k, v)) => labels[k] == v,
        None => labels.get(term).is_some(),
    })
}

fn status(code: u16, reason: &str, message: String) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code});
    if !reason.is_empty() {
        s["reason"] = json!(reason);
    }
    s
}

fn not_found(plural: &str, name: &str) -> Value {
    let mut s = status(404, "NotFound", format!("{plural} \"{name}\" not found"));
    s["details"] = json!({"name": name, "kind": plural});
    s
}

/// The 422 kube-apiserver sends for `causes` (field, message) on `kind` `name`.
fn invalid(kind: &str, group: &str, name: &str, causes: &[(String, String)]) -> Value {
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    let listed: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    let what = match listed.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let mut s = status(
        422,
        "Invalid",
        format!("{qualified} \"{name}\" is invalid: {what}"),
    );
    s["details"] = json!({
        "name": name, "group": group, "kind": kind,
        "causes": causes.iter().map(|(f, m)| json!({"reason": "FieldValueInvalid", "message": m, "field": f})).collect::<Vec<_>>(),
    });
    s
}

const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns1123_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || c == '-')
}

fn is_label_value(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.is_empty()
        || (s.len() <= 63
            && s.starts_with(alnum)
            && s.ends_with(alnum)
            && s.chars().all(|c| alnum(c) || "-_.".contains(c)))
}

/// The subset of apps/v1 and core/v1 validation the tests exercise.
fn validate(plural: &str, name: &str, obj: &Value) -> Result<(), Value> {
    let mut causes = Vec::new();
    let mut cause = |field: &str, message: String| causes.push((field.to_owned(), message));
    let name_limit = if plural == "deployments" { 253 } else { 63 };
    if name.len() > name_limit {
        cause(
            "metadata.name",
            format!("Invalid value: {name:?}: must be no more than {name_limit} characters"),
        );
    }
    if let Some(labels) = obj["metadata"]["labels"].as_object() {
        for (key, value) in labels {
            let value = value.as_str().unwrap_or_default();
            if !is_label_value(value) {
                cause(
                    "metadata.labels",
                    format!("Invalid value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?') (label {key})"),
                );
            }
        }
    }
    let (kind, group) = match plural {
        "deployments" => ("Deployment", "apps"),
        "statefulsets" => ("StatefulSet", "apps"),
        _ => ("Service", ""),
    };
    if group == "apps" {
        if let Some(replicas) = obj["spec"]["replicas"].as_i64().filter(|r| *r < 0) {
            cause(
                "spec.replicas",
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            );
        }
        let containers = obj["spec"]["template"]["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, container) in containers.iter().enumerate() {
            let cname = container["name"].as_str().unwrap_or_default();
            if !is_dns1123_label(cname) {
                cause(
                    &format!("spec.template.spec.containers[{i}].name"),
                    format!("Invalid value: {cname:?}: {DNS1123_LABEL}"),
                );
            }
        }
    } else {
        let ports = obj["spec"]["ports"].as_array().cloned().unwrap_or_default();
        for (i, port) in ports.iter().enumerate() {
            let number = port["port"].as_i64().unwrap_or(0);
            if !(1..=65535).contains(&number) {
                cause(
                    &format!("spec.ports[{i}].port"),
                    format!("Invalid value: {number}: must be between 1 and 65535, inclusive"),
                );
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(kind, group, name, &causes))
    }
}
