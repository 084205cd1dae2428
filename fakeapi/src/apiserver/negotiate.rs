//! Which representation a read is answered with, from its `Accept` header:
//! `sitegrid_apimachinery::negotiate` (kube-apiserver's order of media
//! ranges, shared with the proxy), mapped to what this server produces.
//!
//! Any resource converts to metadata only
//! (`application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`).
//! Negotiation does not look at the verb: a list asked for as
//! `PartialObjectMetadata` (or an object as `…List`) is picked here and then
//! refused with `406` (`super::metadata::not_acceptable`), as kube-apiserver
//! does. This server writes JSON only: protobuf offers, and `Accept` headers
//! offering nothing it can produce, are answered with the objects in JSON.

use sitegrid_apimachinery::negotiate::{negotiate, Format};
use sitegrid_apimachinery::table::column_definitions;

use super::resource::ResourceType;

/// What a GET (list, object or watch) is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The objects themselves.
    Objects,
    /// A server-side Table in this `meta.k8s.io` version.
    Table {
        /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
        api_version: &'static str,
    },
    /// Metadata only: `PartialObjectMetadataList` (`list`) or `PartialObjectMetadata`.
    Metadata {
        /// `as=PartialObjectMetadataList` was asked for.
        list: bool,
    },
}

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

impl Output {
    /// The representation `accept` asks for on `rt`. Only resources with a
    /// printer in apimachinery answer Tables; the others, and anything that
    /// cannot be produced, get plain objects (kubectl then prints on its side).
    pub fn negotiate(rt: &ResourceType, accept: Option<&str>) -> Output {
        match negotiate(accept) {
            Some(Format::Table { api_version }) if column_definitions(rt.plural).is_some() => {
                Output::Table { api_version }
            }
            Some(Format::Metadata { list }) => Output::Metadata { list },
            Some(Format::Json | Format::Protobuf | Format::Table { .. }) | None => Output::Objects,
        }
    }

    /// The form of the objects this output carries.
    pub fn form(self) -> Form {
        match self {
            Output::Objects => Form::Full,
            Output::Table { .. } => Form::Table,
            Output::Metadata { .. } => Form::Metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::resource::Resources;
    use super::*;

    const KUBE_RS_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    const KUBE_RS_OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    const KUBECTL: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,\
                           application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn metadata_tables_and_objects() {
        let r = Resources::new("v1");
        let nodes = r.by_id("nodes").unwrap();
        let configmaps = r.by_id("configmaps").unwrap();
        let n = |accept: &str| Output::negotiate(nodes, Some(accept));
        assert_eq!(n(KUBE_RS_LIST), Output::Metadata { list: true });
        assert_eq!(n(KUBE_RS_OBJECT), Output::Metadata { list: false });
        // Every resource converts to metadata, printer or not.
        assert_eq!(
            Output::negotiate(configmaps, Some(KUBE_RS_OBJECT)),
            Output::Metadata { list: false }
        );
        assert_eq!(
            n(KUBECTL),
            Output::Table {
                api_version: "meta.k8s.io/v1"
            }
        );
        assert_eq!(
            Output::negotiate(configmaps, Some(KUBECTL)),
            Output::Objects
        );
        assert_eq!(
            n(&format!("application/json, {KUBE_RS_LIST}")),
            Output::Objects
        );
        assert_eq!(
            n("application/vnd.kubernetes.protobuf, */*"),
            Output::Objects
        );
        assert_eq!(n("application/yaml"), Output::Objects);
        assert_eq!(Output::negotiate(nodes, None), Output::Objects);
        assert_eq!(n(KUBE_RS_LIST).form(), Form::Metadata);
    }
}
