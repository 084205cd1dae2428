//! Validating list/watch options the way kube-apiserver does.

use sitegrid_apimachinery::{
    selector::{FieldSelector, LabelSelector, UnknownFieldWording},
    status::StatusCause,
    Status,
};

use super::route::CachedRequest;
use crate::{cache::View, resource::ResourceKind};

/// Parsed label and field selectors plus the namespace scope.
#[derive(Debug, Clone)]
pub struct Filter {
    label: LabelSelector,
    field: FieldSelector,
    namespace: Option<String>,
}

impl Filter {
    /// Parses the request's selectors; a bad one is a 400 with kube-apiserver's message.
    pub fn parse(req: &CachedRequest) -> Result<Filter, Status> {
        let label = LabelSelector::parse(&req.query.label_selector)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        let field = FieldSelector::parse(&req.query.field_selector)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        let wording = match req.served.kind {
            ResourceKind::Nodes => UnknownFieldWording::FieldLabelNotSupported,
            _ => UnknownFieldWording::KnownFieldSelector,
        };
        field
            .check_fields(req.served.kind.selectable_fields(), wording)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        Ok(Filter {
            label,
            field,
            namespace: req.namespace.clone(),
        })
    }

    /// Whether no selector narrows the result (kube-apiserver then reports remainingItemCount).
    pub fn selects_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether `view` is in scope and matches both selectors.
    pub fn matches(&self, view: &View) -> bool {
        if let Some(ns) = &self.namespace {
            if view.namespace.as_deref() != Some(ns.as_str()) {
                return false;
            }
        }
        self.label.matches(&view.labels) && self.field.matches(|f| view.field(f))
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
    /// Validates as kube-apiserver does: a non-numeric version is a 500, an
    /// unknown or misplaced `resourceVersionMatch` a 422.
    pub fn parse(raw_rv: &str, raw_match: &str, has_continue: bool) -> Result<Versioning, Status> {
        let rv = match raw_rv {
            "" => None,
            s => Some(s.parse::<u64>().map_err(|_| {
                Status::internal(format!(
                    "resourceVersion: Invalid value: \"{s}\": strconv.ParseUint: parsing \"{s}\": invalid syntax"
                ))
            })?),
        };
        let mut causes = Vec::new();
        let rv_match = match raw_match {
            "" | "NotOlderThan" => RvMatch::NotOlderThan,
            "Exact" => RvMatch::Exact,
            other => {
                causes.push(StatusCause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!("Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""),
                    field: "resourceVersionMatch".into(),
                });
                RvMatch::NotOlderThan
            }
        };
        if !raw_match.is_empty() && rv.is_none() {
            causes.push(StatusCause {
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
                field: "resourceVersionMatch".into(),
            });
        }
        if !raw_match.is_empty() && has_continue {
            causes.push(StatusCause {
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: resourceVersionMatch is forbidden when continue is provided"
                    .into(),
                field: "resourceVersionMatch".into(),
            });
        }
        if rv == Some(0) && rv_match == RvMatch::Exact {
            causes.push(StatusCause {
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into(),
                field: "resourceVersionMatch".into(),
            });
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
