//! The hosts file: which records this node's site gets, and their text
//! (pure functions, tested by value).
//!
//! - `{grid}-{i}.{serviceName}.{ns}.svc.{domain}` → the IPs of pod
//!   `{grid}-{unit}-{i}` of the local site, for every pod of the local
//!   StatefulSets that has an IP and has not finished, ready or not (as
//!   SuperEdge's statefulset-grid-daemon did);
//! - `{service}.{ns}.svc.{domain}` for a ServiceGrid whose template is
//!   headless (`clusterIP: None`) → the local site's ready pods of the
//!   StatefulSets governed by that Service and selected by it (all of them
//!   with `publishNotReadyAddresses`), so a client that looks the Service up
//!   stays in its site too. With no such pod, the name is left out and CoreDNS
//!   falls through to the cluster-wide answer.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use sitegrid_api::names;
use sitegrid_api::{ServiceGrid, StatefulSetGrid};

use crate::domain::{fits_dns, ClusterDomain};
use crate::site::{self, LocalSet};

#[cfg(test)]
mod tests;

/// What the records are computed from: this node and what the API server
/// holds (only this site's StatefulSets and pods need be there).
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// This node's name (named in the file's header).
    pub node: &'a str,
    /// This node's labels: its site for each gridUniqKey.
    pub node_labels: &'a std::collections::BTreeMap<String, String>,
    /// Every StatefulSetGrid.
    pub grids: &'a [Arc<StatefulSetGrid>],
    /// Every ServiceGrid.
    pub service_grids: &'a [Arc<ServiceGrid>],
    /// StatefulSets (at least the local site's).
    pub statefulsets: &'a [Arc<StatefulSet>],
    /// Pods (at least the local StatefulSets').
    pub pods: &'a [Arc<Pod>],
}

/// One line of the file: a name and one of its addresses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    /// The fully qualified name, without the trailing dot.
    pub name: String,
    /// An address (IPv4 or IPv6).
    pub ip: IpAddr,
}

/// The records of a view, in file order (by name, then address).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hosts {
    /// The records.
    pub records: BTreeSet<Record>,
    /// Names left out because DNS cannot carry them (a label over 63
    /// characters, or over 253 in all).
    pub skipped: BTreeSet<String>,
}

impl Hosts {
    /// How many distinct names the file answers.
    pub fn names(&self) -> usize {
        let mut names: Vec<&str> = self.records.iter().map(|r| r.name.as_str()).collect();
        names.dedup();
        names.len()
    }

    /// The file's text: a header naming the node, then one `IP NAME` line per record.
    pub fn render(&self, node: &str) -> String {
        let mut out = format!(
            "# sitegrid-dnsd, node {node}: the names of this site's StatefulSetGrid pods and headless ServiceGrids.\n\
             # Replaced whole whenever they change; edits are lost.\n"
        );
        for r in &self.records {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "{} {}", r.ip, r.name);
        }
        out
    }

    fn add(&mut self, name: String, ips: &BTreeSet<IpAddr>) {
        if !fits_dns(&name) {
            self.skipped.insert(name);
            return;
        }
        for ip in ips {
            self.records.insert(Record {
                name: name.clone(),
                ip: *ip,
            });
        }
    }
}

/// The hosts file's text for `view`.
pub fn render(view: &View<'_>, domain: &ClusterDomain) -> String {
    hosts(view, domain).render(view.node)
}

/// The records of `view`.
pub fn hosts(view: &View<'_>, domain: &ClusterDomain) -> Hosts {
    let sets = site::local_sets(view.node_labels, view.grids, view.statefulsets);
    let pods: HashMap<(&str, &str), &Pod> = view
        .pods
        .iter()
        .filter_map(|p| {
            Some((
                (
                    p.metadata.namespace.as_deref()?,
                    p.metadata.name.as_deref()?,
                ),
                &**p,
            ))
        })
        .collect();
    let mut out = Hosts::default();
    for set in &sets {
        let Some(service) = set.service_name() else {
            continue;
        };
        for (i, pod) in pods_of(set, &pods) {
            let name = format!("{}-{i}.{service}.{}.svc.{domain}", set.grid, set.namespace);
            out.add(name, &addresses(pod));
        }
    }
    for grid in view.service_grids {
        headless(grid, &sets, &pods, domain, &mut out);
    }
    out
}

/// The name of a headless ServiceGrid's Service → the local site's pods behind it.
fn headless(
    grid: &ServiceGrid,
    sets: &[LocalSet],
    pods: &HashMap<(&str, &str), &Pod>,
    domain: &ClusterDomain,
    out: &mut Hosts,
) {
    let template = &grid.spec.template;
    let (Some(namespace), Some(grid_name)) = (&grid.metadata.namespace, &grid.metadata.name) else {
        return;
    };
    // A Service without a selector has hand-made endpoints: nothing to say about them.
    let selector = template.selector.clone().unwrap_or_default();
    if template.cluster_ip.as_deref() != Some("None") || selector.is_empty() {
        return;
    }
    let service = names::service_name(grid_name);
    let publish_not_ready = template.publish_not_ready_addresses == Some(true);
    let mut ips = BTreeSet::new();
    for set in sets
        .iter()
        .filter(|s| &s.namespace == namespace && s.service_name() == Some(service.as_str()))
    {
        for (_, pod) in pods_of(set, pods) {
            let labels = pod.metadata.labels.as_ref();
            let selected = selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if selected && (publish_not_ready || serving(pod)) {
                ips.extend(addresses(pod));
            }
        }
    }
    if !ips.is_empty() {
        out.add(format!("{service}.{namespace}.svc.{domain}"), &ips);
    }
}

/// The pods `set` wants that exist, with their ordinals.
fn pods_of<'p>(
    set: &LocalSet,
    pods: &HashMap<(&str, &str), &'p Pod>,
) -> impl Iterator<Item = (u32, &'p Pod)> {
    let found: Vec<(u32, &'p Pod)> = set
        .ordinals()
        .filter_map(|i| {
            let name = format!("{}-{i}", set.name());
            let pod = *pods.get(&(set.namespace.as_str(), name.as_str()))?;
            (set.ordinal_of(pod) == Some(i)).then_some((i, pod))
        })
        .collect();
    found.into_iter()
}

/// The pod's addresses (`status.podIPs`, else `status.podIP`); none once it
/// has finished (phase Succeeded or Failed: its IP may already be reused).
fn addresses(pod: &Pod) -> BTreeSet<IpAddr> {
    let Some(status) = &pod.status else {
        return BTreeSet::new();
    };
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return BTreeSet::new();
    }
    let listed = status.pod_ips.iter().flatten().map(|p| p.ip.as_str());
    listed
        .chain(status.pod_ip.as_deref())
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

/// Ready and not being deleted: what the endpoints controller publishes.
fn serving(pod: &Pod) -> bool {
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && pod.metadata.deletion_timestamp.is_none()
}
