//! Query parameters of list, watch and get requests, validated the way
//! kube-apiserver validates them.

use sitegrid_apimachinery::status::StatusCause;
use sitegrid_apimachinery::Status;

use super::version::Profile;

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
    /// `sendInitialEvents` as sent, absent: `None` (a `*bool` in Go, so
    /// its presence matters).
    pub send_initial_events: Option<String>,
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
                "sendInitialEvents" => o.send_initial_events = Some(v),
                _ => {}
            }
        }
        Ok(o)
    }

    /// `resourceVersion` as a number, `None` when absent; a non-number is
    /// kube-apiserver's 500.
    pub fn resource_version_number(&self) -> Result<Option<u64>, Status> {
        let rv = self.resource_version.as_str();
        if rv.is_empty() {
            return Ok(None);
        }
        rv.parse().map(Some).map_err(|e: std::num::ParseIntError| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow => "value out of range",
                _ => "invalid syntax",
            };
            Status::internal(format!(
                "resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": {why}"
            ))
        })
    }

    /// The options as the played release takes them: from 1.31 on,
    /// defaulted (WatchList gate on: a watch from "" or "0" is a watch-list)
    /// and validated (`422`) before selectors are looked at, as
    /// kube-apiserver's `ListResource` handler does; 1.20 as they are.
    pub fn for_release(&self, profile: Profile) -> Result<ListOptions, Status> {
        let mut opts = self.clone();
        if profile.validates_watch_list_options() {
            if profile.watch_list {
                opts.set_watch_list_defaults();
            }
            opts.validate(profile.watch_list)?;
        }
        Ok(opts)
    }

    /// `sendInitialEvents=true` as this server read it when it played only
    /// 1.20 (`true`, `1`, `True`, `TRUE`).
    pub fn legacy_send_initial_events(&self) -> bool {
        self.send_initial_events.as_deref().is_some_and(truthy)
    }

    /// `sendInitialEvents` as apimachinery converts a `*bool` parameter:
    /// absent is `None`, `0` and `false` (any case) are false, anything
    /// else (the empty string too) is true.
    pub fn send_initial_events(&self) -> Option<bool> {
        self.send_initial_events
            .as_deref()
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }

    /// apimachinery's `SetListOptionsDefaults` with the WatchList gate on: a
    /// watch from "" or "0" that says nothing of initial events becomes a
    /// watch-list request (so it also gets the initial-events-end bookmark
    /// when bookmarks are allowed).
    pub fn set_watch_list_defaults(&mut self) {
        if self.send_initial_events.is_some() || !self.resource_version_match.is_empty() {
            return;
        }
        if self.watch && matches!(self.resource_version.as_str(), "" | "0") {
            self.send_initial_events = Some("true".into());
            self.resource_version_match = NOT_OLDER_THAN.into();
        }
    }

    /// apimachinery's `ValidateListOptions` (v0.27 to v0.35, the same text):
    /// the `422 Invalid` kube-apiserver 1.31 and 1.35 answer before anything
    /// else, every cause at once.
    pub fn validate(&self, watch_list_enabled: bool) -> Result<(), Status> {
        let causes = if self.watch {
            self.watch_causes(watch_list_enabled)
        } else {
            self.list_causes()
        };
        if causes.is_empty() {
            return Ok(());
        }
        Err(Status::invalid("ListOptions", "meta.k8s.io", "", causes))
    }

    fn list_causes(&self) -> Vec<StatusCause> {
        let mut causes = Vec::new();
        let rvm = self.resource_version_match.as_str();
        if !rvm.is_empty() {
            if self.resource_version.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !self.continue_token.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if rvm != "Exact" && rvm != NOT_OLDER_THAN {
                causes.push(StatusCause::not_supported(
                    RVM,
                    rvm,
                    &["Exact", NOT_OLDER_THAN, ""],
                ));
            }
            if rvm == "Exact" && self.resource_version == "0" {
                causes.push(forbidden(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.send_initial_events.is_some() {
            causes.push(StatusCause::forbidden(
                SIE,
                "sendInitialEvents is forbidden for list",
            ));
        }
        causes
    }

    fn watch_causes(&self, watch_list_enabled: bool) -> Vec<StatusCause> {
        let mut causes = Vec::new();
        let rvm = self.resource_version_match.as_str();
        if self.send_initial_events.is_some() {
            if rvm != NOT_OLDER_THAN {
                causes.push(forbidden(
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !watch_list_enabled {
                causes.push(StatusCause::forbidden(
                    SIE,
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                ));
            }
        }
        if !rvm.is_empty() {
            if self.send_initial_events.is_none() {
                causes.push(forbidden(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rvm != NOT_OLDER_THAN {
                causes.push(StatusCause::not_supported(RVM, rvm, &[NOT_OLDER_THAN]));
            }
            if !self.continue_token.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        causes
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
        let n = self.resource_version_number()?.unwrap_or(0);
        Ok(match (n, exact) {
            (0, _) => ReadAt::Any,
            (n, true) => ReadAt::Exact(n),
            (n, false) => ReadAt::NotOlderThan(n),
        })
    }
}

/// `resourceVersionMatch`.
const RVM: &str = "resourceVersionMatch";
/// `sendInitialEvents`.
const SIE: &str = "sendInitialEvents";
/// The only match a watch-list accepts.
const NOT_OLDER_THAN: &str = "NotOlderThan";

/// `FieldValueForbidden` on `resourceVersionMatch`.
fn forbidden(message: &str) -> StatusCause {
    StatusCause::forbidden(RVM, message)
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

    fn causes(query: &str, gate: bool) -> Vec<String> {
        match ListOptions::parse(query).unwrap().validate(gate) {
            Ok(()) => Vec::new(),
            Err(s) => s
                .details
                .unwrap()
                .causes
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect(),
        }
    }

    #[test]
    fn watch_list_validation() {
        let wl = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        assert!(causes(wl, true).is_empty());
        assert_eq!(
            causes(wl, false),
            ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"]
        );
        assert_eq!(
            causes("watch=1&sendInitialEvents=true", true),
            ["resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"]
        );
        assert_eq!(
            causes("watch=1&resourceVersionMatch=Exact&resourceVersion=3", true),
            [
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                "resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\""
            ]
        );
        assert_eq!(
            causes("sendInitialEvents=false", true),
            ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]
        );
        let o = ListOptions::parse("sendInitialEvents=").unwrap();
        assert_eq!(o.send_initial_events(), Some(true));
        let o = ListOptions::parse("sendInitialEvents=FALSE").unwrap();
        assert_eq!(o.send_initial_events(), Some(false));
        assert!(!o.legacy_send_initial_events());
    }

    #[test]
    fn legacy_watches_become_watch_lists() {
        for (query, becomes) in [
            ("watch=1", true),
            ("watch=1&resourceVersion=0", true),
            ("watch=1&resourceVersion=7", false),
            ("watch=1&sendInitialEvents=false", false),
            ("resourceVersion=0", false),
        ] {
            let mut o = ListOptions::parse(query).unwrap();
            o.set_watch_list_defaults();
            assert_eq!(o.send_initial_events() == Some(true), becomes, "{query}");
            assert_eq!(
                o.resource_version_match == NOT_OLDER_THAN,
                becomes,
                "{query}"
            );
        }
    }
}
