//! A grid's sites, from node labels.
//!
//! A site of a grid exists while at least one node carries a non-empty value
//! of the grid's `gridUniqKey` label; that value is its [`SiteName`]. The
//! controller keeps a metadata-only reflector of nodes; these functions read
//! it. (Sites as resources, site-manager's NodeUnits, are
//! [`crate::site_manager`]'s.)

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use sitegrid_api::keys::{GridUniqKey, SiteName};

/// The sites of `key`: each distinct non-empty value of that label over `nodes`.
pub fn sites_of<'a>(
    key: &GridUniqKey,
    nodes: impl IntoIterator<Item = Option<&'a BTreeMap<String, String>>>,
) -> BTreeSet<SiteName> {
    nodes
        .into_iter()
        .flatten()
        .filter_map(|labels| labels.get(key.as_str()))
        .filter(|value| !value.is_empty())
        .map(|value| SiteName(value.clone()))
        .collect()
}

/// A fingerprint of which nodes exist and what labels they carry.
///
/// Node objects change often (status, heartbeats, images) while sites change
/// rarely; the controller re-reconciles every grid only when this value
/// changes, i.e. on a node added, removed or relabelled.
pub fn label_fingerprint<'a>(
    nodes: impl IntoIterator<Item = (&'a str, Option<&'a BTreeMap<String, String>>)>,
) -> u64 {
    let mut sorted: Vec<_> = nodes.into_iter().collect();
    sorted.sort_unstable_by_key(|(name, _)| *name);
    let mut hasher = DefaultHasher::new();
    for (name, labels) in sorted {
        name.hash(&mut hasher);
        labels.hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::labels;

    #[test]
    fn sites_are_distinct_non_empty_values_of_the_key() {
        let nodes = [
            labels(&[("location", "beijing")]),
            labels(&[("location", "beijing"), ("zone", "a")]),
            labels(&[("location", "guangzhou")]),
            labels(&[("location", "")]),
            labels(&[("zone", "b")]),
        ];
        let got = sites_of(
            &GridUniqKey::from("location"),
            nodes.iter().map(Some).chain([None]),
        );
        let want: BTreeSet<SiteName> = ["beijing", "guangzhou"].map(SiteName::from).into();
        assert_eq!(got, want);
        assert_eq!(
            sites_of(&GridUniqKey::from("zone"), nodes.iter().map(Some)),
            ["a", "b"].map(SiteName::from).into()
        );
    }

    #[test]
    fn fingerprint_sees_relabel_add_and_remove_but_not_order() {
        let a = labels(&[("location", "beijing")]);
        let b = labels(&[("location", "guangzhou")]);
        let base = label_fingerprint([("n1", Some(&a)), ("n2", Some(&b))]);
        assert_eq!(
            base,
            label_fingerprint([("n2", Some(&b)), ("n1", Some(&a))])
        );
        assert_ne!(
            base,
            label_fingerprint([("n1", Some(&a)), ("n2", Some(&a))])
        );
        assert_ne!(base, label_fingerprint([("n1", Some(&a))]));
        assert_ne!(
            base,
            label_fingerprint([("n1", Some(&a)), ("n2", Some(&b)), ("n3", None)])
        );
    }
}
