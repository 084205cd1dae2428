//! The pure expansion of a grid into the objects it owns.
//!
//! Plain functions from a grid (and, for workloads, the set of sites) to
//! Kubernetes objects, tested by value. Applying them is the reconciler's job.

mod service;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use sitegrid_api::keys::{GridUniqKey, SiteName, TemplateName};
use sitegrid_api::labels::{GRID_SELECTOR_LABEL, GRID_UNIQ_KEY_LABEL, SITE_LABEL};
use sitegrid_api::names;
use sitegrid_api::{TemplateError, WorkloadGrid, WorkloadGridSpec};

pub use service::render_service;

use crate::workload::Workload;

/// Why a grid cannot be rendered at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GridError {
    /// The grid has no `metadata.name` or `metadata.uid`, so children could
    /// not point back at it; only grids read from the API server render.
    #[error("grid has no name or uid yet; it must be read from the API server")]
    NotPersisted,
    /// The grid's name does not fit in a label value: every child carries it
    /// in [`GRID_SELECTOR_LABEL`] (as in SuperEdge), so the API server would
    /// refuse them all. A grid name may be 253 characters, a label value 63.
    #[error("the grid's name is {len} characters long, but its children carry it as the value of label {GRID_SELECTOR_LABEL}, which Kubernetes limits to 63: give the grid a shorter name")]
    NameTooLong {
        /// The name's length.
        len: usize,
    },
    /// `gridUniqKey` cannot be a label value (it has a `/` prefix, or is
    /// longer than 63): every child carries it in [`GRID_UNIQ_KEY_LABEL`].
    #[error("gridUniqKey {key:?} cannot be the value of label {GRID_UNIQ_KEY_LABEL} that every child carries (label values are at most 63 characters of [A-Za-z0-9._-], with no '/'): use a node label key without a prefix")]
    InvalidGridUniqKey {
        /// The key.
        key: GridUniqKey,
    },
}

impl GridError {
    /// The CamelCase reason of the condition and Warning event reporting
    /// it, or `None` for an error that is not the user's to fix.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Self::NotPersisted => None,
            Self::NameTooLong { .. } => Some(crate::status::reason::NAME_TOO_LONG),
            Self::InvalidGridUniqKey { .. } => Some(crate::status::reason::INVALID_GRID_UNIQ_KEY),
        }
    }
}

/// Why one site of a workload grid cannot be rendered; the other sites still are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SiteError {
    /// `templates[site]` or `defaultTemplateName` names no `templatePool` entry.
    #[error("site {site}: template \"{template}\" is not in templatePool")]
    UnknownTemplate {
        /// The site.
        site: SiteName,
        /// The missing pool entry.
        template: TemplateName,
    },
    /// The site's `templatePool` entry is not a workload spec (see
    /// [`sitegrid_api::Template`]).
    #[error("site {site}: templatePool entry \"{template}\" is not a valid template: {error}")]
    UnreadableTemplate {
        /// The site.
        site: SiteName,
        /// The pool entry.
        template: TemplateName,
        /// The decoder's complaint.
        error: String,
    },
}

/// The outcome per site: its object, or why it has none.
pub type SiteResults<T> = BTreeMap<SiteName, Result<T, SiteError>>;

/// Whether the two grid labels every child carries can hold `grid_name` and
/// `key` (label values: at most 63 characters, alphanumeric at both ends,
/// `-`, `_`, `.` between). Checked once per grid, before any child is made,
/// so that a grid the API server would refuse child by child says so once.
fn check_grid_labels(grid_name: &str, key: &GridUniqKey) -> Result<(), GridError> {
    // A grid name is a DNS-1123 subdomain (the API server checked it), so
    // only its length can make it an invalid label value.
    if grid_name.len() > MAX_LABEL_VALUE {
        return Err(GridError::NameTooLong {
            len: grid_name.len(),
        });
    }
    if !is_label_value(key.as_str()) {
        return Err(GridError::InvalidGridUniqKey { key: key.clone() });
    }
    Ok(())
}

/// The longest label value Kubernetes accepts.
const MAX_LABEL_VALUE: usize = 63;

