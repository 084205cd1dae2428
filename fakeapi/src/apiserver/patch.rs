//! PATCH bodies: JSON merge patch (RFC 7386, also used for strategic merge
//! patch) and JSON patch (RFC 6902).

use serde_json::{Map, Value};
use sitegrid_apimachinery::Status;

/// The patch flavours selected by the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    /// `application/merge-patch+json`, and `application/strategic-merge-patch+json`
    /// (treated as a merge patch: no list merge keys).
    Merge,
    /// `application/json-patch+json`.
    Json,
}

impl PatchKind {
    /// The kind for a Content-Type, or the 415 kube-apiserver sends.
    pub fn from_content_type(ct: &str) -> Result<Self, Status> {
        let media = ct.split(';').next().unwrap_or("").trim();
        match media {
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            _ => Err(Status::failure(
                415,
                Some("UnsupportedMediaType"),
                format!(
                    "the body of the request was in an unknown format - accepted media types include: \
                     application/json-patch+json, application/merge-patch+json, \
                     application/strategic-merge-patch+json (got {media:?})"
                ),
            )),
        }
    }
}

/// Apply `patch` to `target`.
pub(crate) fn apply(kind: PatchKind, target: Value, patch: &Value) -> Result<Value, Status> {
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(Status::bad_request("merge patch must be a JSON object"));
            }
            let mut t = target;
            merge(&mut t, patch);
            Ok(t)
        }
        PatchKind::Json => json_patch(target, patch),
    }
}

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.shift_remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// RFC 6902 with `add`, `remove`, `replace`, `test`, `move` and `copy`.
fn json_patch(mut doc: Value, patch: &Value) -> Result<Value, Status> {
    let Value::Array(ops) = patch else {
        return Err(Status::bad_request(
            "json patch must be a JSON array of operations",
        ));
    };
    for op in ops {
        let name = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| Status::bad_request(format!("json patch operation {op} has no path")))?;
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                Status::bad_request(format!(
                    "json patch operation {name} on {path} needs a value"
                ))
            })
        };
        let from = || {
            op.get("from").and_then(Value::as_str).ok_or_else(|| {
                Status::bad_request(format!("json patch operation {name} on {path} needs from"))
            })
        };
        match name {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "test" => {
                if doc.pointer(&pointer(path)?) != Some(&value()?) {
                    return Err(Status::failure(
                        422,
                        Some("Invalid"),
                        format!("the server rejected our request due to an error in our request: testing value {path} failed"),
                    ));
                }
            }
            "move" => {
                let v = remove(&mut doc, from()?)?;
                add(&mut doc, path, v)?;
            }
            "copy" => {
                let v = doc
                    .pointer(&pointer(from()?)?)
                    .cloned()
                    .ok_or_else(|| missing(from().unwrap_or("")))?;
                add(&mut doc, path, v)?;
            }
            other => return Err(Status::bad_request(format!("Unexpected kind: {other}"))),
        }
    }
    Ok(doc)
}

/// Validate a JSON pointer (empty or starting with `/`).
fn pointer(path: &str) -> Result<String, Status> {
    if path.is_empty() || path.starts_with('/') {
        Ok(path.to_owned())
    } else {
        Err(Status::bad_request(format!(
            "invalid json patch path {path:?}"
        )))
    }
}

/// Split `/a/b~1c` into the parent pointer `/a` and the unescaped last token `b/c`.
fn split(path: &str) -> Result<(&str, String), Status> {
    pointer(path)?;
    let idx = path
        .rfind('/')
        .ok_or_else(|| Status::bad_request("json patch cannot replace the whole document"))?;
    let last = path[idx + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..idx], last))
}

fn missing(path: &str) -> Status {
    Status::failure(
        422,
        Some("Invalid"),
        format!(
            "the server rejected our request due to an error in our request: path {path} not found"
        ),
    )
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), Status> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.insert(last, value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let idx = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= a.len())
                    .ok_or_else(|| missing(path))?
            };
            a.insert(idx, value);
            Ok(())
        }
        _ => Err(missing(path)),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, Status> {
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(m)) => m.shift_remove(&last).ok_or_else(|| missing(path)),
        Some(Value::Array(a)) => {
            let idx = last
                .parse::<usize>()
                .ok()
                .filter(|i| *i < a.len())
                .ok_or_else(|| missing(path))?;
            Ok(a.remove(idx))
        }
        _ => Err(missing(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let t = json!({"a":"b","c":{"d":"e","f":"g"},"keep":[1,2]});
        let p = json!({"a":"z","c":{"f":null},"keep":[3]});
        assert_eq!(
            apply(PatchKind::Merge, t, &p).unwrap(),
            json!({"a":"z","c":{"d":"e"},"keep":[3]})
        );
    }

    #[test]
    fn json_patch_ops() {
        let t = json!({"metadata":{"labels":{"a":"1"}},"list":[1,2,3]});
        let p = json!([
            {"op":"test","path":"/metadata/labels/a","value":"1"},
            {"op":"add","path":"/metadata/labels/x~1y","value":"2"},
            {"op":"replace","path":"/list/0","value":9},
            {"op":"remove","path":"/list/1"},
            {"op":"add","path":"/list/-","value":4}
        ]);
        assert_eq!(
            apply(PatchKind::Json, t.clone(), &p).unwrap(),
            json!({"metadata":{"labels":{"a":"1","x/y":"2"}},"list":[9,3,4]})
        );
        let bad = json!([{"op":"test","path":"/metadata/labels/a","value":"2"}]);
        assert_eq!(
            apply(PatchKind::Json, t.clone(), &bad).unwrap_err().code,
            422
        );
        let missing = json!([{"op":"remove","path":"/nope/x"}]);
        assert_eq!(apply(PatchKind::Json, t, &missing).unwrap_err().code, 422);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/strategic-merge-patch+json; charset=utf-8")
                .unwrap(),
            PatchKind::Merge
        );
        assert_eq!(
            PatchKind::from_content_type("application/yaml")
                .unwrap_err()
                .code,
            415
        );
    }
}
