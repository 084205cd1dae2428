//! PATCH bodies: JSON merge patch (RFC 7386, also used for strategic merge
//! patch) and JSON patch (RFC 6902), applied with the `json-patch` crate.

use serde_json::Value;
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

/// Apply `patch` to `target` (the `json-patch` crate does RFC 7386 and RFC 6902).
pub(crate) fn apply(kind: PatchKind, mut target: Value, patch: &Value) -> Result<Value, Status> {
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(Status::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut target, patch);
        }
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
                Status::bad_request(format!(
                    "json patch must be a JSON array of operations: {e}"
                ))
            })?;
            // As kube-apiserver: a failed `test` or a path that is not there is 422.
            json_patch::patch(&mut target, &ops).map_err(|e| {
                Status::failure(
                    422,
                    Some("Invalid"),
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
    }
    Ok(target)
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
