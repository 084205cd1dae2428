//! StatefulSetGrid → one StatefulSet per site.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sitegrid_api::names::NameRule;
use sitegrid_api::{SiteName, StatefulSetGrid};

use super::{render_sites, GridError, SiteResults, Workload};

impl Workload for StatefulSet {
    type Spec = StatefulSetSpec;
    const NAME_RULE: NameRule = NameRule::StatefulSetLabel;

    fn pod_template(spec: &mut StatefulSetSpec) -> &mut PodTemplateSpec {
        &mut spec.template
    }
    fn new(metadata: ObjectMeta, spec: StatefulSetSpec) -> Self {
        StatefulSet {
            metadata,
            spec: Some(spec),
            status: None,
        }
    }
}

/// The StatefulSet each site of `grid` should run.
///
/// Each is named `{grid}-{site}` (see [`sitegrid_api::names`]), runs the site's
/// template (keeping its `serviceName`, so all sites share one headless
/// Service) with `nodeSelector[gridUniqKey] = site`, carries the grid labels
/// and is controlled by the grid. A site whose template is missing from the
/// pool gets an error; the others still render.
pub fn render_statefulsets(
    grid: &StatefulSetGrid,
    sites: &BTreeSet<SiteName>,
) -> Result<SiteResults<StatefulSet>, GridError> {
    render_sites(grid, &grid.spec, sites, &grid.spec.grid_uniq_key)
}
