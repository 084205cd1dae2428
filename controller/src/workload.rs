//! The workloads a grid runs in each site, Deployment and StatefulSet: what
//! a grid's template becomes, what it is named, and when it counts as ready.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde_json::{json, Value};
use sitegrid_api::names::NameRule;

/// A workload a grid runs per site (Deployment, StatefulSet).
pub trait Workload: Sized {
    /// Its spec, as the grid's templates hold it.
    type Spec: Clone;
    /// How its name must look.
    const NAME_RULE: NameRule;
    /// The fields (JSON pointers) that must already hold what the grid asks
    /// for before a child made by someone else is adopted: changing them
    /// would restart its pods, or the API server refuses to change them.
    const ADOPTION_FIELDS: &'static [&'static str];
    /// The spec's pod template.
    fn pod_template(spec: &mut Self::Spec) -> &mut PodTemplateSpec;
    /// The object.
    fn new(metadata: ObjectMeta, spec: Self::Spec) -> Self;
    /// Its status as JSON (`{}` if it has none).
    fn status_json(&self) -> Value;
    /// Whether it runs its current spec with all its replicas available.
    fn is_ready(&self) -> bool;
}

/// The [`Workload`] impl of an `apps/v1` kind; `ready` says, from the
/// replicas it wants and its status, whether they are all available.
macro_rules! workload {
    ($kind:ty, $spec:ty, $rule:expr, $adoption:expr, |$want:ident, $status:ident| $ready:expr) => {
        impl Workload for $kind {
            type Spec = $spec;
            const NAME_RULE: NameRule = $rule;
            const ADOPTION_FIELDS: &'static [&'static str] = $adoption;

            fn pod_template(spec: &mut $spec) -> &mut PodTemplateSpec {
                &mut spec.template
            }
            fn new(metadata: ObjectMeta, spec: $spec) -> Self {
                Self {
                    metadata,
                    spec: Some(spec),
                    status: None,
                }
            }
            fn status_json(&self) -> Value {
                self.status
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s).ok())
                    .unwrap_or_else(|| json!({}))
            }
            fn is_ready(&self) -> bool {
                let $want = self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                self.status.as_ref().is_some_and(|$status| {
                    observed_current(self, $status.observed_generation) && $ready
                })
            }
        }
    };
}

workload!(
    Deployment,
    DeploymentSpec,
    NameRule::Subdomain,
    // The selector is immutable; the pod template makes a new ReplicaSet.
    &["/spec/selector", "/spec/template"],
    |want, status| status.updated_replicas.unwrap_or(0) >= want
        && status.available_replicas.unwrap_or(0) >= want
);

// Pods are `{name}-{ordinal}`, and the controller-revision-hash label
// `{name}-{hash}` must fit in 63 characters: the name stops at 52.
workload!(
    StatefulSet,
    StatefulSetSpec,
    NameRule::StatefulSetLabel,
    // Everything but replicas, the template and the update strategy is
    // immutable; the template makes a new revision.
    &[
        "/spec/selector",
        "/spec/serviceName",
        "/spec/volumeClaimTemplates",
        "/spec/podManagementPolicy",
        "/spec/template",
    ],
    |want, status| status.ready_replicas.unwrap_or(0) >= want
);

/// Whether the workload controller has seen the workload's current spec.
fn observed_current<W: Resource>(workload: &W, observed: Option<i64>) -> bool {
    observed.unwrap_or(0) >= workload.meta().generation.unwrap_or(0)
}
