//! Whose view a proxy serves: one node's, or a whole site's.

use std::{collections::BTreeMap, fmt};

use sitegrid_apimachinery::selector::LabelSelector;

/// Whose view a proxy serves.
#[derive(Debug, Clone)]
pub enum Locality {
    /// One node's (kube-proxy's proxy on that node).
    Node(String),
    /// Every node the selector matches, as one site: the union of their views
    /// (a site proxy, the upstream of the node proxies of its site).
    Site(LabelSelector),
}

impl Locality {
    /// Whether a node with `name` and `labels` is one this proxy serves.
    pub fn is_local(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Locality::Node(n) => n == name,
            Locality::Site(selector) => selector.matches(labels),
        }
    }

    /// Who a snapshot was taken for: the node's name, or `site <selector>`.
    pub fn owner(&self) -> String {
        match self {
            Locality::Node(n) => n.clone(),
            Locality::Site(_) => self.to_string(),
        }
    }

    /// The node's name, for a node proxy.
    pub fn node(&self) -> Option<&str> {
        match self {
            Locality::Node(n) => Some(n),
            Locality::Site(_) => None,
        }
    }
}

impl From<&str> for Locality {
    fn from(node: &str) -> Self {
        Locality::Node(node.to_owned())
    }
}

impl From<String> for Locality {
    fn from(node: String) -> Self {
        Locality::Node(node)
    }
}

impl fmt::Display for Locality {
    /// `node bj-1` or `site zone=bj` (logs and the snapshot's owner).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Locality::Node(n) => write!(f, "node {n}"),
            Locality::Site(s) => write!(f, "site {s}"),
        }
    }
}
