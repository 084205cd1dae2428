//! sitegrid-controller's integration tests, one binary: the generated CRDs,
//! the seeds' YAML read unchanged, the pure expansion, and the binary's flags
//! and operator endpoints, and bad grids reconciled against a scripted API
//! server.

mod apiserver;
mod bad_grids;
mod cli;
mod common;
mod crds;
mod karmada;
mod render;
mod seeds;
