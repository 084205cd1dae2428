//! sitegrid's development kit, never linked into a shipped binary: an
//! in-memory Kubernetes API server that behaves like kube-apiserver 1.20 (or
//! 1.31, 1.35: [`KubernetesVersion`]) for list/watch clients
//! ([`apiserver`]), the sample clusters it is loaded with ([`sample`]), the real `kubectl` as a test client ([`kubectl`]), and the
//! small helpers the workspace's tests share ([`testing`]).
#![warn(missing_docs)]

pub mod apiserver;
pub mod kubectl;
pub mod sample;
pub mod testing;

pub use apiserver::{
    ApiServer, ApiServerConfig, ConfigError, Egress, FeatureGates, FormEgress, Heartbeats,
    KubernetesVersion, RequestRecord, ResourceEgress, ServerHandle, TlsServing,
};
