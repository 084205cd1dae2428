//! `kubectl sitegrid endpoints SERVICE --node NODE`: what that node's
//! sitegrid-proxy serves of the Service's EndpointSlices, and why.
//!
//! Nothing is asked of the proxy itself: the view is computed from the API
//! server's Service, Nodes and EndpointSlices (`discovery.k8s.io` v1, else
//! v1beta1, as the proxy picks) with the proxy's own filter code
//! ([`explain`]). Whether a sitegrid-proxy pod runs on the node is looked
//! up and said, since without one kube-proxy there is not filtered at all.

mod explain;
mod render;

use serde::Serialize;

use crate::cli::EndpointsArgs;
use crate::client::Cluster;
use crate::error::Error;
use crate::{Output, Printed};

pub use explain::{explain, Filter, Inputs, KeyStep, Verdict};

/// Where the answer comes from, said in every output.
pub const COMPUTED_FROM: &str =
    "computed from the API server's Service, Nodes and EndpointSlices with sitegrid-proxy's own filter code";

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub service: String,
    /// The node.
    pub node: String,
    /// [`COMPUTED_FROM`].
    pub computed_from: &'static str,
    /// The EndpointSlice API read, e.g. `discovery.k8s.io/v1beta1`.
    pub endpoint_slice_version: String,
    /// What the filter did with the Service.
    pub filter: Filter,
    /// Every endpoint of the Service.
    pub endpoints: Vec<Verdict>,
    /// Whether a sitegrid-proxy runs on the node.
    pub proxy: Proxy,
    /// Other things worth knowing (a headless Service).
    pub notes: Vec<String>,
}

/// What is known of sitegrid-proxy on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    /// The proxy pods on the node (`namespace/name (phase)`); empty: none found.
    pub pods: Vec<String>,
    /// Why it is unknown (the pods could not be listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// One sentence saying the above.
    pub summary: String,
}

/// Reads the Service, the node, the nodes and the slices, explains and prints.
pub async fn run(
    cluster: &Cluster,
    args: &EndpointsArgs,
    output: Option<Output>,
) -> Result<Printed, Error> {
    let namespace = cluster.namespace().to_owned();
    let service = cluster.service(&namespace, &args.service).await?;
    cluster.node(&args.node).await?;
    let nodes = crate::node_labels(cluster.node_metadata().await?);
    let version = cluster.slice_version().await?;
    let slices = cluster
        .slices_of(version, &namespace, &args.service)
        .await?;
    let (filter, endpoints) = explain(&Inputs {
        service: &service,
        node: &args.node,
        nodes: &nodes,
        slices: &slices,
    });
    let proxy = proxy_on(cluster, args).await;
    let mut notes = Vec::new();
    if service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        notes.push("headless Service: kube-proxy makes no rules for it (sitegrid-proxy filters its EndpointSlices all the same)".to_owned());
    }
    let explanation = Explanation {
        service: format!("{namespace}/{}", args.service),
        node: args.node.clone(),
        computed_from: COMPUTED_FROM,
        endpoint_slice_version: format!("discovery.k8s.io/{version}"),
        filter,
        endpoints,
        proxy,
        notes,
    };
    match output {
        Some(Output::Json) => {
            let mut printed = Printed::out(render::json(&explanation)?);
            // The text output says it in its Proxy line; JSON readers get it on stderr too.
            if explanation.proxy.pods.is_empty() {
                printed.stderr = format!("warning: {}\n", explanation.proxy.summary);
            }
            Ok(printed)
        }
        wide => Ok(Printed::out(render::text(
            &explanation,
            wide == Some(Output::Wide),
        ))),
    }
}

/// Looks for sitegrid-proxy's pods on the node.
async fn proxy_on(cluster: &Cluster, args: &EndpointsArgs) -> Proxy {
    let (ns, selector, node) = (&args.proxy_namespace, &args.proxy_selector, &args.node);
    match cluster.pods_on(ns, selector, node).await {
        Ok(pods) if !pods.is_empty() => {
            let pods: Vec<String> = pods
                .iter()
                .map(|p| {
                    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                    format!(
                        "{ns}/{} ({})",
                        p.metadata.name.as_deref().unwrap_or_default(),
                        phase.unwrap_or("Unknown")
                    )
                })
                .collect();
            let summary = format!("sitegrid-proxy on {node}: {}", pods.join(", "));
            Proxy { pods, unknown: None, summary }
        }
        Ok(_) => Proxy {
            pods: Vec::new(),
            unknown: None,
            summary: format!(
                "no sitegrid-proxy on node {node} (no pod labelled {selector} in {ns}): unless one runs there outside Kubernetes, kube-proxy on {node} is not filtered and gets every endpoint"
            ),
        },
        Err(e) => Proxy {
            pods: Vec::new(),
            summary: format!("whether sitegrid-proxy runs on {node} is unknown: {e}"),
            unknown: Some(e.to_string()),
        },
    }
}
