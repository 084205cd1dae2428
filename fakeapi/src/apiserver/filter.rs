//! Which objects a list or watch sees: its namespace plus the label and field
//! selectors, parsed and worded by `sitegrid_apimachinery::selector`.

use serde_json::Value;
use sitegrid_apimachinery::selector::{FieldSelector, LabelSelector};
use sitegrid_apimachinery::Status;

use super::fields::empty_when_unset;
use super::object::Obj;
use super::resource::ResourceType;

/// The value of a selectable field of `obj`, as Go's `fields.Set` has it.
fn field_value(obj: &Obj, field: &str) -> Option<String> {
    match field {
        "metadata.name" => return Some(obj.name.clone()),
        "metadata.namespace" => return Some(obj.namespace.clone()),
        "source" => return lookup(obj, "source.component"),
        _ => {}
    }
    let v = lookup(obj, field);
    if field == "spec.unschedulable" {
        // A Go bool field: absent prints as "false".
        return Some(v.unwrap_or_else(|| "false".into()));
    }
    if empty_when_unset(field) {
        return Some(v.unwrap_or_default());
    }
    v
}

fn lookup(obj: &Obj, dotted: &str) -> Option<String> {
    let mut parts = dotted.split('.');
    let mut cur = obj.body.get(parts.next()?)?;
    for p in parts {
        cur = cur.get(p)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The namespace and selectors of one list or watch.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    /// Only objects in this namespace (namespaced requests).
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Filter {
    /// Parse the selectors of a request on `rt`; a bad one is the 400
    /// kube-apiserver sends before any list or stream.
    pub fn new(
        rt: &ResourceType,
        namespace: Option<&str>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<Self, Status> {
        let labels =
            LabelSelector::parse(label_selector).map_err(|e| Status::bad_request(e.to_string()))?;
        let fields =
            FieldSelector::parse(field_selector).map_err(|e| Status::bad_request(e.to_string()))?;
        fields
            .check_fields(rt.selectable.fields, rt.selectable.wording)
            .map_err(|e| Status::bad_request(e.to_string()))?;
        Ok(Filter {
            namespace: namespace.map(str::to_owned),
            labels,
            fields,
        })
    }

    /// True when a label or field selector is set (lists then omit
    /// `remainingItemCount`, as kube-apiserver does).
    pub fn has_selectors(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }

    /// The key prefix every matching object has: `namespace/` or nothing.
    pub fn key_prefix(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/"),
            None => String::new(),
        }
    }

    /// Whether `obj` is in this view.
    pub fn matches(&self, obj: &Obj) -> bool {
        if let Some(ns) = &self.namespace {
            if &obj.namespace != ns {
                return false;
            }
        }
        self.labels.matches(&obj.labels())
            && (self.fields.is_empty() || self.fields.matches(|f| field_value(obj, f)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::resource::Resources;
    use super::super::version::Profile;
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str, body: Value) -> Obj {
        Obj::new(
            format!("{ns}/{name}"),
            ns.into(),
            name.into(),
            2,
            body.as_object().cloned().unwrap(),
        )
    }

    #[test]
    fn selectors() {
        let r = Resources::new(&Profile::v1_20("v1"));
        let svc = r.by_id("services").unwrap();
        let o = obj(
            "default",
            "web",
            json!({"metadata":{"name":"web","labels":{"app":"web"}}}),
        );
        assert!(
            Filter::new(svc, Some("default"), "app=web", "metadata.name=web")
                .unwrap()
                .matches(&o)
        );
        assert!(!Filter::new(svc, Some("other"), "", "").unwrap().matches(&o));
        assert!(!Filter::new(svc, None, "!app", "").unwrap().matches(&o));
        assert!(!Filter::new(svc, None, "", "metadata.name!=web")
            .unwrap()
            .matches(&o));
        let e = Filter::new(svc, None, "", "spec.clusterIP=x").unwrap_err();
        assert_eq!(
            e.message,
            "\"spec.clusterIP\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(Filter::new(svc, None, "a in (b", "").unwrap_err().code, 400);
        let nodes = r.by_id("nodes").unwrap();
        let n = Obj::new(
            "n1".into(),
            String::new(),
            "n1".into(),
            2,
            json!({"metadata":{"name":"n1"}})
                .as_object()
                .cloned()
                .unwrap(),
        );
        assert!(Filter::new(nodes, None, "", "spec.unschedulable=false")
            .unwrap()
            .matches(&n));
        assert_eq!(
            Filter::new(nodes, None, "", "status.phase=Running")
                .unwrap_err()
                .message,
            "field label not supported: status.phase"
        );
    }
}
