//! The resources this server serves: one table, used by routing, discovery,
//! the store and `apply` alike (one generic handler, never a copy per kind),
//! built for the release played (`super::version::Profile`).

use sitegrid_apimachinery::protobuf::Kind;

use super::fields::{self, Selectable};
use super::version::Profile;

/// One served resource type, e.g. `services` in core `v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceType {
    /// Storage and API name, plural lower case: `services`.
    pub plural: &'static str,
    /// `singularName` in discovery: `service`.
    pub singular: &'static str,
    /// `Service`.
    pub kind: &'static str,
    /// API group, empty for core.
    pub group: &'static str,
    /// Served version: `v1`, or the configured EndpointSlice version.
    pub version: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names: `svc`.
    pub short_names: &'static [&'static str],
    /// Whether the type has a `/status` subresource.
    pub has_status: bool,
    /// The `apiVersion` of objects of this type: `v1`, `discovery.k8s.io/v1`.
    pub api_version: String,
    /// Key used in the store, `open_watches()` and the in-process API: the plural
    /// for core types and EndpointSlices, `plural.group` where the plural alone is
    /// ambiguous (`events.events.k8s.io`).
    pub id: String,
    /// Position in [`Resources`], used to index per-type storage.
    pub idx: usize,
    /// Its field selectors in the release played.
    pub selectable: Selectable,
}

/// Verbs listed in discovery for every resource.
pub(crate) const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// `discovery.k8s.io`.
pub(crate) const DISCOVERY_GROUP: &str = "discovery.k8s.io";
/// `events.k8s.io`.
pub(crate) const EVENTS_GROUP: &str = "events.k8s.io";
/// `apps`: StatefulSets, which sitegrid-dnsd reads.
pub(crate) const APPS_GROUP: &str = "apps";
/// `networking.k8s.io`: ServiceCIDRs (1.31 behind a gate, 1.35).
pub(crate) const NETWORKING_GROUP: &str = "networking.k8s.io";
/// `superedge.io`: the grid resources (served as kube-apiserver serves their
/// CRDs: namespaced, with a status subresource, short names from the CRDs).
pub(crate) const GRID_GROUP: &str = "superedge.io";
/// `site.superedge.io`: site-manager's NodeUnits and NodeGroups (CRDs too:
/// cluster-scoped, with a status subresource).
pub(crate) const SITE_GROUP: &str = "site.superedge.io";
/// `storage.k8s.io`: CSINodes and CSIDrivers, which every kubelet reads.
pub(crate) const STORAGE_GROUP: &str = "storage.k8s.io";
/// `node.k8s.io`: RuntimeClasses, which every kubelet lists.
pub(crate) const NODE_GROUP: &str = "node.k8s.io";
/// `coordination.k8s.io`: the kubelets' node Leases.
pub(crate) const COORDINATION_GROUP: &str = "coordination.k8s.io";

impl ResourceType {
    #[allow(clippy::too_many_arguments)]
    fn new(
        plural: &'static str,
        singular: &'static str,
        kind: &'static str,
        group: &'static str,
        version: &'static str,
        namespaced: bool,
        short_names: &'static [&'static str],
        has_status: bool,
    ) -> Self {
        let api_version = if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        };
        // Core `events` and `events.k8s.io` events share a plural; the grouped
        // one gets the qualified id so the in-process API can tell them apart.
        let id = if group == EVENTS_GROUP {
            format!("{plural}.{group}")
        } else {
            plural.to_owned()
        };
        ResourceType {
            plural,
            singular,
            kind,
            group,
            version,
            namespaced,
            short_names,
            has_status,
            api_version,
            id,
            idx: 0,
            selectable: fields::selectable(group, plural, Default::default()),
        }
    }

    /// The protobuf message its objects are written as, for the kinds this
    /// server writes in protobuf: the ones sitegrid-proxy reads upstream in
    /// protobuf (Services, Endpoints, EndpointSlices). kube-apiserver writes
    /// every built-in kind so; the others are answered in JSON here.
    pub fn protobuf_kind(&self) -> Option<Kind> {
        Some(match (self.group, self.version, self.plural) {
            ("", "v1", "services") => Kind::Service,
            ("", "v1", "endpoints") => Kind::Endpoints,
            (DISCOVERY_GROUP, "v1", "endpointslices") => Kind::EndpointSliceV1,
            (DISCOVERY_GROUP, "v1beta1", "endpointslices") => Kind::EndpointSliceV1beta1,
            _ => return None,
        })
    }

    /// `ServiceList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

