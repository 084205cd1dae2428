//! sitegrid-controller's integration tests, one binary: the seeds' YAML read
//! unchanged, the pure expansion, the binary's flags and operator endpoints,
//! and bad grids reconciled against a scripted API server. (The generated
//! CRDs are tested with their types, in sitegrid-api.)

mod apiserver;
mod bad_grids;
mod cli;
mod common;
mod karmada;
mod render;
mod seeds;
