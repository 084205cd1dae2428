//! sitegrid-dnsd's integration tests: the binary against the in-memory API
//! server, its file read by a real DNS server (dnsmasq) and queried with dig.

mod cli;
mod common;
mod dns;
mod node;