/// Every served resource, in discovery order.
#[derive(Debug, Clone)]
pub(crate) struct Resources {
    all: Vec<ResourceType>,
}

impl Resources {
    /// The table for a server playing `profile`.
    pub fn new(profile: &Profile) -> Self {
        let endpointslice_version = profile.endpointslice_version;
        let r = ResourceType::new;
        let mut all = vec![
            r(
                "configmaps",
                "configmap",
                "ConfigMap",
                "",
                "v1",
                true,
                &["cm"],
                false,
            ),
            r(
                "endpoints",
                "endpoints",
                "Endpoints",
                "",
                "v1",
                true,
                &["ep"],
                false,
            ),
            r("events", "event", "Event", "", "v1", true, &["ev"], false),
            r(
                "namespaces",
                "namespace",
                "Namespace",
                "",
                "v1",
                false,
                &["ns"],
                true,
            ),
            r("nodes", "node", "Node", "", "v1", false, &["no"], true),
            r("pods", "pod", "Pod", "", "v1", true, &["po"], true),
            // What a kubelet reads besides its pods (the node cache's kinds).
            r("secrets", "secret", "Secret", "", "v1", true, &[], false),
            r(
                "serviceaccounts",
                "serviceaccount",
                "ServiceAccount",
                "",
                "v1",
                true,
                &["sa"],
                false,
            ),
            r(
                "persistentvolumeclaims",
                "persistentvolumeclaim",
                "PersistentVolumeClaim",
                "",
                "v1",
                true,
                &["pvc"],
                true,
            ),
            r(
                "persistentvolumes",
                "persistentvolume",
                "PersistentVolume",
                "",
                "v1",
                false,
                &["pv"],
                true,
            ),
            r(
                "services",
                "service",
                "Service",
                "",
                "v1",
                true,
                &["svc"],
                true,
            ),
            r(
                "endpointslices",
                "endpointslice",
                "EndpointSlice",
                DISCOVERY_GROUP,
                endpointslice_version,
                true,
                &[],
                false,
            ),
            r(
                "events",
                "event",
                "Event",
                EVENTS_GROUP,
                "v1",
                true,
                &["ev"],
                false,
            ),
            r(
                "statefulsets",
                "statefulset",
                "StatefulSet",
                APPS_GROUP,
                "v1",
                true,
                &["sts"],
                true,
            ),
            r(
                "deploymentgrids",
                "deploymentgrid",
                "DeploymentGrid",
                GRID_GROUP,
                "v1",
                true,
                &["dg"],
                true,
            ),
            r(
                "statefulsetgrids",
                "statefulsetgrid",
                "StatefulSetGrid",
                GRID_GROUP,
                "v1",
                true,
                &["ssg"],
                true,
            ),
            r(
                "servicegrids",
                "servicegrid",
                "ServiceGrid",
                GRID_GROUP,
                "v1",
                true,
                &["sg"],
                true,
            ),
            r(
                "csinodes",
                "csinode",
                "CSINode",
                STORAGE_GROUP,
                "v1",
                false,
                &[],
                false,
            ),
            r(
                "csidrivers",
                "csidriver",
                "CSIDriver",
                STORAGE_GROUP,
                "v1",
                false,
                &[],
                false,
            ),
            r(
                "runtimeclasses",
                "runtimeclass",
                "RuntimeClass",
                NODE_GROUP,
                "v1",
                false,
                &[],
                false,
            ),
            r(
                "leases",
                "lease",
                "Lease",
                COORDINATION_GROUP,
                "v1",
                true,
                &[],
                false,
            ),
            r(
                "nodeunits",
                "nodeunit",
                "NodeUnit",
                SITE_GROUP,
                "v1alpha2",
                false,
                &["nu"],
                true,
            ),
            r(
                "nodegroups",
                "nodegroup",
                "NodeGroup",
                SITE_GROUP,
                "v1alpha2",
                false,
                &["ng"],
                true,
            ),
        ];
        if let Some(version) = profile.service_cidrs {
            // After EndpointSlices, so a 1.20 table keeps its order.
            let at = all
                .iter()
                .position(|r| r.group == EVENTS_GROUP)
                .unwrap_or(all.len());
            all.insert(
                at,
                r(
                    "servicecidrs",
                    "servicecidr",
                    "ServiceCIDR",
                    NETWORKING_GROUP,
                    version,
                    false,
                    &[],
                    true,
                ),
            );
        }
        for (i, r) in all.iter_mut().enumerate() {
            r.idx = i;
            r.selectable = fields::selectable(r.group, r.plural, profile.version);
        }
        Resources { all }
    }

