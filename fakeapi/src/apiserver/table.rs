//! Server-side Tables, what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,…,application/json`:
//! the negotiation, then a LIST page or one object converted with
//! apimachinery's printers.
//!
//! Only resources with a printer there (services, endpoints, endpointslices,
//! nodes) answer Tables. For the others the Table offers are passed over and
//! plain JSON is sent, which kubectl then prints on the client. Watches are
//! always plain JSON. As kube-apiserver, the response's Content-Type stays
//! `application/json`.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{json, Value};
use sitegrid_apimachinery::negotiate::{negotiate, Format};
use sitegrid_apimachinery::table::{column_definitions, row, table, IncludeObject};
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
    /// The Table a GET of `rt` asks for, `None` for plain JSON. A bad
    /// `includeObject` is the apiserver's `400`; like the apiserver, it is
    /// only looked at when a Table is answered.
    pub(crate) fn negotiate(
        rt: &ResourceType,
        accept: Option<&str>,
        query: &str,
    ) -> Result<Option<TableRequest>, Status> {
        // The served types are all built-in, so the plural names the printer.
        if column_definitions(rt.plural).is_none() {
            return Ok(None);
        }
        // Whatever is not a Table (JSON first, or nothing this server can
        // produce) is answered with plain JSON.
        let Some(Format::Table { api_version }) = negotiate(accept) else {
            return Ok(None);
        };
        let include = parse_pairs(query)
            .into_iter()
            .find(|(k, _)| k == "includeObject")
            .map(|(_, v)| v);
        let include = IncludeObject::parse(include.as_deref()).map_err(Status::bad_request)?;
        Ok(Some(TableRequest {
            api_version,
            include,
        }))
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
    use crate::apiserver::resource::Resources;

    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                           application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn only_printed_resources_answer_tables() {
        let resources = Resources::new("v1");
        let rt = |id: &str| resources.by_id(id).unwrap();
        let want = Some(TableRequest {
            api_version: "meta.k8s.io/v1",
            include: IncludeObject::Metadata,
        });
        for id in ["services", "endpoints", "endpointslices", "nodes"] {
            assert_eq!(
                TableRequest::negotiate(rt(id), Some(KUBECTL), ""),
                Ok(want),
                "{id}"
            );
        }
        for id in ["configmaps", "namespaces"] {
            assert_eq!(
                TableRequest::negotiate(rt(id), Some(KUBECTL), "includeObject=Bogus"),
                Ok(None),
                "{id}"
            );
        }
        assert_eq!(
            TableRequest::negotiate(rt("nodes"), None, "includeObject=Bogus"),
            Ok(None)
        );
        assert_eq!(
            TableRequest::negotiate(rt("nodes"), Some(KUBECTL), "includeObject=None")
                .map(|t| t.map(|t| t.include)),
            Ok(Some(IncludeObject::None))
        );
        let bad =
            TableRequest::negotiate(rt("nodes"), Some(KUBECTL), "includeObject=Bogus").unwrap_err();
        assert_eq!(bad.code, 400);
        assert!(bad.message.starts_with(
            "Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\""
        ));
    }
}
