//! Why a reconcile failed.

use crate::render::GridError;

/// Why a reconcile failed (it is retried after
/// [`RETRY_AFTER`](super::retry::RETRY_AFTER) or later).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The grid cannot be rendered at all.
    #[error(transparent)]
    Grid(#[from] GridError),
    /// An API request failed.
    #[error("{}", describe(.0))]
    Kube(#[from] kube::Error),
    /// An object could not be turned into JSON.
    #[error("encoding an object: {0}")]
    Json(#[from] serde_json::Error),
    /// The grid's CRD serves no status subresource: SuperEdge's own CRDs
    /// have none, so a cluster migrating from it that kept them cannot hold
    /// a grid's status.
    #[error("the {crd} CustomResourceDefinition has no status subresource (SuperEdge's CRDs have none): install sitegrid's CRDs (kubectl apply -k deploy/crds, or sitegrid-controller crds | kubectl apply -f -)")]
    NoStatusSubresource {
        /// The CRD's name.
        crd: String,
    },
    /// Some sites failed to apply; the others were reconciled.
    #[error("{failed} site(s) could not be applied")]
    Sites {
        /// How many.
        failed: usize,
    },
}

impl Error {
    /// Whether an apply that failed with this error may succeed if simply
    /// retried: not when the API server refused the object itself (400
    /// BadRequest, 422 Invalid), which only a change to the grid can fix.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Kube(kube::Error::Api(status)) => !matches!(status.code, 400 | 422),
            Self::Json(_) => false,
            _ => true,
        }
    }
}

/// An API error as one line: the API server's own message for a refused
/// request (what `kubectl` would print), the client's error otherwise.
fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.reason),
        other => format!("kubernetes API: {other}"),
    }
}
