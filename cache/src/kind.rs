//! The kinds the proxy caches, how each is spelled on the wire, and
//! [`PerKind`], a table with one entry per kind.

use std::{
    fmt,
    ops::{Index, IndexMut},
};

use kube::core::ApiResource;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use sitegrid_apimachinery::{endpointslice, protobuf};

/// A cached resource. EndpointSlices and ServiceCIDRs are each one resource
/// served in two API versions (`v1` and `v1beta1` of their group) from the
/// same store.
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
    /// networking.k8s.io ServiceCIDRs (kube-proxy 1.31+ reads them; not
    /// filtered by site; an API server older than 1.31 has none).
    ServiceCidrs,
}

impl ResourceKind {
    /// Every cached kind, in a fixed order (the order of [`PerKind`]).
    pub const ALL: [ResourceKind; 5] = [
        ResourceKind::Services,
        ResourceKind::Endpoints,
        ResourceKind::EndpointSlices,
        ResourceKind::Nodes,
        ResourceKind::ServiceCidrs,
    ];

    /// The kinds only ever synced from the first request for them, whatever
    /// `--on-demand` says: not every API server has them.
    pub const ONLY_ON_DEMAND: [ResourceKind; 1] = [ResourceKind::ServiceCidrs];

    /// The kind whose plural is `plural` (`services`).
    pub fn from_plural(plural: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.plural() == plural)
    }

    /// Position in [`ResourceKind::ALL`].
    fn index(self) -> usize {
        self as usize
    }

    /// The resource the upstream serves this kind as, in `version` (the
    /// core kinds only have `v1`).
    pub fn api_resource(self, version: ApiVersion) -> ApiResource {
        let version = match self.group() {
            "" => "v1",
            _ => version.as_str(),
        };
        let group = self.group();
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.into()
            } else {
                format!("{group}/{version}")
            },
            kind: self.kind().into(),
            plural: self.plural().into(),
        }
    }

    /// The plural resource name used in paths (`services`).
    pub fn plural(self) -> &'static str {
        match self {
            ResourceKind::Services => "services",
            ResourceKind::Endpoints => "endpoints",
            ResourceKind::EndpointSlices => "endpointslices",
            ResourceKind::Nodes => "nodes",
            ResourceKind::ServiceCidrs => "servicecidrs",
        }
    }

    /// The object kind (`Service`).
    pub fn kind(self) -> &'static str {
        match self {
            ResourceKind::Services => "Service",
            ResourceKind::Endpoints => "Endpoints",
            ResourceKind::EndpointSlices => "EndpointSlice",
            ResourceKind::Nodes => "Node",
            ResourceKind::ServiceCidrs => "ServiceCIDR",
        }
    }

    /// The API group (`""` for core).
    pub fn group(self) -> &'static str {
        match self {
            ResourceKind::EndpointSlices => "discovery.k8s.io",
            ResourceKind::ServiceCidrs => "networking.k8s.io",
            _ => "",
        }
    }

    /// Whether objects live in namespaces.
    pub fn namespaced(self) -> bool {
        !matches!(self, ResourceKind::Nodes | ResourceKind::ServiceCidrs)
    }

    /// Whether an object's JSON differs between the kind's two versions
    /// (EndpointSlices' topology); ServiceCIDRs' versions hold the same fields.
    pub fn versions_differ(self) -> bool {
        self == ResourceKind::EndpointSlices
    }

    /// Field selectors kube-apiserver accepts for this resource.
    pub fn selectable_fields(self) -> &'static [&'static str] {
        match self {
            ResourceKind::Nodes => &["metadata.name", "spec.unschedulable"],
            ResourceKind::ServiceCidrs => &["metadata.name"],
            // spec.clusterIP is what kube-proxy 1.32+ selects by (`!=None`).
            ResourceKind::Services => &[
                "metadata.name",
                "metadata.namespace",
                "spec.clusterIP",
                "spec.type",
            ],
            _ => &["metadata.name", "metadata.namespace"],
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.plural())
    }
}

/// Metrics label the kind by its plural (`resource="services"`).
impl EncodeLabelValue for ResourceKind {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), fmt::Error> {
        fmt::Write::write_str(encoder, self.plural())
    }
}

/// One `T` per cached kind, indexed by [`ResourceKind`]: per-kind state as one
/// value instead of parallel arrays.
#[derive(Debug, Clone, Default)]
pub struct PerKind<T>([T; 5]);

impl<T> PerKind<T> {
    /// A table with `f(kind)` for every kind.
    pub fn new(f: impl FnMut(ResourceKind) -> T) -> PerKind<T> {
        PerKind(ResourceKind::ALL.map(f))
    }

    /// Every kind with its entry, taken, in [`ResourceKind::ALL`] order.
    pub fn into_entries(self) -> impl Iterator<Item = (ResourceKind, T)> {
        ResourceKind::ALL.into_iter().zip(self.0)
    }

    /// Every kind with its entry, in [`ResourceKind::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (ResourceKind, &T)> {
        ResourceKind::ALL.into_iter().zip(self.0.iter())
    }
}

