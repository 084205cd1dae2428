//! The in-memory API server's integration tests, one binary: list, watch,
//! write, discovery, Tables and metadata-only reads over real loopback
//! sockets, egress accounting, node heartbeats, and the real `kubectl` and
//! kube-rs' metadata watcher as clients.

mod common;
mod discovery;
mod egress;
mod heartbeat;
mod kube_rs;
mod kubectl;
mod list;
mod metadata;
mod serve;
mod table;
mod watch;
mod write;
