//! Whole lists encoded once per version, shared by the LISTs that ask for
//! them until their kind's next commit.
//!
//! A list without a page limit is the same bytes for every client that asks
//! the same question (kind and version, scope, selectors, wire format)
//! between two commits of its kind. Clients ask it together: the
//! kube-proxies and node proxies of a site relist at once when their proxy
//! restarts or their link comes back, every informer starts with one. The
//! first LIST of a question at a version is sent as it is made, a chunk at
//! a time (most LISTs after a change are the only one of their version);
//! the second makes it whole and keeps it, the LISTs asking meanwhile wait
//! for it, the later ones take it as it is, and all send the same chunks. A
//! commit drops them under the lock that moves the kind's version, so a
//! list is never sent for a version it does not show, and a changing kind
//! holds none for long.
//!
//! What it costs is the lists themselves, held until the next commit: at
//! most [`MAX_LISTS`] questions per kind and about [`MAX_BYTES`] of lists
//! (past either, a question is not noted, and its LISTs are each sent as
//! they are made); and the second LIST of a question, which sends its list
//! only once it is made whole.

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
    /// The list for `key` from the second time it is asked at this
    /// version; `None` the first time (noted when there is room: without
    /// it, every time).
    pub(crate) fn get_or_add(&mut self, key: ListKey) -> Option<SharedList> {
        if let Some((_, list)) = self.lists.iter().find(|(k, _)| *k == key) {
            return Some(list.clone());
        }
        if self.lists.len() < MAX_LISTS && self.bytes() < MAX_BYTES {
            self.lists.push((key, SharedList::default()));
        }
        None
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

    /// The list shared from the second time `key` is asked.
    fn shared(lists: &mut EncodedLists, key: ListKey) -> SharedList {
        lists.get_or_add(key.clone());
        lists.get_or_add(key).expect("asked twice")
    }

    #[test]
    fn a_list_is_shared_from_the_second_time_it_is_asked() {
        let mut lists = EncodedLists::default();
        assert!(
            lists.get_or_add(key("a")).is_none(),
            "the first is made for its own LIST"
        );
        let a = lists.get_or_add(key("a")).unwrap();
        assert!(Arc::ptr_eq(&a, &lists.get_or_add(key("a")).unwrap()));
        assert!(lists.get_or_add(key("b")).is_none());
        assert!(!Arc::ptr_eq(&a, &lists.get_or_add(key("b")).unwrap()));
    }

    #[test]
    fn past_the_bytes_a_kind_keeps_a_list_is_sent_as_it_is_made() {
        let mut lists = EncodedLists::default();
        let big = shared(&mut lists, key("big"));
        big.set(vec![Bytes::from(vec![b' '; MAX_BYTES])].into())
            .unwrap();
        assert!(lists.get_or_add(key("next")).is_none());
        assert!(lists.get_or_add(key("next")).is_none(), "not noted");
        lists.clear();
        assert_eq!(lists.bytes(), 0);
        let again = shared(&mut lists, key("next"));
        assert!(Arc::ptr_eq(&again, &lists.get_or_add(key("next")).unwrap()));
    }

    #[test]
    fn no_more_than_max_lists_are_noted() {
        let mut lists = EncodedLists::default();
        for i in 0..MAX_LISTS {
            lists.get_or_add(key(&i.to_string()));
        }
        assert!(lists.get_or_add(key("extra")).is_none());
        assert!(lists.get_or_add(key("extra")).is_none());
        assert!(lists.get_or_add(key("0")).is_some());
        assert_eq!(lists.lists.len(), MAX_LISTS);
    }
}
