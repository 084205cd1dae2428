//! The per-site template choice shared by the workload grids.

use std::collections::BTreeMap;

use crate::keys::{SiteName, TemplateName};
use crate::Template;

/// Why a site has no template to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// It names a pool entry that does not exist.
    Missing(TemplateName),
    /// Its pool entry is not a workload spec (see [`Template`]).
    Unreadable {
        /// The entry.
        name: TemplateName,
        /// The decoder's complaint.
        error: String,
    },
}

/// The template fields of a workload grid spec (`template`, `templatePool`,
/// `templates`, `defaultTemplateName`), seen the same way for Deployments
/// and StatefulSets.
pub trait GridTemplates {
    /// The workload spec a template holds (`DeploymentSpec`, `StatefulSetSpec`).
    type Spec;

    /// `spec.template`: what [`TemplateName::DEFAULT`] selects.
    fn template(&self) -> &Self::Spec;
    /// `spec.templatePool`: named alternative templates.
    fn template_pool(&self) -> &BTreeMap<TemplateName, Template<Self::Spec>>;
    /// `spec.templates`: the template name each site asks for.
    fn templates(&self) -> &BTreeMap<SiteName, TemplateName>;
    /// `spec.defaultTemplateName`, if set.
    fn default_template_name(&self) -> Option<&TemplateName>;

    /// The template name `site` uses: `templates[site]`, else
    /// `defaultTemplateName`, else `"default"`.
    fn template_name_for(&self, site: &SiteName) -> TemplateName {
        self.templates()
            .get(site)
            .or(self.default_template_name())
            .cloned()
            .unwrap_or_else(|| TemplateName::from(TemplateName::DEFAULT))
    }

    /// The template `site` runs, or why it has none (the pool entry it
    /// asked for does not exist, or is not a spec).
    ///
    /// `"default"` always means `spec.template`, as in SuperEdge.
    fn template_for(&self, site: &SiteName) -> Result<&Self::Spec, TemplateError> {
        let name = self.template_name_for(site);
        if name.is_default() {
            return Ok(self.template());
        }
        match self.template_pool().get(&name).map(Template::spec) {
            Some(Ok(spec)) => Ok(spec),
            Some(Err(error)) => Err(TemplateError::Unreadable {
                error: error.to_owned(),
                name,
            }),
            None => Err(TemplateError::Missing(name)),
        }
    }

    /// `templatePool` entries that no site uses: neither a value of
    /// `templates` nor `defaultTemplateName`. `autoDeleteUnusedTemplate: true`
    /// removes them.
    fn unused_templates(&self) -> Vec<TemplateName> {
        self.template_pool()
            .keys()
            .filter(|name| {
                !self.templates().values().any(|used| used == *name)
                    && self.default_template_name() != Some(*name)
            })
            .cloned()
            .collect()
    }
}
