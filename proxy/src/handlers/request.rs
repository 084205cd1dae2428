//! A request for a cached kind, fully parsed: the gateway builds it once
//! (see `gateway::route`) and the handlers only read it.

use std::time::Duration;

pub use sitegrid_apimachinery::negotiate::Format;
use sitegrid_apimachinery::{
    continue_token::ContinueToken,
    selector::{FieldSelector, LabelSelector, UnknownFieldWording},
    status::StatusCause,
    Status,
};
use sitegrid_cache::{Codec, ResourceKind, Served, View};

use crate::http::response::StatusEncoding;

/// What a handler is asked for.
#[derive(Debug, Clone)]
pub struct CachedRequest {
    /// Resource and API version.
    pub served: Served,
    /// `Some(ns)` for the per-namespace and single-object paths of namespaced kinds.
    pub namespace: Option<String>,
    /// The representation negotiated from `Accept`.
    pub format: Format,
    /// How errors are written, negotiated from `Accept` too.
    pub errors: StatusEncoding,
    /// Indented JSON (`?pretty=true`, or curl/wget/a browser, as kube-apiserver does).
    pub pretty: bool,
    /// Get, list or watch, with their options.
    pub verb: Verb,
}

impl CachedRequest {
    /// The one object this request can return, when it names one: a GET's
    /// name, or the name a list or watch pins with `metadata.name=`.
    pub fn single_name(&self) -> Option<&str> {
        match &self.verb {
            Verb::Get { name } => Some(name),
            Verb::List(l) => l.filter.exact_name(),
            Verb::Watch(w) => w.filter.exact_name(),
        }
    }

    /// The store-key prefix that scopes this request (`ns/` or everything).
    pub fn key_prefix(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/"),
            None => String::new(),
        }
    }

    /// The verb's name, for metrics and logs.
    pub fn verb_name(&self) -> &'static str {
        match self.verb {
            Verb::Get { .. } => "get",
            Verb::List(_) => "list",
            Verb::Watch(_) => "watch",
        }
    }
}

/// The verb and its options.
#[derive(Debug, Clone)]
pub enum Verb {
    /// One object by name.
    Get {
        /// The object's name.
        name: String,
    },
    /// A collection read.
    List(ListRequest),
    /// A collection stream.
    Watch(WatchRequest),
}

/// A LIST.
#[derive(Debug, Clone)]
pub struct ListRequest {
    /// Scope and selectors.
    pub filter: Filter,
    /// Which state the list reads.
    pub from: ListFrom,
    /// Page size (0: everything; `resourceVersion=0` ignores `limit`, as the watch cache does).
    pub limit: usize,
}

/// Which state a LIST reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFrom {
    /// The newest state (no resourceVersion, or `0`).
    Latest,
    /// Any state at least this new (waits for it up to a few seconds, then 504).
    NotOlderThan(u64),
    /// The state at exactly this version (410 if the log no longer reaches it).
    Exact(u64),
    /// The next page of an earlier list.
    Continue(ContinueToken),
}

/// A WATCH.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// Scope and selectors.
    pub filter: Filter,
    /// Where the stream starts.
    pub start: Start,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `timeoutSeconds` (None: kube-apiserver's random 30–60 minutes).
    pub timeout: Option<Duration>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// ADDED for every current object first (`sendInitialEvents=true`, which
    /// a watch from "any" version defaults to); then, for a client that takes
    /// bookmarks, a BOOKMARK marking the end of the initial events.
    Initial {
        /// The state must be at least this new (waits for it up to a few seconds, then an ERROR).
        not_older_than: Option<u64>,
        /// Send the `k8s.io/initial-events-end` bookmark.
        end_bookmark: bool,
    },
    /// Every event after this version.
    After(u64),
    /// Every event from now on, without the current objects
    /// (`sendInitialEvents=false` from "any" version).
    Now,
}

/// Parsed label and field selectors plus the namespace scope.
#[derive(Debug, Clone)]
pub struct Filter {
    label: LabelSelector,
    field: FieldSelector,
    namespace: Option<String>,
    /// The selectors as the client wrote them (for `/debug/cache`).
    raw: (String, String),
}

