//! The field selectors each resource accepts, and how it words a refusal:
//! kube-apiserver's per-kind field label conversion functions
//! (`pkg/apis/*/v1/conversion.go`), per release.

use sitegrid_apimachinery::selector::UnknownFieldWording;

use super::version::KubernetesVersion;

/// The field selectors a resource accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Selectable {
    /// The field labels it converts.
    pub fields: &'static [&'static str],
    /// How it refuses any other.
    pub wording: UnknownFieldWording,
}

/// Every kind without its own conversion function: the generic
/// `DefaultMetaV1FieldSelectorConversion` (reference §8's wording).
const META: Selectable = Selectable {
    fields: &["metadata.name", "metadata.namespace"],
    wording: UnknownFieldWording::KnownFieldSelector,
};

/// The selectable fields of `plural` in `group` on `version`.
pub(crate) fn selectable(group: &str, plural: &str, version: KubernetesVersion) -> Selectable {
    use UnknownFieldWording::FieldLabelNotSupported;
    let own = |fields: &'static [&'static str]| Selectable {
        fields,
        wording: FieldLabelNotSupported,
    };
    match (group, plural) {
        ("", "nodes") => own(&["metadata.name", "spec.unschedulable"]),
        ("", "namespaces") => own(&["metadata.name", "status.phase"]),
        ("", "pods") => own(&[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]),
        ("", "events") => own(&[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ]),
        // AddFieldLabelConversionsForService (kubernetes PRs #122541 and
        // #123905, in 1.31): what kube-proxy 1.32+'s `spec.clusterIP!=None`
        // needs. Before it Services had the generic conversion.
        ("", "services") if version >= KubernetesVersion::V1_31 => own(&[
            "metadata.namespace",
            "metadata.name",
            "spec.clusterIP",
            "spec.type",
        ]),
        // ServiceCIDRs, EndpointSlices, ConfigMaps... register none.
        _ => META,
    }
}

/// Whether `field` is a Go string field whose unset value still selects as
/// `""` (Service `spec.clusterIP` of an ExternalName Service, say), not
/// as a missing field.
pub(crate) fn empty_when_unset(field: &str) -> bool {
    matches!(field, "spec.clusterIP" | "spec.type")
}
