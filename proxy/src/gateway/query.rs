//! The query parameters kube-apiserver understands for list, watch and
//! get, decoded from the query string once (typed, with its 400s).

use sitegrid_apimachinery::Status;

/// The query of a list, watch or get request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// `labelSelector`, raw.
    pub label_selector: String,
    /// `fieldSelector`, raw.
    pub field_selector: String,
    /// `limit` (0 = no limit).
    pub limit: u64,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`, raw (empty = unset).
    pub resource_version: String,
    /// `resourceVersionMatch`, raw.
    pub resource_version_match: String,
    /// `watch=true|1`.
    pub watch: bool,
    /// `allowWatchBookmarks=true`.
    pub allow_watch_bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `pretty=true`.
    pub pretty: bool,
    /// `includeObject` (Table requests).
    pub include_object: Option<String>,
}

impl Query {
    /// Parses a raw query string; a malformed number or boolean is a 400.
    pub fn parse(raw: &str) -> Result<Query, Status> {
        let mut q = Query::default();
        for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
            match &*k {
                "labelSelector" => q.label_selector = v.into_owned(),
                "fieldSelector" => q.field_selector = v.into_owned(),
                "limit" => q.limit = parse_int(&k, &v)?.max(0) as u64,
                "continue" if !v.is_empty() => q.continue_token = Some(v.into_owned()),
                "resourceVersion" => q.resource_version = v.into_owned(),
                "resourceVersionMatch" => q.resource_version_match = v.into_owned(),
                "watch" => q.watch = parse_bool(&k, &v)?,
                "allowWatchBookmarks" => q.allow_watch_bookmarks = parse_bool(&k, &v)?,
                "timeoutSeconds" => q.timeout_seconds = Some(parse_int(&k, &v)?.max(0) as u64),
                "sendInitialEvents" => q.send_initial_events = Some(parse_bool(&k, &v)?),
                "pretty" => q.pretty = parse_bool(&k, &v).unwrap_or(false),
                "includeObject" => q.include_object = Some(v.into_owned()),
                _ => {}
            }
        }
        Ok(q)
    }
}

fn parse_bool(key: &str, v: &str) -> Result<bool, Status> {
    // Go's strconv.ParseBool, which kube-apiserver's query decoding uses; an empty value means true.
    match v {
        "" | "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(Status::bad_request(format!(
            "{key}: Invalid value: \"{v}\": strconv.ParseBool: parsing \"{v}\": invalid syntax"
        ))),
    }
}

fn parse_int(key: &str, v: &str) -> Result<i64, Status> {
    v.parse::<i64>().map_err(|_| {
        Status::bad_request(format!(
            "{key}: Invalid value: \"{v}\": strconv.ParseInt: parsing \"{v}\": invalid syntax"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_kube_proxy_sends() {
        let q = Query::parse("allowWatchBookmarks=true&labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name&resourceVersion=42&timeout=7m5s&timeoutSeconds=425&watch=true").unwrap();
        assert!(q.watch && q.allow_watch_bookmarks);
        assert_eq!(
            q.label_selector,
            "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"
        );
        assert_eq!(q.resource_version, "42");
        assert_eq!(q.timeout_seconds, Some(425));
    }

    #[test]
    fn bad_numbers_are_400() {
        assert_eq!(Query::parse("limit=abc").unwrap_err().code, 400);
        assert_eq!(Query::parse("watch=maybe").unwrap_err().code, 400);
        assert!(Query::parse("watch=1").unwrap().watch);
    }
}