impl Filter {
    /// Parses a request's selectors; a bad one is a 400 with kube-apiserver's message.
    pub fn parse(
        kind: ResourceKind,
        namespace: Option<String>,
        label: &str,
        field: &str,
    ) -> Result<Filter, Status> {
        let bad = |e: &dyn std::fmt::Display| Status::bad_request(e.to_string());
        let label_sel = LabelSelector::parse(label).map_err(|e| bad(&e))?;
        let field_sel = FieldSelector::parse(field).map_err(|e| bad(&e))?;
        let wording = match kind {
            ResourceKind::Nodes => UnknownFieldWording::FieldLabelNotSupported,
            _ => UnknownFieldWording::KnownFieldSelector,
        };
        field_sel
            .check_fields(kind.selectable_fields(), wording)
            .map_err(|e| bad(&e))?;
        Ok(Filter {
            label: label_sel,
            field: field_sel,
            namespace,
            raw: (label.to_owned(), field.to_owned()),
        })
    }

    /// The one name the field selector pins (`metadata.name=X`), if it does.
    pub fn exact_name(&self) -> Option<&str> {
        self.field.exact_name()
    }

    /// The label selector.
    pub fn label_selector(&self) -> &LabelSelector {
        &self.label
    }

    /// Whether no selector narrows the result (kube-apiserver then reports remainingItemCount).
    pub fn selects_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether `view` (of the cache whose codec is `codec`) is in scope and
    /// matches both selectors.
    pub fn matches(&self, codec: &Codec, view: &View) -> bool {
        if let Some(ns) = &self.namespace {
            if view.namespace() != Some(ns.as_str()) {
                return false;
            }
        }
        self.label.matches(&view.labels(codec))
            && self
                .field
                .matches(|f| view.field(codec, f).map(str::to_owned))
    }

    /// The namespace scope.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The label and field selectors as sent (empty: none).
    pub fn raw_selectors(&self) -> (&str, &str) {
        (&self.raw.0, &self.raw.1)
    }
}

/// How a list or watch names a resourceVersion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// Unset or `NotOlderThan`: any state at least this new.
    NotOlderThan,
    /// `Exact`: the state at exactly this version.
    Exact,
}

/// `resourceVersion` and `resourceVersionMatch`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versioning {
    /// None for unset or "0" (any state; the newest the cache has).
    pub rv: Option<u64>,
    /// Whether `resourceVersion=0` was given explicitly.
    pub zero: bool,
    /// The match rule.
    pub rv_match: RvMatch,
}

impl Versioning {
    /// Validates a list's (or a watch's) version options as kube-apiserver's
    /// `ValidateListOptions` does: a non-numeric version is a 500, an unknown
    /// or misplaced `resourceVersionMatch` and a list's `sendInitialEvents` a 422.
    pub fn parse(
        raw_rv: &str,
        raw_match: &str,
        has_continue: bool,
        has_send_initial_events: bool,
    ) -> Result<Versioning, Status> {
        let rv = match raw_rv {
            "" => None,
            s => Some(s.parse::<u64>().map_err(|_| {
                Status::internal(format!(
                    "resourceVersion: Invalid value: \"{s}\": strconv.ParseUint: parsing \"{s}\": invalid syntax"
                ))
            })?),
        };
        let field = "resourceVersionMatch";
        let forbidden = |msg: &str| StatusCause::forbidden(field, msg);
        let mut causes = Vec::new();
        if !raw_match.is_empty() && rv.is_none() {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !raw_match.is_empty() && has_continue {
            causes.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        let rv_match = match raw_match {
            "" | "NotOlderThan" => RvMatch::NotOlderThan,
            "Exact" => RvMatch::Exact,
            other => {
                causes.push(StatusCause::not_supported(
                    field,
                    other,
                    &["Exact", "NotOlderThan", ""],
                ));
                RvMatch::NotOlderThan
            }
        };
        if rv == Some(0) && rv_match == RvMatch::Exact {
            causes.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if has_send_initial_events {
            causes.push(StatusCause::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        if !causes.is_empty() {
            return Err(Status::invalid("ListOptions", "meta.k8s.io", "", causes));
        }
        Ok(Versioning {
            zero: rv == Some(0),
            rv: rv.filter(|v| *v != 0),
            rv_match,
        })
    }
}
