//! Kubernetes API machinery shared by sitegrid's proxy and its in-memory API
//! server: the `Status` error object, label and field selectors, continue
//! tokens, content negotiation, API paths, server-side tables and EndpointSlice version
//! conversion.
//!
//! Everything here is pure (no I/O) and reproduces what kube-apiserver 1.20
//! sends, byte for byte where a client could tell the difference (see
//! `shared/reference/apiserver-1.20-responses.md`).
#![warn(missing_docs)]

pub mod continue_token;
pub mod duration;
pub mod endpointslice;
pub mod negotiate;
pub mod path;
pub mod protobuf;
pub mod selector;
pub mod status;
pub mod table;
pub mod watch;

pub use status::Status;
