//! A scope: which objects of a resource a list or watch asks for — a
//! namespace (or all), a label selector and a field selector. The kubelet
//! lists each scope it needs and then watches it; the node cache keeps what
//! the API server answered per scope, and answers a request offline from a
//! kept scope that holds every object the request could select.

use std::fmt;

use sitegrid_apimachinery::selector::{FieldSelector, LabelSelector, SelectorError};

use crate::{facts::Facts, resource::KeptResource};

/// The objects of one resource a list or watch selects.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The namespace, or `None` for every namespace (and cluster-scoped resources).
    pub namespace: Option<String>,
    label: LabelSelector,
    field: FieldSelector,
    /// The selectors' canonical forms (Go's `String()`): the scope's identity.
    key: (String, String),
}

impl Scope {
    /// The scope of a request on `namespace` with these selectors (as sent,
    /// percent-decoded). A selector that does not parse is refused, as
    /// kube-apiserver refuses it.
    pub fn new(namespace: Option<&str>, label: &str, field: &str) -> Result<Scope, SelectorError> {
        let label = LabelSelector::parse(label)?;
        let field = FieldSelector::parse(field)?;
        let key = (label.to_string(), field.to_string());
        Ok(Scope {
            namespace: namespace.map(str::to_owned),
            label,
            field,
            key,
        })
    }

    /// The canonical label selector.
    pub fn label(&self) -> &str {
        &self.key.0
    }

    /// The canonical field selector.
    pub fn field(&self) -> &str {
        &self.key.1
    }

    /// The one name this scope pins with `metadata.name=` (the kubelet's
    /// per-object Secret and ConfigMap reflectors), if any.
    pub fn name(&self) -> Option<&str> {
        self.field.exact_name()
    }

    /// Whether it selects by nothing but name and namespace: a scope that
    /// would hold any object of a given name (whatever its labels and other
    /// fields), so that object's absence from it means it does not exist.
    pub fn holds_any_named(&self, namespace: &str, name: &str) -> bool {
        let ns_ok = self.namespace.as_deref().is_none_or(|ns| ns == namespace);
        ns_ok
            && self.label.is_empty()
            && self
                .field
                .fields()
                .all(|f| f == "metadata.name" || f == "metadata.namespace")
            && self.field.matches(|f| match f {
                "metadata.name" => Some(name.to_owned()),
                "metadata.namespace" => Some(namespace.to_owned()),
                _ => None,
            })
    }

    /// Whether every object `narrower` selects is one this scope holds:
    /// the same or a wider namespace, and selectors that `narrower` only adds to.
    pub fn covers(&self, narrower: &Scope) -> bool {
        let namespace = match (&self.namespace, &narrower.namespace) {
            (None, _) => true,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        namespace && narrower.label.narrows(&self.label) && narrower.field.narrows(&self.field)
    }

    /// Whether an object with `facts` is in this scope; `None` when a field
    /// selector names a field the node cache does not read for `resource`
    /// (the request cannot be answered from what is kept).
    pub fn selects(&self, resource: KeptResource, facts: &Facts) -> Option<bool> {
        if let Some(ns) = &self.namespace {
            if &facts.namespace != ns {
                return Some(false);
            }
        }
        let known = |f: &str| {
            f == "metadata.name"
                || f == "metadata.namespace"
                || resource.selectable_fields().contains(&f)
        };
        if !self.field.fields().all(known) {
            return None;
        }
        Some(self.label.matches(&facts.labels) && self.field.matches(|f| facts.field(f)))
    }
}

impl PartialEq for Scope {
    fn eq(&self, other: &Self) -> bool {
        self.namespace == other.namespace && self.key == other.key
    }
}

impl Eq for Scope {}

impl std::hash::Hash for Scope {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.namespace.hash(state);
        self.key.hash(state);
    }
}

impl PartialOrd for Scope {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scope {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.namespace, &self.key).cmp(&(&other.namespace, &other.key))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.namespace.as_deref().unwrap_or("*"))?;
        if !self.label().is_empty() {
            write!(f, " labels {}", self.label())?;
        }
        if !self.field().is_empty() {
            write!(f, " fields {}", self.field())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(ns: Option<&str>, label: &str, field: &str) -> Scope {
        Scope::new(ns, label, field).unwrap()
    }

    #[test]
    fn a_scope_covers_the_requests_that_only_narrow_it() {
        let pods = scope(None, "", "spec.nodeName=bj-1");
        assert!(pods.covers(&scope(None, "", "spec.nodeName=bj-1")));
        assert!(pods.covers(&scope(
            Some("shop"),
            "app=web",
            "spec.nodeName=bj-1,status.phase=Running"
        )));
        assert!(
            !pods.covers(&scope(None, "", "")),
            "every pod of the cluster"
        );
        assert!(!pods.covers(&scope(None, "", "spec.nodeName=bj-2")));
        let secret = scope(Some("shop"), "", "metadata.name=db");
        assert_eq!(secret.name(), Some("db"));
        assert!(
            !secret.covers(&scope(None, "", "metadata.name=db")),
            "another namespace's db"
        );
        assert!(!secret.covers(&scope(Some("other"), "", "metadata.name=db")));
        let labelled = scope(None, "tier in (a,b)", "");
        assert!(labelled.covers(&scope(None, "tier in (b,a),app=x", "")));
        assert!(
            !labelled.covers(&scope(None, "tier in (a)", "")),
            "a different requirement"
        );
        assert_eq!(
            scope(None, "b=1,a=2", ""),
            scope(None, "a=2,b=1", ""),
            "canonical"
        );
        assert!(Scope::new(None, "a in (", "").is_err());
    }

    #[test]
    fn selection_reads_the_kept_facts_or_gives_up() {
        let facts = Facts {
            namespace: "shop".into(),
            name: "web-1".into(),
            fields: vec![("status.phase", "Running".into())],
            labels: [("app".to_owned(), "web".to_owned())].into(),
            ..Facts::default()
        };
        let pods = KeptResource::Pods;
        assert_eq!(
            scope(None, "app=web", "status.phase=Running").selects(pods, &facts),
            Some(true)
        );
        assert_eq!(
            scope(Some("other"), "", "").selects(pods, &facts),
            Some(false)
        );
        assert_eq!(
            scope(None, "", "spec.nodeName=bj-1").selects(pods, &facts),
            Some(false)
        );
        assert_eq!(
            scope(None, "", "spec.hostNetwork=true").selects(pods, &facts),
            None
        );
    }
}
