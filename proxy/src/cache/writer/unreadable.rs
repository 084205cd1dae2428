//! Upstream objects the writer cannot take in: metadata that is not
//! `ObjectMeta`, or a body that does not decode as its kind (`"subsets": 5`,
//! a port number sent as a string). Serving one would break every client
//! that decodes the list it is in (client-go refuses the whole list), so it
//! is skipped: the last good version of that object, if any, stays served,
//! every other object is taken in as usual, and it is counted
//! (`upstream_objects_skipped_total`) and logged once per object version.

use std::collections::HashMap;

use sitegrid_apimachinery::protobuf;
use tracing::{debug, info, warn};

use super::Writer;
use crate::{
    cache::kind::{PerKind, ResourceKind, Served},
    upstream::UpstreamObject,
};

/// The objects skipped so far, by key, with the resourceVersion last logged:
/// a relist that brings the same bad object again is not logged again.
#[derive(Default)]
pub(super) struct Skipped(PerKind<HashMap<String, Box<str>>>);

impl Writer {
    /// Why `obj` cannot be served as a `kind`, if it cannot.
    pub(super) fn unreadable(&self, kind: ResourceKind, obj: &UpstreamObject) -> Option<String> {
        if let Some(why) = &obj.invalid {
            return Some(format!("metadata: {why}"));
        }
        if obj.metadata.name.as_deref().unwrap_or("").is_empty() {
            return Some("no metadata.name".to_owned());
        }
        // The protobuf encoder reads the object with its typed (k8s-openapi)
        // struct, as every client will: what it refuses, they would.
        let served = Served {
            kind,
            version: self.cache.native(kind),
        };
        protobuf::message(served.message(), obj.raw.get().as_bytes())
            .err()
            .map(|e| e.to_string())
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
