//! sitegrid-controller's integration tests, one binary: the generated CRDs,
//! the seeds' YAML read unchanged, the pure expansion, and the binary's flags
//! and operator endpoints.

mod cli;
mod common;
mod crds;
mod karmada;
mod render;
mod seeds;
