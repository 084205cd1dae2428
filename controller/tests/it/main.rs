//! sitegrid-controller's integration tests, one binary: the seeds' YAML read
//! unchanged, the pure expansion, the binary's flags and operator endpoints,
//! bad grids reconciled against a scripted API server, and SIGTERM while the
//! leader election fails. (The generated
//! CRDs are tested with their types, in sitegrid-api.)

mod apiserver;
mod bad_grids;
mod cli;
mod common;
mod karmada;
mod render;
mod seeds;
mod shutdown;
mod superedge;
