//! The targets, grouped by where their bytes come from.

mod files;
mod request;
mod serve;
mod snapshot;
mod upstream;

pub use files::{certs, kubeconfig};
pub use request::{accept, api_path, continue_token, field_selector, label_selector, query};
pub use serve::serve;
pub use snapshot::snapshot;
pub use upstream::{projector, protobuf, watch_frames};
