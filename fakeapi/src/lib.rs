//! sitegrid's load-test kit: an in-memory Kubernetes API server that behaves
//! like kube-apiserver 1.20 for list/watch clients ([`apiserver`]), and the
//! sample clusters it is loaded with ([`sample`]).
#![warn(missing_docs)]

pub mod apiserver;
pub mod sample;

pub use apiserver::{ApiServer, ApiServerConfig, RequestRecord, ServerHandle};
