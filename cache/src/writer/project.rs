//! How the writer reacts to each kind: Services and Nodes are served as
//! they are and feed the topology inputs; Endpoints and EndpointSlices are
//! projected through the topology filter ([`crate::topology`]) and
//! recomputed whenever an input they depend on changes.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use tracing::{debug, warn};

use sitegrid_apimachinery::protobuf::to_json::Decoded;

use super::{Batch, Once, Stored, Writer};
use crate::{
    kind::ResourceKind,
    topology::{self, Selection, TopologyKeys},
    Locality,
};

impl Writer {
    pub(super) fn services_changed(
        &mut self,
        upserted: &[(String, Option<Box<Once>>)],
        deleted: &[(String, Stored)],
        batch: &mut Batch,
    ) {
        let mut affected = Vec::new();
        for (key, once) in upserted {
            let keys = match TopologyKeys::from_annotations(
                once.as_deref().and_then(|o| o.annotations.as_ref()),
            ) {
                Ok(k) => k,
                Err(reason) => {
                    warn!(service = %key, %reason, "ignoring invalid topology annotation; endpoints pass unfiltered");
                    None
                }
            };
            let keys = keys.map(|k| self.shared_keys(k));
            let before = self.services.set_keys(key, keys.clone());
            // A Service made (again) projects its endpoints, which may still
            // hold the views the deleted one left them (below).
            let made = self.current(ResourceKind::Services, key, batch).is_none();
            if before != keys || made {
                affected.push(key.clone());
            }
            let view = self.upstream_value(ResourceKind::Services, key, once.as_deref());
            self.emit(ResourceKind::Services, key, view, batch);
        }
        // A deleted Service's Endpoints and EndpointSlices keep the views
        // they have: its keys stay with its slices until the last one goes
        // ([`ServiceLinks::service_deleted`]). No client routes a Service
        // that is gone, and the controllers delete its endpoints next;
        // projecting them unfiltered in between would send every endpoint of
        // every site to every node once, then again in their DELETED events.
        for (key, _) in deleted {
            self.services.service_deleted(key);
            self.emit(ResourceKind::Services, key, None, batch);
        }
        self.publish_keys();
        for service in affected {
            self.project_endpoints(&service, batch);
            self.project_slices_of(&service, batch);
        }
    }

    pub(super) fn nodes_changed(
        &mut self,
        upserted: &[(String, Option<Box<Once>>)],
        deleted: &[(String, Stored)],
        batch: &mut Batch,
    ) {
        let mut labels_moved = false;
        for (key, once) in upserted {
            let labels = once
                .as_ref()
                .and_then(|o| o.labels.clone())
                .unwrap_or_default();
            if self.nodes.get(key) != Some(&labels) {
                labels_moved |= self.relevant(key, self.nodes.get(key), Some(&labels));
                self.nodes.insert(key.clone(), labels);
            }
            let view = self.upstream_value(ResourceKind::Nodes, key, once.as_deref());
            self.emit(ResourceKind::Nodes, key, view, batch);
        }
        for (key, _) in deleted {
            if let Some(old) = self.nodes.remove(key) {
                labels_moved |= self.relevant(key, Some(&old), None);
            }
            self.emit(ResourceKind::Nodes, key, None, batch);
        }
        self.find_site_nodes();
        if labels_moved {
            debug!("node topology labels changed; recomputing filtered views");
            self.recompute_all(batch);
        }
    }

    /// `keys`, sharing the allocation of the last equal keys read: most
    /// Services of a cluster carry the same annotation, and each would
    /// otherwise keep a copy (three allocations).
    pub(super) fn shared_keys(&mut self, keys: TopologyKeys) -> TopologyKeys {
        match &self.last_keys {
            Some(last) if *last == keys => last.clone(),
            _ => {
                self.last_keys = Some(keys.clone());
                keys
            }
        }
    }

    /// Tells the node membership which label keys the Services name, once
    /// the Services are listed (an empty set too: then it lists the local
    /// node(s) only).
    pub(super) fn publish_keys(&self) {
        if !self.upstream[ResourceKind::Services].synced {
            return;
        }
        let keys: BTreeSet<String> = self
            .services
            .all_keys()
            .flat_map(TopologyKeys::label_keys)
            .map(str::to_owned)
            .collect();
        self.keys.send_if_modified(|cur| {
            let changed = cur.as_ref() != Some(&keys);
            if changed {
                *cur = Some(keys);
            }
            changed
        });
    }

