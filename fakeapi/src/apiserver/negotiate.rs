//! Which representation a read is answered with, from its `Accept` header:
//! `sitegrid_apimachinery::negotiate` (kube-apiserver's order of media
//! ranges, shared with the proxy), mapped to what this server produces.
//!
//! Any resource converts to metadata only
//! (`application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`).
//! Negotiation does not look at the verb: a list asked for as
//! `PartialObjectMetadata` (or an object as `…List`) is picked here and then
//! refused with `406` (`super::metadata::not_acceptable`), as kube-apiserver
//! does. Protobuf is written for the kinds
//! [`ResourceType::protobuf_kind`] names (what sitegrid-proxy reads
//! upstream, as kube-apiserver writes them); for the others a protobuf
//! offer, like an `Accept` offering nothing this server can produce, is
//! answered with the objects in JSON. Errors are JSON `Status`es.

use sitegrid_apimachinery::negotiate::{negotiate, Format};
use sitegrid_apimachinery::table::column_definitions;
#[cfg(test)]
use sitegrid_apimachinery::table::IncludeObject;

use super::resource::ResourceType;

/// Which form of the objects a response carries: what egress is counted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// Whole objects.
    Full,
    /// `PartialObjectMetadata`.
    Metadata,
    /// Tables.
    Table,
}

impl Form {
    /// Every form, in the order the egress counters keep them.
    pub const ALL: [Form; 3] = [Form::Full, Form::Metadata, Form::Table];

    /// Position in [`Form::ALL`].
    pub fn index(self) -> usize {
        match self {
            Form::Full => 0,
            Form::Metadata => 1,
            Form::Table => 2,
        }
    }
}

impl Form {
    /// The form of the objects a response in `format` carries.
    pub fn of(format: Format) -> Form {
        match format {
            Format::Json | Format::Protobuf => Form::Full,
            Format::Table { .. } => Form::Table,
            Format::Metadata { .. } => Form::Metadata,
        }
    }
}

/// What a read asking for `accept` on `rt` is answered with: JSON objects,
/// protobuf (only the kinds [`ResourceType::protobuf_kind`] names), a Table
/// (only resources with a printer in apimachinery answer Tables; for the
/// others kubectl prints on its side), or metadata only.
pub(crate) fn produced(rt: &ResourceType, accept: Option<&str>) -> Format {
    match negotiate(accept) {
        Some(table @ Format::Table { .. }) if column_definitions(rt.plural).is_some() => table,
        Some(metadata @ Format::Metadata { .. }) => metadata,
        Some(Format::Protobuf) if rt.protobuf_kind().is_some() => Format::Protobuf,
        Some(Format::Json | Format::Protobuf | Format::Table { .. }) | None => Format::Json,
    }
}

#[cfg(test)]
mod tests {
    use super::super::resource::Resources;
    use super::super::version::Profile;
    use super::*;

    const KUBE_RS_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    const KUBE_RS_OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                           application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn metadata_tables_and_objects() {
        let r = Resources::new(&Profile::v1_20("v1"));
        let nodes = r.by_id("nodes").unwrap();
        let configmaps = r.by_id("configmaps").unwrap();
        let n = |accept: &str| produced(nodes, Some(accept));
        assert_eq!(n(KUBE_RS_LIST), Format::Metadata { list: true });
        assert_eq!(n(KUBE_RS_OBJECT), Format::Metadata { list: false });
        // Every resource converts to metadata, printer or not.
        assert_eq!(
            produced(configmaps, Some(KUBE_RS_OBJECT)),
            Format::Metadata { list: false }
        );
        assert_eq!(
            n(KUBECTL),
            Format::Table {
                api_version: "meta.k8s.io/v1",
                include: IncludeObject::Metadata,
            }
        );
        assert_eq!(produced(configmaps, Some(KUBECTL)), Format::Json);
        assert_eq!(
            n(&format!("application/json, {KUBE_RS_LIST}")),
            Format::Json
        );
        // Services are written in protobuf, as kube-apiserver writes them;
        // kinds this server has no message for (Nodes, ConfigMaps) in JSON.
        let services = r.by_id("services").unwrap();
        let protobuf = Some("application/vnd.kubernetes.protobuf, */*");
        assert_eq!(produced(services, protobuf), Format::Protobuf);
        assert_eq!(n("application/vnd.kubernetes.protobuf, */*"), Format::Json);
        assert_eq!(produced(configmaps, protobuf), Format::Json);
        assert_eq!(n("application/yaml"), Format::Json);
        assert_eq!(produced(nodes, None), Format::Json);
        assert_eq!(Form::of(n(KUBE_RS_LIST)), Form::Metadata);
    }
}
