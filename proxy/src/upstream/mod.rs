//! What comes from the API server, above the cache: the feeds that keep it
//! in sync — one list/watch stream per kind ([`reflector`], run by
//! [`sync`]) and the node membership that decides which Nodes to watch
//! ([`membership`]) — their error accounting ([`errors`]), and the pooled
//! client that carries passthrough requests ([`client`]); the reflectors
//! read Services and endpoints in protobuf ([`protobuf`]). Whether the API
//! server can be reached at all is one state ([`health`]); the kubelet's
//! requests go upstream with its own certificate ([`kubelet`]).

pub mod client;
pub mod deadline;
pub mod errors;
pub mod health;
pub mod kubelet;
pub mod membership;
pub mod protobuf;
pub mod reflector;
pub mod sync;

pub use client::{upstream, upstream_without_credentials, Upstream};
