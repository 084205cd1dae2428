//! GET of one object from the cache.

use bytes::{Bytes, BytesMut};
use serde_json::json;
use sitegrid_apimachinery::Status;

use super::{
    request::{CachedRequest, Format},
    table,
};
use crate::{cache::Cache, upstream::object_key};

/// The object body, or 404 as kube-apiserver words it.
pub fn get(cache: &Cache, req: &CachedRequest, name: &str) -> Result<Bytes, Status> {
    let kind = req.served.kind;
    let key = object_key(req.namespace.as_deref(), name);
    let Some(view) = cache.store(kind).get(&key) else {
        return Err(Status::not_found(kind.plural(), kind.group(), name));
    };
    Ok(match req.format {
        Format::Json => {
            let mut out = BytesMut::new();
            cache
                .body(&view, req.served)
                .write_full(req.served, &mut out);
            out.extend_from_slice(b"\n");
            out.freeze()
        }
        Format::Table {
            api_version,
            include,
        } => {
            let meta = json!({"resourceVersion": view.rv.to_string()});
            table::body(
                cache,
                req,
                std::slice::from_ref(&view),
                meta,
                api_version,
                include,
            )
        }
    })
}
