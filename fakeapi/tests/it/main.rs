//! The in-memory API server's integration tests, one binary: list, watch,
//! write, discovery and Tables over real loopback sockets, and the real
//! `kubectl` as a client.

mod common;
mod discovery;
mod heartbeat;
mod kubectl;
mod list;
mod serve;
mod table;
mod watch;
mod write;
