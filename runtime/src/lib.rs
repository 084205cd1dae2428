//! What every sitegrid binary does the same way, so operators meet one set of
//! rules: which kubeconfig is used, how logs look, how a start-up error is
//! printed, which signals stop the process, how durations are written on the
//! command line, how a port is served, how a service manager is told the
//! binary is ready, the operator endpoints (`/healthz`, `/livez`, `/readyz`,
//! `/metrics` with the standard process metrics), and files replaced
//! atomically.
#![warn(missing_docs)]

mod duration;
mod error;
pub mod fs;
mod host;
mod kubeconfig;
mod log;
pub mod memory;
mod nofile;
pub mod ops;
mod process;
mod reap;
pub mod response;
pub mod serve;
mod service;
mod shutdown;

pub use duration::{parse_duration, parse_positive_duration};
pub use error::error_line;
pub use host::host_name;
pub use kubeconfig::{kube_config, kube_config_in_context};
pub use log::{LogArgs, LogFormat};
pub use nofile::raise_open_files_limit;
pub use service::notify_ready;
pub use shutdown::{cancel_on_signal, shutdown_signal};
