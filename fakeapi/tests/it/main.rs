//! The in-memory API server's integration tests, one binary: list, watch,
//! write, discovery, Tables and metadata-only reads over real loopback
//! sockets, egress accounting, node heartbeats, and the real `kubectl` and
//! kube-rs' metadata watcher as clients; and the releases the server plays
//! (1.20, 1.31, 1.35: discovery, ServiceCIDRs, WatchList, field selectors,
//! the world's shapes), with kubectl 1.33 against 1.35.

mod common;
mod discovery;
mod egress;
mod heartbeat;
mod kube_rs;
mod kubectl;
mod list;
mod metadata;
mod protobuf;
mod releases;
mod serve;
mod servicecidrs;
mod table;
mod watch;
mod watch_list;
mod write;
