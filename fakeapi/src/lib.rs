//! sitegrid's development kit, never linked into a shipped binary: an
//! in-memory Kubernetes API server that behaves like kube-apiserver 1.20 for
//! list/watch clients ([`apiserver`]), the sample clusters it is loaded with
//! ([`sample`]), and the real `kubectl` as a test client ([`kubectl`]).
#![warn(missing_docs)]

pub mod apiserver;
pub mod kubectl;
pub mod sample;

pub use apiserver::{
    ApiServer, ApiServerConfig, Egress, FormEgress, Heartbeats, RequestRecord, ResourceEgress,
    ServerHandle,
};
