//! How the writer reacts to each kind: Services and Nodes are served as
//! they are and feed the topology inputs; Endpoints and EndpointSlices are
//! projected through the topology filter ([`crate::cache::topology`]) and
//! recomputed whenever an input they depend on changes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tracing::{debug, warn};

use super::{Batch, Once, Stored, Writer};
use crate::cache::{
    kind::ResourceKind,
    membership::Locality,
    topology::{self, Selection, TopologyKeys},
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
            let before = match &keys {
                Some(k) => self.services.insert(key.as_str().into(), k.clone()),
                None => self.services.remove(key.as_str()),
            };
            if before != keys {
                affected.push(key.clone());
            }
            let view = self.upstream_value(ResourceKind::Services, key, once.as_deref());
            self.emit(ResourceKind::Services, key, view, batch);
        }
        for (key, _) in deleted {
            if self.services.remove(key.as_str()).is_some() {
                affected.push(key.clone());
            }
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
            .values()
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
            .values()
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
            if let Some(svc) = prev.and_then(|p| p.service) {
                self.slices_by_service.unlink(&svc, key);
                services.insert(svc);
            }
            match self.slice(key).and_then(|s| s.service.clone()) {
                Some(svc) => {
                    self.slices_by_service.link(&svc, key);
                    services.insert(svc);
                }
                None => self.project_single_slice(key, batch),
            }
        }
        for (key, old) in deleted {
            if let Some(svc) = &old.service {
                self.slices_by_service.unlink(svc, key);
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
            .cloned()
            .collect();
        for key in &keys {
            self.project_endpoints(key, batch);
        }
        let slices: Vec<(String, Option<String>)> = self.upstream[ResourceKind::EndpointSlices]
            .objects
            .iter()
            .map(|(k, s)| (k.clone(), s.service.clone()))
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
        if let Some(keys) = self.services.get(key) {
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
            .get(service)
            .is_some_and(|keys| !self.covered(keys))
        {
            return;
        }
        let slice_keys = self.slices_by_service.of(service).to_vec();
        let mut values: Vec<(String, serde_json::Value)> = Vec::with_capacity(slice_keys.len());
        for k in slice_keys {
            if let Some(v) = self.upstream_value(ResourceKind::EndpointSlices, &k, None) {
                values.push((k, v));
            }
        }
        if let Some(keys) = self.services.get(service) {
            let refs: Vec<_> = values
                .iter()
                .flat_map(|(_, v)| topology::slice_refs(v))
                .collect();
            let selections = self.selections(keys, &refs);
            for (_, v) in values.iter_mut() {
                topology::project_slice(v, &selections, &self.nodes);
            }
        }
        for (key, value) in values {
            self.emit(ResourceKind::EndpointSlices, &key, Some(value), batch);
        }
    }

    /// A slice without a Service label: served unfiltered.
    fn project_single_slice(&mut self, key: &str, batch: &mut Batch) {
        if !self.topology_ready() {
            return;
        }
        let value = self.upstream_value(ResourceKind::EndpointSlices, key, None);
        self.emit(ResourceKind::EndpointSlices, key, value, batch);
    }
}

/// `ns/service` → the keys of its EndpointSlices, sorted. A Service has one
/// slice or a few: a sorted `Vec` costs one small allocation where a
/// `BTreeSet` took a 280-byte node per Service.
#[derive(Debug, Default)]
pub(super) struct SlicesByService(HashMap<String, Vec<String>>);

impl SlicesByService {
    /// Records that slice `key` belongs to `service`.
    fn link(&mut self, service: &str, key: &str) {
        let keys = match self.0.get_mut(service) {
            Some(keys) => keys,
            None => self.0.entry(service.to_owned()).or_default(),
        };
        if let Err(at) = keys.binary_search_by(|k| k.as_str().cmp(key)) {
            keys.insert(at, key.to_owned());
        }
    }

    /// Forgets that slice `key` belongs to `service` (and the Service, with
    /// its last slice).
    fn unlink(&mut self, service: &str, key: &str) {
        if let Some(keys) = self.0.get_mut(service) {
            if let Ok(at) = keys.binary_search_by(|k| k.as_str().cmp(key)) {
                keys.remove(at);
            }
            if keys.is_empty() {
                self.0.remove(service);
            }
        }
    }

    /// The slices of `service`, in key order.
    fn of(&self, service: &str) -> &[String] {
        self.0.get(service).map(Vec::as_slice).unwrap_or_default()
    }
}

#[cfg(test)]
mod slices_by_service_tests {
    use super::SlicesByService;

    #[test]
    fn keeps_each_services_slices_sorted_and_forgets_emptied_services() {
        let mut links = SlicesByService::default();
        links.link("ns/a", "ns/a-2");
        links.link("ns/a", "ns/a-1");
        links.link("ns/a", "ns/a-2");
        links.link("ns/b", "ns/b-1");
        assert_eq!(links.of("ns/a"), ["ns/a-1", "ns/a-2"]);
        links.unlink("ns/a", "ns/a-1");
        links.unlink("ns/a", "ns/missing");
        assert_eq!(links.of("ns/a"), ["ns/a-2"]);
        links.unlink("ns/a", "ns/a-2");
        assert!(links.of("ns/a").is_empty());
        assert_eq!(links.0.len(), 1, "only ns/b is left");
        assert_eq!(links.of("ns/b"), ["ns/b-1"]);
    }
}
