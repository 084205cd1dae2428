//! Upstream objects the writer cannot take in: metadata that is not
//! `ObjectMeta`, or a body that does not decode as its kind (`"subsets": 5`,
//! a port number sent as a string). Serving one would break every client
//! that decodes the list it is in (client-go refuses the whole list), so it
//! is skipped: the last good version of that object, if any, stays served,
//! every other object is taken in as usual, and it is counted
//! (`upstream_objects_skipped_total`) and logged once per object version.

use std::{collections::HashMap, sync::Arc};

use serde_json::Value;
use tracing::{debug, info, warn};

use super::Writer;
use crate::{
    kind::{PerKind, ResourceKind},
    UpstreamBody, UpstreamObject,
};

/// The objects skipped so far, by key, with the resourceVersion last logged:
/// a relist that brings the same bad object again is not logged again.
#[derive(Default)]
pub(super) struct Skipped(PerKind<HashMap<String, Box<str>>>);

impl Writer {
    /// Whether `obj` can be served as a `kind`, with its value when reading
    /// it made one; otherwise it was counted and logged, and must be skipped.
    pub(super) fn checked(
        &mut self,
        kind: ResourceKind,
        obj: &UpstreamObject,
    ) -> Option<Option<Arc<Value>>> {
        match self.readable(kind, obj) {
            Ok(value) => Some(value),
            Err(why) => {
                self.skip(kind, obj, &why);
                None
            }
        }
    }

    /// Whether `obj` can be served as a `kind` (with its value, when reading
    /// it made one), or why not.
    fn readable(
        &self,
        kind: ResourceKind,
        obj: &UpstreamObject,
    ) -> Result<Option<Arc<Value>>, String> {
        if let Some(why) = &obj.invalid {
            return Err(format!("metadata: {why}"));
        }
        if obj.metadata.name.as_deref().unwrap_or("").is_empty() {
            return Err("no metadata.name".to_owned());
        }
        let raw = match &obj.body {
            UpstreamBody::Json(raw) => raw,
            // Written from its kind's typed message: every field has a
            // place in the typed struct, with its type.
            UpstreamBody::Protobuf { value, .. } => return Ok(Some(value.clone())),
            UpstreamBody::ProtobufText(_)
            | UpstreamBody::ProtobufSlice { .. }
            | UpstreamBody::ProtobufListed(_) => return Ok(None),
            UpstreamBody::UnreadableProtobuf => return Err("unreadable protobuf".to_owned()),
        };
        let value: Value = serde_json::from_str(raw.get()).map_err(|e| e.to_string())?;
        // Read with the typed (k8s-openapi) struct the protobuf encoder
        // uses, as every client will: what it refuses, they would. What it
        // does not know, protobuf would drop.
        let unknown = kind.unknown_fields(&value).map_err(|e| e.to_string())?;
        if !unknown.is_empty() {
            self.cache.protobuf_lossy(kind, &obj.key(), &unknown);
        }
        Ok(Some(Arc::new(value)))
    }

    /// Counts and (once per object version) logs that `obj` was skipped.
    pub(super) fn skip(&mut self, kind: ResourceKind, obj: &UpstreamObject, why: &str) {
        self.cache.metrics().object_skipped(kind);
        let (key, rv) = (obj.key(), obj.upstream_rv());
        let before = self.skipped.0[kind].insert(key.clone(), rv.into());
        if before.as_deref() == Some(rv) {
            debug!(resource = %kind, %key, rv, reason = why, "upstream object still unreadable; skipped");
        } else {
            warn!(resource = %kind, %key, rv, reason = why, "upstream object does not decode as its kind; skipped (its last good version, if any, stays served)");
        }
    }

    /// `key` arrived readable or was deleted: it is no longer skipped.
    pub(super) fn readable_again(&mut self, kind: ResourceKind, key: &str) {
        if self.skipped.0[kind].remove(key).is_some() {
            info!(resource = %kind, %key, "upstream object readable again");
        }
    }
}
