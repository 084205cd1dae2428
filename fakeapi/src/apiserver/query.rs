//! Query parameters of list, watch and get requests, validated the way
//! kube-apiserver validates them.

use sitegrid_apimachinery::status::StatusCause;
use sitegrid_apimachinery::Status;

/// Decoded `key=value` pairs of a raw query (`application/x-www-form-urlencoded`).
pub(crate) fn parse_pairs(raw: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(raw.as_bytes())
        .into_owned()
        .collect()
}

/// Which state a request reads (`resourceVersion` and `resourceVersionMatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAt {
    /// No resourceVersion: the latest state.
    Latest,
    /// `resourceVersion=0`: any state (watch: synthetic ADDED first).
    Any,
    /// `resourceVersion=N`: at least N (watch: events after N).
    NotOlderThan(u64),
    /// `resourceVersion=N&resourceVersionMatch=Exact`: the state at N.
    Exact(u64),
}

/// The options of a collection request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListOptions {
    /// `watch=true|1`.
    pub watch: bool,
    /// `resourceVersion` as sent.
    pub resource_version: String,
    /// `resourceVersionMatch` as sent.
    pub resource_version_match: String,
    /// `labelSelector`.
    pub label_selector: String,
    /// `fieldSelector`.
    pub field_selector: String,
    /// `limit`, 0 = none.
    pub limit: usize,
    /// `continue`.
    pub continue_token: String,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
}

fn truthy(v: &str) -> bool {
    matches!(v, "true" | "1" | "True" | "TRUE")
}

impl ListOptions {
    /// Parse a raw query string.
    pub fn parse(raw: &str) -> Result<Self, Status> {
        let mut o = ListOptions::default();
        for (k, v) in parse_pairs(raw) {
            match k.as_str() {
                "watch" => o.watch = truthy(&v),
                "resourceVersion" => o.resource_version = v,
                "resourceVersionMatch" => o.resource_version_match = v,
                "labelSelector" => o.label_selector = v,
                "fieldSelector" => o.field_selector = v,
                "limit" => {
                    let n: i64 = v.parse().map_err(|_| {
                        Status::bad_request(format!(
                            "limit: Invalid value: {v:?}: must be an integer"
                        ))
                    })?;
                    o.limit = usize::try_from(n).unwrap_or(0);
                }
                "continue" => o.continue_token = v,
                "allowWatchBookmarks" => o.allow_bookmarks = truthy(&v),
                "timeoutSeconds" => {
                    o.timeout_seconds = Some(v.parse().map_err(|_| {
                        Status::bad_request(format!(
                            "timeoutSeconds: Invalid value: {v:?}: must be a non-negative integer"
                        ))
                    })?)
                }
                "sendInitialEvents" => o.send_initial_events = truthy(&v),
                _ => {}
            }
        }
        Ok(o)
    }

    /// Interpret `resourceVersion` / `resourceVersionMatch` (500 for a non-number,
    /// 422 for a match without a version, as kube-apiserver answers).
    pub fn read_at(&self) -> Result<ReadAt, Status> {
        let rv = self.resource_version.as_str();
        let exact = match self.resource_version_match.as_str() {
            "" | "NotOlderThan" => false,
            "Exact" => true,
            other => {
                return Err(Status::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                )))
            }
        };
        if rv.is_empty() {
            if !self.resource_version_match.is_empty() {
                return Err(list_options_invalid(vec![(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )]));
            }
            return Ok(ReadAt::Latest);
        }
        let n: u64 = rv.parse().map_err(|e: std::num::ParseIntError| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow => "value out of range",
                _ => "invalid syntax",
            };
            Status::internal(format!(
                "resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": {why}"
            ))
        })?;
        Ok(match (n, exact) {
            (0, _) => ReadAt::Any,
            (n, true) => ReadAt::Exact(n),
            (n, false) => ReadAt::NotOlderThan(n),
        })
    }
}

/// `422 Invalid` on `ListOptions.meta.k8s.io`, each cause `FieldValueForbidden`.
pub(crate) fn list_options_invalid(causes: Vec<(&str, &str)>) -> Status {
    let causes = causes
        .into_iter()
        .map(|(field, message)| StatusCause::forbidden(field, message))
        .collect();
    Status::invalid("ListOptions", "meta.k8s.io", "", causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let pairs = parse_pairs("labelSelector=a%20in%20(b&x=a+b%3Dc%&flag&y=%21x%2Fy");
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("labelSelector"), Some("a in (b"));
        assert_eq!(get("x"), Some("a b=c%"));
        assert_eq!(get("flag"), Some(""));
        assert_eq!(get("y"), Some("!x/y"));
    }

    #[test]
    fn options() {
        let o = ListOptions::parse("watch=1&resourceVersion=5&limit=-1&labelSelector=app%3Dweb")
            .unwrap();
        assert!(o.watch);
        assert_eq!(o.limit, 0);
        assert_eq!(o.label_selector, "app=web");
        assert_eq!(o.read_at().unwrap(), ReadAt::NotOlderThan(5));
        let bad = ListOptions::parse("resourceVersion=abc").unwrap();
        let e = bad.read_at().unwrap_err();
        assert_eq!(e.code, 500);
        assert_eq!(
            e.message,
            "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
        let e = ListOptions::parse("resourceVersionMatch=Exact")
            .unwrap()
            .read_at()
            .unwrap_err();
        assert_eq!(e.code, 422);
        assert!(ListOptions::parse("limit=x").is_err());
    }
}