    /// The same table without the resources of sitegrid's CRDs (the grids and
    /// site-manager's kinds): a cluster where they were never installed.
    pub fn without_crds(self) -> Self {
        let mut all: Vec<ResourceType> = self
            .all
            .into_iter()
            .filter(|r| !is_crd_group(r.group))
            .collect();
        for (i, r) in all.iter_mut().enumerate() {
            r.idx = i;
        }
        Resources { all }
    }

    /// Number of resource types.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// All resource types.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceType> {
        self.all.iter()
    }

    /// The type served at `/api/<version>/<plural>` (group empty) or
    /// `/apis/<group>/<version>/<plural>`.
    pub fn by_path(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.all
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// The type with this store id (`services`, `events.events.k8s.io`); a plain
    /// plural also finds a grouped type when no core type has that plural.
    pub fn by_id(&self, id: &str) -> Option<&ResourceType> {
        self.all
            .iter()
            .find(|r| r.id == id)
            .or_else(|| self.all.iter().find(|r| r.plural == id))
    }

    /// The type of an object with this `apiVersion` and `kind`. EndpointSlices
    /// are found under either discovery version (the caller converts).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        let (group, _version) = split_api_version(api_version);
        self.all.iter().find(|r| {
            r.kind == kind
                && r.group == group
                && (r.api_version == api_version || r.group == DISCOVERY_GROUP)
        })
    }

    /// Versions served for `group` (empty = core), which is at most one here.
    pub fn versions_of(&self, group: &str) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for r in self.all.iter().filter(|r| r.group == group) {
            if !out.contains(&r.version) {
                out.push(r.version);
            }
        }
        out
    }

    /// Named API groups in discovery order.
    pub fn groups(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for r in self.all.iter().filter(|r| !r.group.is_empty()) {
            if !out.contains(&r.group) {
                out.push(r.group);
            }
        }
        out
    }
}

/// Whether `group` is served by one of sitegrid's CRDs rather than built in.
pub(crate) fn is_crd_group(group: &str) -> bool {
    group == GRID_GROUP || group == SITE_GROUP
}

/// `discovery.k8s.io/v1` → (`discovery.k8s.io`, `v1`); `v1` → (``, `v1`).
pub(crate) fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        let r = Resources::new(&Profile::v1_20("v1beta1"));
        assert_eq!(
            r.by_path("", "v1", "services").map(|r| r.kind),
            Some("Service")
        );
        assert!(r.by_path(DISCOVERY_GROUP, "v1", "endpointslices").is_none());
        let es = r
            .by_path(DISCOVERY_GROUP, "v1beta1", "endpointslices")
            .unwrap();
        assert_eq!(es.api_version, "discovery.k8s.io/v1beta1");
        assert_eq!(r.by_id("events").map(|r| r.group), Some(""));
        assert_eq!(
            r.by_id("events.events.k8s.io").map(|r| r.group),
            Some(EVENTS_GROUP)
        );
        assert_eq!(
            r.by_id("endpointslices").map(|r| r.group),
            Some(DISCOVERY_GROUP)
        );
        assert!(r.by_kind("discovery.k8s.io/v1", "EndpointSlice").is_some());
        assert_eq!(
            r.by_kind("events.k8s.io/v1", "Event")
                .map(|r| r.id.as_str()),
            Some("events.events.k8s.io")
        );
        assert_eq!(
            r.groups(),
            vec![
                DISCOVERY_GROUP,
                EVENTS_GROUP,
                APPS_GROUP,
                GRID_GROUP,
                STORAGE_GROUP,
                NODE_GROUP,
                COORDINATION_GROUP,
                SITE_GROUP
            ]
        );
        let plain = Resources::new(&Profile::v1_20("v1")).without_crds();
        assert_eq!(
            plain.groups(),
            vec![
                DISCOVERY_GROUP,
                EVENTS_GROUP,
                APPS_GROUP,
                STORAGE_GROUP,
                NODE_GROUP,
                COORDINATION_GROUP
            ]
        );
        assert!(plain.by_id("deploymentgrids").is_none());
        assert!(plain.by_path(SITE_GROUP, "v1alpha2", "nodeunits").is_none());
        assert!(plain.iter().enumerate().all(|(i, r)| r.idx == i));
        assert_eq!(
            r.by_kind("superedge.io/v1", "StatefulSetGrid")
                .map(|r| r.id.as_str()),
            Some("statefulsetgrids")
        );
    }
}
