//! sitegrid-certs: CA, serving and client certificates and kubeconfigs for the
//! proxy and kube-proxy.
//!
//! Not built yet: a later issue fills this crate. It exists so the workspace
//! has its final shape from the start.
