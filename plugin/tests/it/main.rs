//! kubectl-sitegrid's integration tests, one binary: each command run as a
//! user runs it against the in-memory API server (the two-site world, and a
//! cluster without sitegrid's CRDs), through the real kubectl's plugin
//! lookup, and `endpoints --node` checked against sitegrid-proxy's own cache.

mod common;
mod endpoints;
mod errors;
mod kubectl;
mod proxy_agrees;
mod sites;
mod status;