    /// The labels of the node(s) whose view is served.
    fn local_labels(&self) -> Vec<&BTreeMap<String, String>> {
        match &self.locality {
            Locality::Node(name) => self.nodes.get(name).into_iter().collect(),
            Locality::Site(_) => self
                .site_nodes
                .iter()
                .filter_map(|n| self.nodes.get(n))
                .collect(),
        }
    }

    /// Finds a site proxy's local nodes again (the nodes changed).
    pub(super) fn find_site_nodes(&mut self) {
        if let Locality::Site(_) = &self.locality {
            let mut found: Vec<String> = self
                .nodes
                .iter()
                .filter(|(name, labels)| self.locality.is_local(name, labels))
                .map(|(name, _)| name.clone())
                .collect();
            // Deterministic order (the map is a HashMap): same selections, same views.
            found.sort();
            self.site_nodes = found;
        }
    }

    /// The selections of a Service with `keys` and these endpoints: one per
    /// distinct local view (a site's nodes may choose differently); an
    /// endpoint is served when any of them keeps it.
    fn selections(&self, keys: &TopologyKeys, refs: &[topology::EndpointRef]) -> Vec<Selection> {
        let locals = self.local_labels();
        if locals.is_empty() {
            return vec![topology::choose(keys, None, &self.nodes, refs)];
        }
        let mut out: Vec<Selection> = Vec::new();
        for local in locals {
            let s = topology::choose(keys, Some(local), &self.nodes, refs);
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// Whether the nodes the filter needs for `keys` are all here: for each
    /// label key a local node has, the nodes sharing its value. A Service
    /// naming a key no other Service named, or a local node that just moved,
    /// waits (its views stay as they are) until the membership has listed
    /// them, rather than being filtered against half of them.
    pub(super) fn covered(&self, keys: &TopologyKeys) -> bool {
        let Some(covered) = &self.covered else {
            return true;
        };
        let locals = self.local_labels();
        keys.label_keys().all(|k| {
            locals
                .iter()
                .filter_map(|l| l.get(k))
                .all(|v| covered.get(k).is_some_and(|vs| vs.contains(v)))
        })
    }

    /// Whether a node's label change can alter any view: it joins or leaves
    /// the local node(s), or a label some Service's topology keys name
    /// differs (on a local node or any other). Other labels of a local node
    /// (a kubelet's, node-feature-discovery's) select nothing: recomputing
    /// every view for them cost a node proxy a pass over all its slices.
    fn relevant(
        &self,
        node: &str,
        before: Option<&BTreeMap<String, String>>,
        after: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let local = |labels: Option<&BTreeMap<String, String>>| {
            labels.is_some_and(|l| self.locality.is_local(node, l))
        };
        if local(before) != local(after) {
            return true;
        }
        self.services
            .all_keys()
            .flat_map(TopologyKeys::label_keys)
            .any(|k| before.and_then(|l| l.get(k)) != after.and_then(|l| l.get(k)))
    }

    pub(super) fn slices_changed(
        &mut self,
        upserted: &[(String, Option<Box<Once>>)],
        previous: Vec<Option<Stored>>,
        deleted: &[(String, Stored)],
        batch: &mut Batch,
    ) {
        let mut services = BTreeSet::new();
        for ((key, _), prev) in upserted.iter().zip(previous) {
            let now = self.slice(key).and_then(|s| s.service.clone());
            if let Some(svc) = prev.and_then(|p| p.service) {
                // Still its Service's: unlinked, a deleted Service's last
                // slice would take the keys kept for it along, and come back
                // unfiltered (every site's endpoints to this node).
                if now.as_deref() != Some(&*svc) {
                    self.services.unlink(&svc, key);
                }
                services.insert(svc);
            }
            match now {
                Some(svc) => {
                    let shared = self.services.link(&svc, key);
                    if let Some(stored) = self.upstream[ResourceKind::EndpointSlices]
                        .objects
                        .get_mut(key.as_str())
                    {
                        stored.service = Some(shared);
                    }
                    services.insert(svc);
                }
                None => self.project_single_slice(key, batch),
            }
        }
        for (key, old) in deleted {
            if let Some(svc) = &old.service {
                self.services.unlink(svc, key);
            }
            services.extend(old.service.clone());
            self.emit(ResourceKind::EndpointSlices, key, None, batch);
        }
        for svc in services {
            self.project_slices_of(&svc, batch);
        }
    }

    /// Recomputes every filtered view (the local node moved, or a relevant label changed).
    pub(super) fn recompute_all(&mut self, batch: &mut Batch) {
        let keys: Vec<String> = self.upstream[ResourceKind::Endpoints]
            .objects
            .keys()
            .map(|k| k.to_string())
            .collect();
        for key in &keys {
            self.project_endpoints(key, batch);
        }
        let slices: Vec<(String, Option<Arc<str>>)> = self.upstream[ResourceKind::EndpointSlices]
            .objects
            .iter()
            .map(|(k, s)| (k.to_string(), s.service.clone()))
            .collect();
        let mut services = BTreeSet::new();
        for (key, service) in slices {
            match service {
                Some(svc) => {
                    services.insert(svc);
                }
                None => self.project_single_slice(&key, batch),
            }
        }
        for svc in services {
            self.project_slices_of(&svc, batch);
        }
    }

    fn slice(&self, key: &str) -> Option<&Stored> {
        self.upstream[ResourceKind::EndpointSlices].objects.get(key)
    }

    pub(super) fn project_endpoints(&mut self, key: &str, batch: &mut Batch) {
        // Gone upstream: gone from the view, whatever the topology.
        let Some(mut value) = self.upstream_value(ResourceKind::Endpoints, key, None) else {
            self.emit(ResourceKind::Endpoints, key, None, batch);
            return;
        };
        if !self.topology_ready() {
            return;
        }
        self.local.apply_endpoints(&mut value);
        if let Some(keys) = self.services.keys(key) {
            if !self.covered(keys) {
                return;
            }
            let refs = topology::endpoints_refs(&value);
            let selections = self.selections(keys, &refs);
            topology::project_endpoints(&mut value, &selections, &self.nodes);
        }
        self.emit(ResourceKind::Endpoints, key, Some(value), batch);
    }

    /// Projects every EndpointSlice of one Service (the selection is chosen
    /// across all of them).
    fn project_slices_of(&mut self, service: &str, batch: &mut Batch) {
        if !self.topology_ready() {
            return;
        }
        if self
            .services
            .keys(service)
            .is_some_and(|keys| !self.covered(keys))
        {
            return;
        }
        let slice_keys: Vec<Box<str>> = self.services.slices_of(service).map(Box::from).collect();
        // A slice read from protobuf stays a message until its endpoints are
        // chosen, and only those kept are written as JSON (a node's proxy
        // keeps its site's, few of a Service spread over many sites).
        let mut slices: Vec<(Box<str>, Decoded)> = Vec::with_capacity(slice_keys.len());
        for k in slice_keys {
            let slice = match self.upstream_slice(&k) {
                Some(Decoded::Slice(m)) if !self.local.concerns(&m) => Decoded::Slice(m),
                // The node's reports rewrite their pods' endpoints (in JSON).
                Some(s) => {
                    let mut v = s.into_value();
                    self.local.apply_slice(&mut v);
                    Decoded::Value(v)
                }
                None => continue,
            };
            slices.push((k, slice));
        }
        let selections = self.services.keys(service).map(|keys| {
            let refs: Vec<_> = slices
                .iter()
                .flat_map(|(_, s)| topology::decoded_slice_refs(s))
                .collect();
            self.selections(keys, &refs)
        });
        for (key, slice) in slices {
            let value = match &selections {
                Some(selections) => topology::project_decoded_slice(slice, selections, &self.nodes),
                None => slice.into_value(),
            };
            self.emit(ResourceKind::EndpointSlices, &key, Some(value), batch);
        }
    }

    /// A slice without a Service label: served unfiltered.
    fn project_single_slice(&mut self, key: &str, batch: &mut Batch) {
        if !self.topology_ready() {
            return;
        }
        let mut value = self.upstream_value(ResourceKind::EndpointSlices, key, None);
        if let Some(v) = &mut value {
            self.local.apply_slice(v);
        }
        self.emit(ResourceKind::EndpointSlices, key, value, batch);
    }
}

/// What the writer knows per `ns/service`: its valid `topologyKeys` and
/// the keys of its EndpointSlices, sorted, in one entry whose name the
/// slices' [`Stored::service`] share. A Service has one slice or a few, so
/// they are one string ([`SliceKeys`]); a Service with neither keys nor
/// slices has no entry. A B-tree, kept with full nodes after each
/// list ([`ServiceLinks::compact`]): a hash map of 1,000 entries has 2,048
/// buckets.
#[derive(Debug, Default)]
pub(super) struct ServiceLinks(BTreeMap<Arc<str>, Links>);

#[derive(Debug, Default)]
struct Links {
    keys: Option<TopologyKeys>,
    slices: SliceKeys,
    /// The Service is gone; `keys` are the last it had, kept for its
    /// remaining slices.
    deleted: bool,
}

impl ServiceLinks {
    /// The topology keys of `service`, if it has valid ones.
    pub(super) fn keys(&self, service: &str) -> Option<&TopologyKeys> {
        self.0.get(service)?.keys.as_ref()
    }

    /// Every Service's topology keys.
    pub(super) fn all_keys(&self) -> impl Iterator<Item = &TopologyKeys> {
        self.0.values().filter_map(|l| l.keys.as_ref())
    }

    /// Sets (or clears) the topology keys of `service`, which exists;
    /// returns the previous ones (a deleted Service's kept ones included).
    pub(super) fn set_keys(
        &mut self,
        service: &str,
        keys: Option<TopologyKeys>,
    ) -> Option<TopologyKeys> {
        match keys {
            Some(keys) => {
                let links = self.entry(service);
                links.deleted = false;
                links.keys.replace(keys)
            }
            None => {
                let links = self.0.get_mut(service)?;
                links.deleted = false;
                let before = links.keys.take();
                self.forget_if_empty(service);
                before
            }
        }
    }

    /// `service` is gone: its keys stay while any of its slices remains (so
    /// their views stay as they are), and go with the last one.
    pub(super) fn service_deleted(&mut self, service: &str) {
        if let Some(links) = self.0.get_mut(service) {
            links.deleted = true;
            self.forget_if_empty(service);
        }
    }

    /// Records that slice `key` belongs to `service`; returns the name to
    /// keep with the slice.
    pub(super) fn link(&mut self, service: &str, key: &str) -> Arc<str> {
        let name = self.shared_name(service);
        let links = self.0.get_mut(&*name).expect("shared_name keeps an entry");
        links.slices.insert(key);
        name
    }

    /// Forgets that slice `key` belongs to `service` (and the Service, when
    /// nothing else is known of it).
    pub(super) fn unlink(&mut self, service: &str, key: &str) {
        if let Some(links) = self.0.get_mut(service) {
            links.slices.remove(key);
            self.forget_if_empty(service);
        }
    }

    /// The slices of `service`, in key order.
    pub(super) fn slices_of(&self, service: &str) -> impl Iterator<Item = &str> {
        self.0
            .get(service)
            .into_iter()
            .flat_map(|l| l.slices.iter())
    }

    /// Rebuilds the map with full nodes (after a list filled it in order).
    pub(super) fn compact(&mut self) {
        self.0 = super::packed_full(std::mem::take(&mut self.0));
    }

    fn entry(&mut self, service: &str) -> &mut Links {
        let name = self.shared_name(service);
        self.0.get_mut(&*name).expect("shared_name keeps an entry")
    }

    /// The entry's name for `service`, making the entry if there is none.
    fn shared_name(&mut self, service: &str) -> Arc<str> {
        match self.0.get_key_value(service) {
            Some((name, _)) => name.clone(),
            None => {
                let name: Arc<str> = service.into();
                self.0.insert(name.clone(), Links::default());
                name
            }
        }
    }

    fn forget_if_empty(&mut self, service: &str) {
        if self
            .0
            .get(service)
            .is_some_and(|l| (l.keys.is_none() || l.deleted) && l.slices.is_empty())
        {
            self.0.remove(service);
        }
    }
}

/// A Service's EndpointSlice keys, sorted, in one allocation: each joined
/// to the next by a newline, which no key holds (kube-apiserver refuses
/// one in a namespace or a name). A boxed slice of boxed keys took two
/// allocations for a Service's one slice, and a pointer more per key.
#[derive(Debug, Default)]
struct SliceKeys(Box<str>);

impl SliceKeys {
    const JOIN: &str = "\n";

    fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.split(Self::JOIN).filter(|k| !k.is_empty())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `key` where it sorts, unless it is there.
    fn insert(&mut self, key: &str) {
        debug_assert!(!key.contains(Self::JOIN), "a key holds no newline");
        let mut keys: Vec<&str> = self.iter().collect();
        if let Err(at) = keys.binary_search(&key) {
            keys.insert(at, key);
            self.0 = keys.join(Self::JOIN).into_boxed_str();
        }
    }

    /// Takes `key` out, if it is there.
    fn remove(&mut self, key: &str) {
        let mut keys: Vec<&str> = self.iter().collect();
        if let Ok(at) = keys.binary_search(&key) {
            keys.remove(at);
            self.0 = keys.join(Self::JOIN).into_boxed_str();
        }
    }
}

#[cfg(test)]
mod service_links_tests {
    use std::sync::Arc;

    use super::ServiceLinks;
    use crate::topology::TopologyKeys;

    fn keys(k: &str) -> TopologyKeys {
        TopologyKeys(Arc::from(vec![k.to_owned()]))
    }

    #[test]
    fn keeps_each_services_slices_sorted_and_forgets_emptied_services() {
        let mut links = ServiceLinks::default();
        links.link("ns/a", "ns/a-2");
        links.link("ns/a", "ns/a-1");
        links.link("ns/a", "ns/a-2");
        links.link("ns/b", "ns/b-1");
        assert_eq!(
            links.slices_of("ns/a").collect::<Vec<_>>(),
            ["ns/a-1", "ns/a-2"]
        );
        links.unlink("ns/a", "ns/a-1");
        links.unlink("ns/a", "ns/missing");
        assert_eq!(links.slices_of("ns/a").collect::<Vec<_>>(), ["ns/a-2"]);
        links.unlink("ns/a", "ns/a-2");
        assert_eq!(links.slices_of("ns/a").count(), 0);
        assert_eq!(links.0.len(), 1, "only ns/b is left");
        assert_eq!(links.slices_of("ns/b").collect::<Vec<_>>(), ["ns/b-1"]);
    }

    #[test]
    fn a_services_keys_and_slices_share_its_entry_until_both_are_gone() {
        let mut links = ServiceLinks::default();
        assert_eq!(links.set_keys("ns/a", Some(keys("zone"))), None);
        let name = links.link("ns/a", "ns/a-1");
        assert_eq!(&*name, "ns/a");
        assert!(
            Arc::ptr_eq(&name, &links.link("ns/a", "ns/a-2")),
            "one copy of the name"
        );
        assert_eq!(
            links.set_keys("ns/a", Some(keys("site"))),
            Some(keys("zone"))
        );
        assert_eq!(links.keys("ns/a"), Some(&keys("site")));
        assert_eq!(links.all_keys().count(), 1);
        // The keys go: the slices stay.
        assert_eq!(links.set_keys("ns/a", None), Some(keys("site")));
        assert_eq!(links.keys("ns/a"), None);
        assert_eq!(links.slices_of("ns/a").count(), 2);
        links.unlink("ns/a", "ns/a-1");
        links.unlink("ns/a", "ns/a-2");
        assert_eq!(links.0.len(), 0, "nothing is left of ns/a");
        // Keys alone keep an entry too.
        links.set_keys("ns/b", Some(keys("zone")));
        links.unlink("ns/b", "ns/b-1");
        assert_eq!(links.keys("ns/b"), Some(&keys("zone")));
        assert_eq!(links.set_keys("ns/c", None), None);
        assert_eq!(links.0.len(), 1);
    }

    #[test]
    fn a_deleted_services_keys_stay_with_its_slices_and_go_with_the_last() {
        let mut links = ServiceLinks::default();
        links.set_keys("ns/a", Some(keys("zone")));
        links.link("ns/a", "ns/a-1");
        links.link("ns/a", "ns/a-2");
        links.service_deleted("ns/a");
        assert_eq!(links.keys("ns/a"), Some(&keys("zone")));
        links.unlink("ns/a", "ns/a-1");
        assert_eq!(links.keys("ns/a"), Some(&keys("zone")));
        links.unlink("ns/a", "ns/a-2");
        assert_eq!(links.0.len(), 0, "nothing is left of ns/a");
        // Without slices nothing is kept.
        links.set_keys("ns/b", Some(keys("zone")));
        links.service_deleted("ns/b");
        assert_eq!(links.0.len(), 0);
        // Made again: its keys are its own again, kept after the last slice.
        links.set_keys("ns/c", Some(keys("zone")));
        links.link("ns/c", "ns/c-1");
        links.service_deleted("ns/c");
        assert_eq!(
            links.set_keys("ns/c", Some(keys("site"))),
            Some(keys("zone"))
        );
        links.unlink("ns/c", "ns/c-1");
        assert_eq!(links.keys("ns/c"), Some(&keys("site")));
    }
}
