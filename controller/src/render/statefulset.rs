//! StatefulSetGrid → one StatefulSet per site.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::StatefulSet;

use super::name::NameRule;
use super::{pin_to_site, render_sites, GridError, SiteResults};
use crate::{NodeUnit, StatefulSetGrid};

/// The StatefulSet each site of `grid` should run.
///
/// Each is named `{grid}-{unit}` (see [`super::name`]), runs the site's
/// template (keeping its `serviceName`, so all sites share one headless
/// Service) with `nodeSelector[gridUniqKey] = unit`, carries the grid labels
/// and is controlled by the grid. A site whose template is missing from the
/// pool gets an error; the others still render.
pub fn render_statefulsets(
    grid: &StatefulSetGrid,
    units: &BTreeSet<NodeUnit>,
) -> Result<SiteResults<StatefulSet>, GridError> {
    let key = &grid.spec.grid_uniq_key;
    render_sites(
        grid,
        &grid.spec,
        units,
        key,
        NameRule::StatefulSetLabel,
        |metadata, template, unit| {
            let mut spec = template.clone();
            pin_to_site(&mut spec.template, key, unit);
            StatefulSet {
                metadata,
                spec: Some(spec),
                status: None,
            }
        },
    )
}
