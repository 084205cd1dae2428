//! Server-side Tables, what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,…,application/json`
//! (negotiated in `super::negotiate`): a LIST page or one object converted
//! with apimachinery's printers.
//!
//! Only resources with a printer there (services, endpoints, endpointslices,
//! nodes) answer Tables. For the others the Table offers are passed over and
//! plain JSON is sent, which kubectl then prints on the client. A watch
//! sends one Table per event (`super::watch`). As kube-apiserver, the
//! response's Content-Type stays `application/json`.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Value};
use sitegrid_apimachinery::table::{row, table, IncludeObject};
use sitegrid_apimachinery::Status;

use super::list::Page;
use super::object::Obj;
use super::query::parse_pairs;
use super::resource::ResourceType;

/// A GET answered with a Table, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableRequest {
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as negotiated.
    api_version: &'static str,
    /// What each row's `object` carries (`includeObject`).
    include: IncludeObject,
}

impl TableRequest {
    /// The Table negotiated in `api_version` (see `super::negotiate`), with
    /// the request's `includeObject`; a bad one is the apiserver's `400`,
    /// looked at only when a Table is answered.
    pub(crate) fn new(api_version: &'static str, query: &str) -> Result<TableRequest, Status> {
        let include = parse_pairs(query)
            .into_iter()
            .find(|(k, _)| k == "includeObject")
            .map(|(_, v)| v);
        let include = IncludeObject::parse(include.as_deref()).map_err(Status::bad_request)?;
        Ok(TableRequest {
            api_version,
            include,
        })
    }

    /// A LIST page as a Table: the list's metadata (resourceVersion, and
    /// continue / remainingItemCount when paged), one row per item.
    pub(crate) fn list(&self, rt: &ResourceType, page: &Page) -> Bytes {
        let now = now_unix();
        let rows = page.items.iter().map(|o| self.row(rt, o, now)).collect();
        encode(&table(
            rt.plural,
            self.api_version,
            page.list_meta(),
            rows,
            true,
        ))
    }

    /// One object as a Table: the object's resourceVersion, one row.
    pub(crate) fn object(&self, rt: &ResourceType, obj: &Obj) -> Bytes {
        let meta = json!({ "resourceVersion": obj.rv.to_string() });
        let rows = vec![self.row(rt, obj, now_unix())];
        encode(&table(rt.plural, self.api_version, meta, rows, true))
    }

    /// Append the Table a watch event of `obj` carries: the object's
    /// resourceVersion, one row, and the columns if `with_columns`.
    pub(crate) fn push_event_table(
        &self,
        rt: &ResourceType,
        obj: &Obj,
        with_columns: bool,
        out: &mut Vec<u8>,
    ) {
        let meta = json!({ "resourceVersion": obj.rv.to_string() });
        let rows = vec![self.row(rt, obj, now_unix())];
        push(
            &table(rt.plural, self.api_version, meta, rows, with_columns),
            out,
        );
    }

    /// Append the Table a BOOKMARK of a Table watch carries: no rows, the
    /// resourceVersion `rv`.
    pub(crate) fn push_bookmark_table(&self, rv: u64, out: &mut Vec<u8>) {
        let meta = json!({ "resourceVersion": rv.to_string() });
        push(&table("", self.api_version, meta, Vec::new(), false), out);
    }

    fn row(&self, rt: &ResourceType, obj: &Obj, now: i64) -> Value {
        // Row objects carry kind and apiVersion, unlike list items.
        let typed = obj.to_typed_value(rt);
        row(rt.plural, &typed, self.include, self.api_version, now)
    }
}

/// Seconds since the epoch, for the `Age` cells.
fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Append `v` as compact JSON.
fn push(v: &Value, out: &mut Vec<u8>) {
    // Serializing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(out, v);
}

/// Compact JSON and a newline, as every response body here.
fn encode(v: &Value) -> Bytes {
    // Serializing a Value cannot fail.
    let mut body = serde_json::to_vec(v).unwrap_or_default();
    body.push(b'\n');
    Bytes::from(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_object() {
        let want = |include| {
            Ok(TableRequest {
                api_version: "meta.k8s.io/v1",
                include,
            })
        };
        assert_eq!(
            TableRequest::new("meta.k8s.io/v1", ""),
            want(IncludeObject::Metadata)
        );
        assert_eq!(
            TableRequest::new("meta.k8s.io/v1", "includeObject=None"),
            want(IncludeObject::None)
        );
        let bad = TableRequest::new("meta.k8s.io/v1", "includeObject=Bogus").unwrap_err();
        assert_eq!(bad.code, 400);
        assert!(bad.message.starts_with(
            "Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\""
        ));
    }
}
