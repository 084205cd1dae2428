//! What dnsd reads from the API server, and why only that.
//!
//! | resource | query | why |
//! |---|---|---|
//! | nodes | `metadata.name=<node>` | this node's labels: its site for each gridUniqKey (only the metadata is kept) |
//! | statefulsetgrids | all | which grids exist, their gridUniqKey (a grid is not per site) |
//! | servicegrids | all | which Services are headless |
//! | statefulsets | `superedge.io/grid-selector,sitegrid.io/node-unit in (<this node's sites>)` | replicas, serviceName and uid of this site's StatefulSets only |
//! | pods | `statefulset.kubernetes.io/pod-name in (<the pods they want>)` | the addresses of this site's StatefulSet pods only |
//!
//! The last two selectors are derived from the first three (see
//! [`crate::site`]) and follow them: a node moving site, a grid added or a
//! StatefulSet scaled restarts that watch with the new selector. So what a
//! node receives grows with its own site, not with the cluster: no other
//! site's pods or StatefulSets, and no Node but its own.

mod follow;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PartialObjectMeta};
use kube::Client;
use sitegrid_api::{ServiceGrid, StatefulSetGrid};
use tokio::sync::Notify;

pub use follow::{Followed, Query};

use crate::hosts::View;
use crate::metrics::Metrics;
use crate::site;

/// Everything dnsd reads at one moment, owned.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// This node's name.
    pub node: String,
    /// This node's labels (empty if the node does not exist).
    pub node_labels: BTreeMap<String, String>,
    /// Every StatefulSetGrid.
    pub grids: Vec<Arc<StatefulSetGrid>>,
    /// Every ServiceGrid.
    pub service_grids: Vec<Arc<ServiceGrid>>,
    /// This site's StatefulSets.
    pub statefulsets: Vec<Arc<StatefulSet>>,
    /// This site's StatefulSet pods.
    pub pods: Vec<Arc<Pod>>,
}

impl Snapshot {
    /// The snapshot as the renderer's input.
    pub fn view(&self) -> View<'_> {
        View {
            node: &self.node,
            node_labels: &self.node_labels,
            grids: &self.grids,
            service_grids: &self.service_grids,
            statefulsets: &self.statefulsets,
            pods: &self.pods,
        }
    }
}

/// The five watches, and one notification for any change in any of them.
pub struct Watches {
    node_name: String,
    node: Followed<PartialObjectMeta<Node>>,
    grids: Followed<StatefulSetGrid>,
    service_grids: Followed<ServiceGrid>,
    statefulsets: Followed<StatefulSet>,
    pods: Followed<Pod>,
    /// Notified on every change of any store.
    pub changed: Arc<Notify>,
}

impl Watches {
    /// Starts the watches for node `node`; the StatefulSets and pods watch
    /// nothing until [`Watches::aim`] knows the site.
    pub fn start(client: Client, node: &str, metrics: &Arc<Metrics>) -> Self {
        let changed = Arc::new(Notify::new());
        let all = Some(Query::default());
        let own_node = Some(Query {
            labels: None,
            fields: Some(format!("metadata.name={node}")),
        });
        let m = metrics;
        let c = &changed;
        Watches {
            node_name: node.to_owned(),
            node: Followed::start(
                "nodes",
                Api::all(client.clone()),
                own_node,
                c.clone(),
                m.clone(),
            ),
            grids: Followed::start(
                "statefulsetgrids",
                Api::all(client.clone()),
                all.clone(),
                c.clone(),
                m.clone(),
            ),
            service_grids: Followed::start(
                "servicegrids",
                Api::all(client.clone()),
                all,
                c.clone(),
                m.clone(),
            ),
            statefulsets: Followed::start(
                "statefulsets",
                Api::all(client.clone()),
                None,
                c.clone(),
                m.clone(),
            ),
            pods: Followed::start("pods", Api::all(client), None, c.clone(), m.clone()),
            changed,
        }
    }

    /// Points the StatefulSet and pod watches at what the other stores now
    /// say this site needs, and returns a snapshot once every store holds a
    /// complete list for its query (so the snapshot is one consistent
    /// picture), else what is still being listed.
    pub fn aim(&self) -> Result<Snapshot, &'static str> {
        if !(self.node.synced() && self.grids.synced() && self.service_grids.synced()) {
            return Err("listing this node and the grids");
        }
        let node_labels = self
            .node
            .state()
            .first()
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default();
        let grids = self.grids.state();
        let query = site::statefulset_selector(&node_labels, &grids).map(Query::labels);
        self.statefulsets.set_query(query);
        if !self.statefulsets.synced() {
            return Err("listing this site's StatefulSets");
        }
        let statefulsets = self.statefulsets.state();
        let sets = site::local_sets(&node_labels, &grids, &statefulsets);
        self.pods
            .set_query(site::pod_selector(&sets).map(Query::labels));
        if !self.pods.synced() {
            return Err("listing this site's pods");
        }
        Ok(Snapshot {
            node: self.node_name.clone(),
            node_labels,
            grids,
            service_grids: self.service_grids.state(),
            statefulsets,
            pods: self.pods.state(),
        })
    }

    /// Whether this node exists (only meaningful once listed).
    pub fn node_exists(&self) -> bool {
        !self.node.state().is_empty()
    }
}