impl<T> Index<ResourceKind> for PerKind<T> {
    type Output = T;

    fn index(&self, kind: ResourceKind) -> &T {
        &self.0[kind.index()]
    }
}

impl<T> IndexMut<ResourceKind> for PerKind<T> {
    fn index_mut(&mut self, kind: ResourceKind) -> &mut T {
        &mut self.0[kind.index()]
    }
}

/// A served API version of a cached resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiVersion {
    /// `v1` (core), `discovery.k8s.io/v1` or `networking.k8s.io/v1`.
    V1,
    /// `discovery.k8s.io/v1beta1` or `networking.k8s.io/v1beta1`.
    V1beta1,
}

impl ApiVersion {
    /// The version spelled `s` (`v1`, `v1beta1`).
    pub fn parse(s: &str) -> Option<ApiVersion> {
        [ApiVersion::V1, ApiVersion::V1beta1]
            .into_iter()
            .find(|v| v.as_str() == s)
    }

    /// Both versions, preferred first.
    pub const BOTH: [ApiVersion; 2] = [ApiVersion::V1, ApiVersion::V1beta1];

    /// Converts an EndpointSlice, as JSON, from the other version into this one.
    pub fn convert_slice(self, slice: &mut serde_json::Value) {
        match self {
            ApiVersion::V1 => endpointslice::v1beta1_to_v1(slice),
            ApiVersion::V1beta1 => endpointslice::v1_to_v1beta1(slice),
        }
    }

    /// The version segment of the path (`v1`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "v1",
            ApiVersion::V1beta1 => "v1beta1",
        }
    }

    /// Index for per-version tables.
    pub(crate) fn index(self) -> usize {
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
            ("networking.k8s.io", ApiVersion::V1) => "networking.k8s.io/v1",
            ("networking.k8s.io", ApiVersion::V1beta1) => "networking.k8s.io/v1beta1",
            (_, ApiVersion::V1) => "discovery.k8s.io/v1",
            (_, ApiVersion::V1beta1) => "discovery.k8s.io/v1beta1",
        }
    }

    /// The list kind (`ServiceList`).
    pub fn list_kind(self) -> &'static str {
        match self.kind {
            ResourceKind::Services => "ServiceList",
            ResourceKind::Endpoints => "EndpointsList",
            ResourceKind::EndpointSlices => "EndpointSliceList",
            ResourceKind::Nodes => "NodeList",
            ResourceKind::ServiceCidrs => "ServiceCIDRList",
        }
    }

    /// The protobuf message this resource is written as.
    pub fn message(self) -> protobuf::Kind {
        match (self.kind, self.version) {
            (ResourceKind::Services, _) => protobuf::Kind::Service,
            (ResourceKind::Endpoints, _) => protobuf::Kind::Endpoints,
            (ResourceKind::Nodes, _) => protobuf::Kind::Node,
            (ResourceKind::EndpointSlices, ApiVersion::V1) => protobuf::Kind::EndpointSliceV1,
            (ResourceKind::EndpointSlices, ApiVersion::V1beta1) => {
                protobuf::Kind::EndpointSliceV1beta1
            }
            (ResourceKind::ServiceCidrs, ApiVersion::V1) => protobuf::Kind::ServiceCidrV1,
            (ResourceKind::ServiceCidrs, ApiVersion::V1beta1) => protobuf::Kind::ServiceCidrV1beta1,
        }
    }

    /// `{"kind":"Service","apiVersion":"v1",` — the prefix that turns a stored body
    /// (which starts with `{` and carries no kind/apiVersion) into a full object.
    pub fn object_prefix(self) -> &'static str {
        match (self.kind, self.version) {
            (ResourceKind::Services, _) => r#"{"kind":"Service","apiVersion":"v1","#,
            (ResourceKind::Endpoints, _) => r#"{"kind":"Endpoints","apiVersion":"v1","#,
            (ResourceKind::Nodes, _) => r#"{"kind":"Node","apiVersion":"v1","#,
            (ResourceKind::EndpointSlices, ApiVersion::V1) => {
                r#"{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","#
            }
            (ResourceKind::EndpointSlices, ApiVersion::V1beta1) => {
                r#"{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1beta1","#
            }
            (ResourceKind::ServiceCidrs, ApiVersion::V1) => {
                r#"{"kind":"ServiceCIDR","apiVersion":"networking.k8s.io/v1","#
            }
            (ResourceKind::ServiceCidrs, ApiVersion::V1beta1) => {
                r#"{"kind":"ServiceCIDR","apiVersion":"networking.k8s.io/v1beta1","#
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_prefixes_spell_kind_and_api_version() {
        for kind in ResourceKind::ALL {
            for version in [ApiVersion::V1, ApiVersion::V1beta1] {
                let served = Served { kind, version };
                let want = format!(
                    "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
                    kind.kind(),
                    served.api_version()
                );
                assert_eq!(served.object_prefix(), want);
            }
        }
    }
}
