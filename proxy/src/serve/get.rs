//! GET of one object from the cache.

use bytes::Bytes;
use serde_json::json;
use sitegrid_apimachinery::Status;

use super::{render, route::CachedRequest};
use crate::cache::Cache;
use sitegrid_apimachinery::negotiate::Format;

/// The object body, or 404 as kube-apiserver words it.
pub fn get(cache: &Cache, req: &CachedRequest, format: Format) -> Result<Bytes, Status> {
    let name = req.name.as_deref().unwrap_or("");
    let key = crate::object::object_key(req.namespace.as_deref(), name);
    let kind = req.served.kind;
    let Some(view) = cache.store(kind).get(&key) else {
        return Err(Status::not_found(kind.plural(), kind.group(), name));
    };
    Ok(match format {
        Format::Json => {
            let mut out = bytes::BytesMut::new();
            view.body(kind, req.served.version)
                .write_full(req.served, &mut out);
            out.extend_from_slice(b"\n");
            out.freeze()
        }
        Format::Table { api_version } => {
            let include = render::include(req).map_err(Status::bad_request)?;
            let meta = json!({"resourceVersion": view.rv.to_string()});
            let t = sitegrid_apimachinery::table::table(
                kind.plural(),
                api_version,
                meta,
                vec![render::row(req, &view, include, api_version)],
                true,
            );
            let mut out = serde_json::to_vec(&t).unwrap_or_default();
            out.push(b'\n');
            Bytes::from(out)
        }
    })
}
