//! DeploymentGrid → one Deployment per site.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sitegrid_api::names::NameRule;
use sitegrid_api::{DeploymentGrid, SiteName};

use super::{render_sites, GridError, SiteResults, Workload};

impl Workload for Deployment {
    type Spec = DeploymentSpec;
    const NAME_RULE: NameRule = NameRule::Subdomain;

    fn pod_template(spec: &mut DeploymentSpec) -> &mut PodTemplateSpec {
        &mut spec.template
    }
    fn new(metadata: ObjectMeta, spec: DeploymentSpec) -> Self {
        Deployment {
            metadata,
            spec: Some(spec),
            status: None,
        }
    }
}

/// The Deployment each site of `grid` should run.
///
/// Each is named `{grid}-{site}` (see [`sitegrid_api::names`]), runs the site's
/// template with `nodeSelector[gridUniqKey] = site`, carries the grid labels
/// and is controlled by the grid. A site whose template is missing from the
/// pool gets an error; the others still render.
pub fn render_deployments(
    grid: &DeploymentGrid,
    sites: &BTreeSet<SiteName>,
) -> Result<SiteResults<Deployment>, GridError> {
    render_sites(grid, &grid.spec, sites, &grid.spec.grid_uniq_key)
}
