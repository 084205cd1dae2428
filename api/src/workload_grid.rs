//! DeploymentGrid (`dg`) and StatefulSetGrid (`ssg`): one workload per site.
//!
//! The two resources differ only in the workload they run, so one
//! definition, `workload_grid!`, writes both: kube-derive makes one
//! concrete type per CRD (it takes no generic spec), and each CRD's schema
//! descriptions name its workload, so it is a macro rather than a generic
//! struct. Code that handles both sees them through [`WorkloadGrid`] and
//! [`WorkloadGridSpec`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStatus, StatefulSet, StatefulSetSpec, StatefulSetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::NamespaceResourceScope;
use kube::{CustomResource, Resource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::keys::{GridUniqKey, SiteName, TemplateName};
use crate::{ClusterStatus, Template};

/// A grid that runs one workload per site: DeploymentGrid (Deployments),
/// StatefulSetGrid (StatefulSets).
pub trait WorkloadGrid: Resource<DynamicType = (), Scope = NamespaceResourceScope> {
    /// The workload spec its templates hold (`DeploymentSpec`, `StatefulSetSpec`).
    type Template;
    /// Its spec.
    type Spec: WorkloadGridSpec<Template = Self::Template>;
    /// Its status.
    type Status;
    /// The workload each site runs (`Deployment`, `StatefulSet`).
    type Workload;

    /// `spec`.
    fn grid_spec(&self) -> &Self::Spec;
    /// `status`, if it has one.
    fn grid_status(&self) -> Option<&Self::Status>;
}

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

/// The spec of a [`WorkloadGrid`]: the site key, and the template fields
/// (`template`, `templatePool`, `templates`, `defaultTemplateName`,
/// `autoDeleteUnusedTemplate`), seen the same way for Deployments and
/// StatefulSets; and the per-site template choice they make.
pub trait WorkloadGridSpec {
    /// The workload spec a template holds (`DeploymentSpec`, `StatefulSetSpec`).
    type Template;

    /// `spec.gridUniqKey`: the node label whose values are the sites.
    fn grid_uniq_key(&self) -> &GridUniqKey;
    /// `spec.template`: what [`TemplateName::DEFAULT`] selects.
    fn template(&self) -> &Self::Template;
    /// `spec.templatePool`: named alternative templates.
    fn template_pool(&self) -> &BTreeMap<TemplateName, Template<Self::Template>>;
    /// `spec.templates`: the template name each site asks for.
    fn templates(&self) -> &BTreeMap<SiteName, TemplateName>;
    /// `spec.defaultTemplateName`, if set.
    fn default_template_name(&self) -> Option<&TemplateName>;
    /// `spec.autoDeleteUnusedTemplate` (absent is false).
    fn auto_delete_unused_template(&self) -> bool;

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
    fn template_for(&self, site: &SiteName) -> Result<&Self::Template, TemplateError> {
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

/// Defines one workload grid CRD: the spec (with the kube-derive resource),
/// the status, and their [`WorkloadGrid`] and [`WorkloadGridSpec`] impls.
/// What differs between the two is passed in: the names, the workload's
/// types, and the doc comments that mention the workload (they are the CRD
/// schema's descriptions).
macro_rules! workload_grid {
    (
        kind: $Kind:ident = $kind:literal,
        plural: $plural:literal,
        shortname: $shortname:literal,
        doc: $doc:literal,
        columns: ($sites_column:literal, $ready_column:literal),
        workload: $Workload:ty,
        $(#[$spec_doc:meta])*
        pub struct $Spec:ident {
            $(#[$template_doc:meta])*
            template: $Template:ty,
            $(#[$pool_doc:meta])*
            template_pool,
        }
        $(#[$status_doc:meta])*
        pub struct $Status:ident = $status:literal {
            $(#[$states_doc:meta])*
            states: $WorkloadStatus:ty,
            $(#[$sites_doc:meta])*
            sites,
            $(#[$ready_sites_doc:meta])*
            ready_sites,
        }
    ) => {
        $(#[$spec_doc])*
        // Two `printcolumn(...)` entries of the same type look like a repeated
        // attribute to clippy; each is a separate column.
        #[allow(clippy::duplicated_attributes)]
        #[derive(
            CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
        )]
        #[kube(
            group = "superedge.io",
            version = "v1",
            kind = $kind,
            plural = $plural,
            shortname = $shortname,
            namespaced,
            status = $status,
            derive = "Default",
            derive = "PartialEq",
            doc = $doc,
            printcolumn(
                name = "Sites",
                type_ = "integer",
                json_path = ".status.sites",
                description = $sites_column
            ),
            printcolumn(
                name = "Ready",
                type_ = "integer",
                json_path = ".status.readySites",
                description = $ready_column
            ),
            printcolumn(
                name = "Age",
                type_ = "date",
                json_path = ".metadata.creationTimestamp"
            )
        )]
        #[serde(rename_all = "camelCase")]
        pub struct $Spec {
            /// The node label key whose distinct values are the sites.
            pub grid_uniq_key: GridUniqKey,
            $(#[$template_doc])*
            pub template: $Template,
            $(#[$pool_doc])*
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            pub template_pool: BTreeMap<TemplateName, Template<$Template>>,
            /// The `templatePool` entry each site runs.
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            pub templates: BTreeMap<SiteName, TemplateName>,
            /// The template for sites not in `templates`; absent or `"default"` means `template`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub default_template_name: Option<TemplateName>,
            /// Whether `templatePool` entries no site uses are removed.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub auto_delete_unused_template: Option<bool>,
        }

        $(#[$status_doc])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct $Status {
            $(#[$states_doc])*
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            pub states: BTreeMap<SiteName, $WorkloadStatus>,
            $(#[$sites_doc])*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub sites: Option<i32>,
            $(#[$ready_sites_doc])*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub ready_sites: Option<i32>,
            /// Multi-cluster (control cluster, `superedge.io/fed: "yes"`): each
            /// managed cluster's own report, kept apart by cluster name.
            #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
            pub clusters: BTreeMap<String, ClusterStatus<$WorkloadStatus>>,
            /// Multi-cluster conditions: `ClustersReachable`, `SitesUnique`.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub conditions: Vec<Condition>,
        }

        impl WorkloadGridSpec for $Spec {
            type Template = $Template;

            fn grid_uniq_key(&self) -> &GridUniqKey {
                &self.grid_uniq_key
            }
            fn template(&self) -> &$Template {
                &self.template
            }
            fn template_pool(&self) -> &BTreeMap<TemplateName, Template<$Template>> {
                &self.template_pool
            }
            fn templates(&self) -> &BTreeMap<SiteName, TemplateName> {
                &self.templates
            }
            fn default_template_name(&self) -> Option<&TemplateName> {
                self.default_template_name.as_ref()
            }
            fn auto_delete_unused_template(&self) -> bool {
                self.auto_delete_unused_template == Some(true)
            }
        }

        impl WorkloadGrid for $Kind {
            type Template = $Template;
            type Spec = $Spec;
            type Status = $Status;
            type Workload = $Workload;

            fn grid_spec(&self) -> &$Spec {
                &self.spec
            }
            fn grid_status(&self) -> Option<&$Status> {
                self.status.as_ref()
            }
        }
    };
}

workload_grid! {
    kind: DeploymentGrid = "DeploymentGrid",
    plural: "deploymentgrids",
    shortname: "dg",
    doc: "A Deployment template run once per site (NodeUnit).",
    columns: (
        "Sites with a Deployment",
        "Sites whose Deployment has all replicas available"
    ),
    workload: Deployment,
    /// The desired state of a DeploymentGrid: a Deployment template run once per site.
    pub struct DeploymentGridSpec {
        /// The Deployment spec every site runs unless `templates` says otherwise.
        template: DeploymentSpec,
        /// Named alternative Deployment specs, for per-site canaries.
        template_pool,
    }
    /// What the controller observed, per site.
    pub struct DeploymentGridStatus = "DeploymentGridStatus" {
        /// Each site's Deployment status (replicas, readyReplicas, updatedReplicas,
        /// availableReplicas, conditions), keyed by site as in SuperEdge.
        states: DeploymentStatus,
        /// How many sites have a Deployment (for `kubectl get dg`).
        sites,
        /// How many sites have all their replicas available (for `kubectl get dg`).
        ready_sites,
    }
}

workload_grid! {
    kind: StatefulSetGrid = "StatefulSetGrid",
    plural: "statefulsetgrids",
    shortname: "ssg",
    doc: "A StatefulSet template run once per site (NodeUnit).",
    columns: (
        "Sites with a StatefulSet",
        "Sites whose StatefulSet has all replicas available"
    ),
    workload: StatefulSet,
    /// The desired state of a StatefulSetGrid: a StatefulSet template run once per site.
    pub struct StatefulSetGridSpec {
        /// The StatefulSet spec every site runs unless `templates` says otherwise.
        template: StatefulSetSpec,
        /// Named alternative StatefulSet specs, for per-site canaries.
        template_pool,
    }
    /// What the controller observed, per site.
    pub struct StatefulSetGridStatus = "StatefulSetGridStatus" {
        /// Each site's StatefulSet status (replicas, readyReplicas, updatedReplicas,
        /// availableReplicas, conditions), keyed by site as in SuperEdge.
        states: StatefulSetStatus,
        /// How many sites have a StatefulSet (for `kubectl get ssg`).
        sites,
        /// How many sites have all their replicas available (for `kubectl get ssg`).
        ready_sites,
    }
}
