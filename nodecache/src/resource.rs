//! The resources the node cache keeps: what a kubelet reads from the API
//! server and needs again to start its pods without it
//! (`docs/research/kubelet-1.20-1.35.md`; the table in proxy/README.md).
//! Services and the node's own Node are not here: the proxy's served-state
//! cache answers them to every client, the kubelet included.

use serde::{Deserialize, Serialize};

/// A kept resource (one API version of it: the one the kubelet reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KeptResource {
    /// The node's pods (`spec.nodeName=<node>`): what the kubelet starts.
    Pods,
    /// Secrets its pods reference, each read by name.
    Secrets,
    /// ConfigMaps its pods reference, each read by name.
    ConfigMaps,
    /// Claims its pods' volumes name.
    PersistentVolumeClaims,
    /// The volumes those claims are bound to.
    PersistentVolumes,
    /// The node's CSINode (CSI initialisation at every kubelet start).
    CsiNodes,
    /// Every CSIDriver (CSI volume operations wait for this list).
    CsiDrivers,
    /// Every RuntimeClass (a pod with `runtimeClassName` needs it).
    RuntimeClasses,
}

/// How long a resource's objects are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// As long as the kubelet's answers hold them.
    Always,
    /// While a kept pod references them (directly, or through a kept
    /// claim for volumes); then removed from memory and disk.
    Referenced,
}

impl KeptResource {
    /// Every kept resource.
    pub const ALL: [KeptResource; 8] = [
        KeptResource::Pods,
        KeptResource::Secrets,
        KeptResource::ConfigMaps,
        KeptResource::PersistentVolumeClaims,
        KeptResource::PersistentVolumes,
        KeptResource::CsiNodes,
        KeptResource::CsiDrivers,
        KeptResource::RuntimeClasses,
    ];

    /// The API group (`""` for the core group).
    pub fn group(self) -> &'static str {
        match self {
            KeptResource::CsiNodes | KeptResource::CsiDrivers => "storage.k8s.io",
            KeptResource::RuntimeClasses => "node.k8s.io",
            _ => "",
        }
    }

    /// The version kept (the one every supported kubelet reads).
    pub fn version(self) -> &'static str {
        "v1"
    }

    /// `apiVersion` as objects spell it (`v1`, `storage.k8s.io/v1`).
    pub fn api_version(self) -> &'static str {
        match self.group() {
            "storage.k8s.io" => "storage.k8s.io/v1",
            "node.k8s.io" => "node.k8s.io/v1",
            _ => "v1",
        }
    }

    /// The path segment (`pods`).
    pub fn plural(self) -> &'static str {
        match self {
            KeptResource::Pods => "pods",
            KeptResource::Secrets => "secrets",
            KeptResource::ConfigMaps => "configmaps",
            KeptResource::PersistentVolumeClaims => "persistentvolumeclaims",
            KeptResource::PersistentVolumes => "persistentvolumes",
            KeptResource::CsiNodes => "csinodes",
            KeptResource::CsiDrivers => "csidrivers",
            KeptResource::RuntimeClasses => "runtimeclasses",
        }
    }

    /// The object kind (`Pod`).
    pub fn kind(self) -> &'static str {
        match self {
            KeptResource::Pods => "Pod",
            KeptResource::Secrets => "Secret",
            KeptResource::ConfigMaps => "ConfigMap",
            KeptResource::PersistentVolumeClaims => "PersistentVolumeClaim",
            KeptResource::PersistentVolumes => "PersistentVolume",
            KeptResource::CsiNodes => "CSINode",
            KeptResource::CsiDrivers => "CSIDriver",
            KeptResource::RuntimeClasses => "RuntimeClass",
        }
    }

    /// The list kind (`PodList`).
    pub fn list_kind(self) -> String {
        format!("{}List", self.kind())
    }

    /// Whether objects live in namespaces.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            KeptResource::Pods
                | KeptResource::Secrets
                | KeptResource::ConfigMaps
                | KeptResource::PersistentVolumeClaims
        )
    }

    /// How long its objects are kept.
    pub fn retention(self) -> Retention {
        match self {
            KeptResource::Secrets
            | KeptResource::ConfigMaps
            | KeptResource::PersistentVolumeClaims
            | KeptResource::PersistentVolumes => Retention::Referenced,
            _ => Retention::Always,
        }
    }

    /// The fields a field selector may name besides `metadata.name` and
    /// `metadata.namespace` (kube-apiserver's field label conversions).
    pub fn selectable_fields(self) -> &'static [&'static str] {
        match self {
            KeptResource::Pods => &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            KeptResource::Secrets => &["type"],
            _ => &[],
        }
    }

    /// The kept resource a path's group, version and resource name, if any.
    pub fn from_path(group: &str, version: &str, plural: &str) -> Option<KeptResource> {
        KeptResource::ALL
            .into_iter()
            .find(|r| r.group() == group && r.version() == version && r.plural() == plural)
    }

    /// The name of its file in the node cache's directory.
    pub fn file_name(self) -> String {
        match self.group() {
            "" => self.plural().to_owned(),
            group => format!("{}.{group}", self.plural()),
        }
    }
}

impl std::fmt::Display for KeptResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.plural())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_exactly_one_kept_resource() {
        assert_eq!(
            KeptResource::from_path("", "v1", "pods"),
            Some(KeptResource::Pods)
        );
        assert_eq!(
            KeptResource::from_path("storage.k8s.io", "v1", "csidrivers"),
            Some(KeptResource::CsiDrivers)
        );
        assert_eq!(
            KeptResource::from_path("storage.k8s.io", "v1beta1", "csidrivers"),
            None
        );
        assert_eq!(KeptResource::from_path("", "v1", "csidrivers"), None);
        assert_eq!(
            KeptResource::from_path("", "v1", "services"),
            None,
            "the served-state cache's"
        );
        let files: std::collections::BTreeSet<String> =
            KeptResource::ALL.iter().map(|r| r.file_name()).collect();
        assert_eq!(files.len(), KeptResource::ALL.len(), "one file each");
    }
}
