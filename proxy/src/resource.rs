//! The kinds the proxy caches, and how each is spelled on the wire.

use std::fmt;

/// A cached resource. EndpointSlices are one resource served in two API
/// versions (`discovery.k8s.io/v1` and `v1beta1`) from the same store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// core/v1 Services.
    Services,
    /// core/v1 Endpoints.
    Endpoints,
    /// discovery.k8s.io EndpointSlices.
    EndpointSlices,
    /// core/v1 Nodes.
    Nodes,
}

impl ResourceKind {
    /// Every cached kind, in a fixed order (used to index per-kind tables).
    pub const ALL: [ResourceKind; 4] = [
        ResourceKind::Services,
        ResourceKind::Endpoints,
        ResourceKind::EndpointSlices,
        ResourceKind::Nodes,
    ];

    /// Position in [`ResourceKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The plural resource name used in paths (`services`).
    pub fn plural(self) -> &'static str {
        match self {
            ResourceKind::Services => "services",
            ResourceKind::Endpoints => "endpoints",
            ResourceKind::EndpointSlices => "endpointslices",
            ResourceKind::Nodes => "nodes",
        }
    }

    /// The object kind (`Service`).
    pub fn kind(self) -> &'static str {
        match self {
            ResourceKind::Services => "Service",
            ResourceKind::Endpoints => "Endpoints",
            ResourceKind::EndpointSlices => "EndpointSlice",
            ResourceKind::Nodes => "Node",
        }
    }

    /// The API group (`""` for core).
    pub fn group(self) -> &'static str {
        match self {
            ResourceKind::EndpointSlices => "discovery.k8s.io",
            _ => "",
        }
    }

    /// Whether objects live in namespaces.
    pub fn namespaced(self) -> bool {
        !matches!(self, ResourceKind::Nodes)
    }

    /// Field selectors kube-apiserver accepts for this resource.
    pub fn selectable_fields(self) -> &'static [&'static str] {
        match self {
            ResourceKind::Nodes => &["metadata.name", "spec.unschedulable"],
            _ => &["metadata.name", "metadata.namespace"],
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.plural())
    }
}

/// A served API version of a cached resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiVersion {
    /// `v1` (core) or `discovery.k8s.io/v1`.
    V1,
    /// `discovery.k8s.io/v1beta1` (EndpointSlices only).
    V1beta1,
}

impl ApiVersion {
    /// The version segment of the path (`v1`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "v1",
            ApiVersion::V1beta1 => "v1beta1",
        }
    }

    /// Index for per-version tables.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A resource in one API version: what a request addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Served {
    /// The cached resource.
    pub kind: ResourceKind,
    /// The version the client asked for.
    pub version: ApiVersion,
}

impl Served {
    /// `apiVersion` as written in objects (`v1`, `discovery.k8s.io/v1beta1`).
    pub fn api_version(self) -> &'static str {
        match (self.kind.group(), self.version) {
            ("", _) => "v1",
            (_, ApiVersion::V1) => "discovery.k8s.io/v1",
            (_, ApiVersion::V1beta1) => "discovery.k8s.io/v1beta1",
        }
    }

    /// `{"kind":"Service","apiVersion":"v1",` — the prefix that turns a stored body
    /// (which starts with `{` and carries no kind/apiVersion) into a full object.
    pub fn object_prefix(self) -> String {
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
            self.kind.kind(),
            self.api_version()
        )
    }
}
