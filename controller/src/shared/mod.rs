//! What the grid, site-manager and multi-cluster controllers share, and
//! nothing of any one of them: who they write as ([`FIELD_MANAGER`]), the
//! grid kinds they handle alike ([`GridKind`]), how they set a finalizer
//! ([`finalizers_with`]), why a reconcile fails
//! ([`Error`]), when a failed reconcile or watch is tried again ([`retry`],
//! [`trigger`]), and times as the API server writes them ([`time`]).
//!
//! The controllers import this and none imports another through it:
//! [`crate::run`] alone wires them together.

mod error;
pub mod retry;
pub mod time;
pub mod trigger;

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use error::Error;

/// The field manager of every write the controller makes, and the name its
/// events are reported under.
pub const FIELD_MANAGER: &str = "sitegrid-controller";

/// `current` finalizers with `finalizer` present or not, the others kept in
/// their order: the list a guarded merge patch of `metadata.finalizers` sets.
pub fn finalizers_with(current: &[String], finalizer: &str, present: bool) -> Vec<String> {
    let others = current.iter().filter(|f| *f != finalizer).cloned();
    others
        .chain(present.then(|| finalizer.to_owned()))
        .collect()
}

/// What a grid kind needs to be reconciled, distributed and pulled alike:
/// a namespaced resource read and written as JSON (all three grid kinds
/// are; so are their workloads and Services).
pub trait GridKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> GridKind for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finalizer_is_added_last_or_removed_and_the_others_keep_their_order() {
        let current = ["a".to_owned(), "ours".to_owned(), "b".to_owned()];
        assert_eq!(finalizers_with(&current, "ours", true), ["a", "b", "ours"]);
        assert_eq!(finalizers_with(&current, "ours", false), ["a", "b"]);
        assert_eq!(finalizers_with(&[], "ours", true), ["ours"]);
    }
}
