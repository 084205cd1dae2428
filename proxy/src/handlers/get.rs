//! GET of one object from the cache.

use bytes::{Bytes, BytesMut};
use serde_json::json;
use sitegrid_apimachinery::Status;

use super::{
    metadata,
    request::{CachedRequest, Format},
    table,
};
use sitegrid_cache::{object_key, proto, Cache};

/// The object body, or 404 as kube-apiserver words it.
pub fn get(cache: &Cache, req: &CachedRequest, name: &str) -> Result<Bytes, Status> {
    let served = req.served;
    let kind = req.served.kind;
    let key = object_key(req.namespace.as_deref(), name);
    let Some(view) = cache.store(kind).get(&key) else {
        return Err(Status::not_found(kind.plural(), kind.group(), name));
    };
    Ok(match req.format {
        Format::Json => {
            let mut out = BytesMut::new();
            cache.body(&view, served).write_full(served, &mut out);
            out.extend_from_slice(b"\n");
            out.freeze()
        }
        Format::Protobuf => {
            let message = cache
                .message(&view, served)
                .map_err(|e| Status::internal_error(e.to_string()))?;
            proto::object(served, &message)
        }
        Format::Metadata { list: true } => return Err(metadata::not_a_list(kind)),
        Format::Metadata { list: false } => {
            let mut out = serde_json::to_vec(&metadata::partial(cache, &view, served))
                .map_err(|e| Status::internal_error(e.to_string()))?;
            out.push(b'\n');
            Bytes::from(out)
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