/// A valid label value (empty, or ≤ 63 of `[A-Za-z0-9_.-]` starting and ending alphanumeric).
fn is_label_value(value: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    value.is_empty()
        || (value.len() <= MAX_LABEL_VALUE
            && value.starts_with(alnum)
            && value.ends_with(alnum)
            && value
                .chars()
                .all(|c| alnum(c) || matches!(c, '-' | '_' | '.')))
}

/// Metadata shared by every child of `grid`: namespace, the grid's labels plus
/// the two grid labels, and a controller ownerReference.
fn child_meta<K>(grid: &K, name: String, key: &GridUniqKey) -> Result<ObjectMeta, GridError>
where
    K: Resource<DynamicType = ()>,
{
    let meta = grid.meta();
    let grid_name = meta.name.clone().ok_or(GridError::NotPersisted)?;
    check_grid_labels(&grid_name, key)?;
    let owner = OwnerReference {
        block_owner_deletion: Some(true),
        ..grid
            .controller_owner_ref(&())
            .ok_or(GridError::NotPersisted)?
    };
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.insert(GRID_SELECTOR_LABEL.to_owned(), grid_name);
    labels.insert(GRID_UNIQ_KEY_LABEL.to_owned(), key.to_string());
    Ok(ObjectMeta {
        name: Some(name),
        namespace: meta.namespace.clone(),
        labels: Some(labels),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    })
}

/// The workload each site of `grid` should run (Deployments for a
/// DeploymentGrid, StatefulSets for a StatefulSetGrid).
///
/// Each runs the site's template (a StatefulSet keeps its `serviceName`, so
/// all sites share one headless Service) with `nodeSelector[gridUniqKey] =
/// site`, is named `{grid}-{site}` under the workload's rule (see
/// [`sitegrid_api::names`]), carries the grid labels and its site
/// ([`SITE_LABEL`]), and is controlled by the grid. A site whose template is
/// missing from the pool, or unreadable, gets an error; the others still
/// render.
pub fn render_workloads<G>(
    grid: &G,
    sites: &BTreeSet<SiteName>,
) -> Result<SiteResults<G::Workload>, GridError>
where
    G: WorkloadGrid,
    G::Workload: Workload<Spec = G::Template>,
{
    let spec = grid.grid_spec();
    let key = spec.grid_uniq_key();
    let grid_name = grid.meta().name.as_deref().ok_or(GridError::NotPersisted)?;
    check_grid_labels(grid_name, key)?;
    sites
        .iter()
        .map(|site| {
            let child = match spec.template_for(site) {
                Ok(template) => Ok(render_site(grid, grid_name, key, site, template)?),
                Err(TemplateError::Missing(template)) => Err(SiteError::UnknownTemplate {
                    site: site.clone(),
                    template,
                }),
                Err(TemplateError::Unreadable { name, error }) => {
                    Err(SiteError::UnreadableTemplate {
                        site: site.clone(),
                        template: name,
                        error,
                    })
                }
            };
            Ok((site.clone(), child))
        })
        .collect()
}

/// The workload of `grid` in `site`, running `template`.
fn render_site<G, W>(
    grid: &G,
    grid_name: &str,
    key: &GridUniqKey,
    site: &SiteName,
    template: &W::Spec,
) -> Result<W, GridError>
where
    G: Resource<DynamicType = ()>,
    W: Workload,
{
    let name = names::site_child_name(grid_name, site.as_str(), W::NAME_RULE);
    let mut spec = template.clone();
    pin_to_site(W::pod_template(&mut spec), key, site);
    let mut meta = child_meta(grid, name, key)?;
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(SITE_LABEL.to_owned(), site.to_string());
    Ok(W::new(meta, spec))
}

/// Pins a pod template to one site: `nodeSelector[key] = site`, merged with
/// the template's own node selector (the site wins on the same key).
fn pin_to_site(template: &mut PodTemplateSpec, key: &GridUniqKey, site: &SiteName) {
    template
        .spec
        .get_or_insert_with(Default::default)
        .node_selector
        .get_or_insert_with(Default::default)
        .insert(key.to_string(), site.to_string());
}
