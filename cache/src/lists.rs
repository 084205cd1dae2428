//! Whole lists encoded once per version, shared by the LISTs that ask for
//! them until their kind's next commit.
//!
//! A list without a page limit is the same bytes for every client that asks
//! the same question (kind and version, scope, selectors, wire format)
//! between two commits of its kind. Clients ask it together: the
//! kube-proxies and node proxies of a site relist at once when their proxy
//! restarts or their link comes back, every informer starts with one. Each
//! such list is encoded once, by the first LIST to ask; the LISTs asking
//! while it is being made wait for it, the later ones take it as it is, and
//! all send the same chunks. A commit drops them under the lock that moves
//! the kind's version, so a list is never sent for a version it does not
//! show, and a changing kind holds none for long.
//!
//! What it costs is the lists themselves, held until the next commit: at
//! most [`MAX_LISTS`] per kind and about [`MAX_BYTES`] of them (the list
//! that crosses it is sent, not kept).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OnceCell;

use super::{Served, Wire};

/// Distinct lists kept per kind at once.
pub const MAX_LISTS: usize = 32;
/// About how many bytes of lists a kind keeps at once.
pub const MAX_BYTES: usize = 16 << 20;

/// Which list: everything that decides its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListKey {
    /// The kind and the version it is served in.
    pub served: Served,
    /// Its wire format.
    pub wire: Wire,
    /// Its scope: `ns/`, or `""` for all namespaces.
    pub prefix: String,
    /// Its label selector, as the client wrote it.
    pub label_selector: String,
    /// Its field selector, as the client wrote it.
    pub field_selector: String,
}

/// A whole list's bytes, in the chunks it is sent in.
pub type ListChunks = Arc<[Bytes]>;

/// A list being made or made: the first LIST to find it empty makes it
/// (`OnceCell::get_or_try_init`), the others wait for it or take it.
pub type SharedList = Arc<OnceCell<ListChunks>>;

/// A kind's shared lists, for its current version only.
#[derive(Default)]
pub(crate) struct EncodedLists {
    lists: Vec<(ListKey, SharedList)>,
}

impl EncodedLists {
    /// The list for `key`, kept for the LISTs after this one when there is
    /// room; a list of its own (made for this LIST and those waiting with
    /// it, then dropped) when there is not.
    pub(crate) fn get_or_add(&mut self, key: ListKey) -> SharedList {
        if let Some((_, list)) = self.lists.iter().find(|(k, _)| *k == key) {
            return list.clone();
        }
        let list = SharedList::default();
        if self.lists.len() < MAX_LISTS && self.bytes() < MAX_BYTES {
            self.lists.push((key, list.clone()));
        }
        list
    }

    /// The bytes of the lists made so far.
    pub(crate) fn bytes(&self) -> usize {
        self.lists
            .iter()
            .filter_map(|(_, list)| list.get())
            .flat_map(|chunks| chunks.iter())
            .map(Bytes::len)
            .sum()
    }

    /// Drops them all (the kind's version moved); a LIST still sending one
    /// keeps its own reference until it is sent.
    pub(crate) fn clear(&mut self) -> Vec<(ListKey, SharedList)> {
        std::mem::take(&mut self.lists)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiVersion, ResourceKind};

    fn key(ns: &str) -> ListKey {
        ListKey {
            served: Served {
                kind: ResourceKind::EndpointSlices,
                version: ApiVersion::V1,
            },
            wire: Wire::Json,
            prefix: format!("{ns}/"),
            label_selector: String::new(),
            field_selector: String::new(),
        }
    }

    #[test]
    fn the_same_list_is_shared_and_another_is_not() {
        let mut lists = EncodedLists::default();
        let a = lists.get_or_add(key("a"));
        assert!(Arc::ptr_eq(&a, &lists.get_or_add(key("a"))));
        assert!(!Arc::ptr_eq(&a, &lists.get_or_add(key("b"))));
    }

    #[test]
    fn past_the_bytes_a_kind_keeps_a_list_is_made_for_its_lists_alone() {
        let mut lists = EncodedLists::default();
        let big = lists.get_or_add(key("big"));
        big.set(vec![Bytes::from(vec![b' '; MAX_BYTES])].into())
            .unwrap();
        let next = lists.get_or_add(key("next"));
        assert!(
            !Arc::ptr_eq(&next, &lists.get_or_add(key("next"))),
            "not kept: the next LIST makes its own"
        );
        lists.clear();
        assert_eq!(lists.bytes(), 0);
        let again = lists.get_or_add(key("next"));
        assert!(Arc::ptr_eq(&again, &lists.get_or_add(key("next"))));
    }

    #[test]
    fn no_more_than_max_lists_are_kept() {
        let mut lists = EncodedLists::default();
        for i in 0..MAX_LISTS {
            lists.get_or_add(key(&i.to_string()));
        }
        let extra = lists.get_or_add(key("extra"));
        assert!(!Arc::ptr_eq(&extra, &lists.get_or_add(key("extra"))));
        assert_eq!(lists.lists.len(), MAX_LISTS);
    }
}
