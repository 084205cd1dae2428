//! The CustomResourceDefinitions of the grid resources, as `kubectl apply`-able YAML.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::site_manager::{NodeGroup, NodeUnit};
use crate::{DeploymentGrid, ServiceGrid, StatefulSetGrid};

mod descriptions;

/// One CRD and the file it is committed as under `deploy/crds/`.
#[derive(Clone, Debug)]
pub struct CrdFile {
    /// File name, e.g. `superedge.io_deploymentgrids.yaml`.
    pub file_name: String,
    /// The CRD itself.
    pub crd: CustomResourceDefinition,
}

/// Failure to render a CRD as YAML.
#[derive(Debug, thiserror::Error)]
#[error("rendering CRD {name} as YAML")]
pub struct CrdYamlError {
    /// The CRD's name.
    name: String,
    #[source]
    source: serde_saphyr::SerializeError,
}

/// All CRDs, in a fixed order (DeploymentGrid, StatefulSetGrid, ServiceGrid,
/// then site-manager's NodeUnit and NodeGroup),
/// without the descriptions of the embedded Kubernetes types (they would make
/// the CRDs too large for client-side `kubectl apply`).
pub fn all() -> Vec<CrdFile> {
    [
        DeploymentGrid::crd(),
        StatefulSetGrid::crd(),
        ServiceGrid::crd(),
        NodeUnit::crd(),
        NodeGroup::crd(),
    ]
    .into_iter()
    .map(|mut crd| {
        for version in &mut crd.spec.versions {
            let schema = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut());
            if let Some(schema) = schema {
                descriptions::strip_embedded(schema, 0);
            }
        }
        crd
    })
    .map(|crd| CrdFile {
        file_name: format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural),
        crd,
    })
    .collect()
}

/// One CRD as a YAML document (no leading `---`).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdYamlError> {
    serde_saphyr::to_string(crd).map_err(|source| CrdYamlError {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
    })
}

/// All grid CRDs as one multi-document YAML stream, what `sitegrid-controller crds` prints.
pub fn all_yaml() -> Result<String, CrdYamlError> {
    let mut out = String::new();
    for file in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&file.crd)?);
    }
    Ok(out)
}
