//! sitegrid-proxy's integration tests, one binary (linking is what costs on
//! two cores): the proxy's stack called directly (`list_get`, `watch`, `ops`),
//! over real sockets against the in-memory API server and the real `kubectl`
//! (`gateway`, `loopback`, `https`), TLS (`tls`) and the binary's flags (`cli`).

mod cli;
mod common;
mod fd_limit;
mod gateway;
mod https;
mod kube_proxy_model;
mod kube_proxy_start;
mod kube_proxy_table;
mod kubelet_table;
mod list_get;
mod loopback;
mod node_cache;
mod offline;
mod ops;
mod protobuf;
mod protobuf_complete;
mod service_manager;
mod site_reports;
mod tls;
mod upstream_faults;
mod watch;
