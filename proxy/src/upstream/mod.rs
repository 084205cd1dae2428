//! What comes from the API server: the object type the reflectors decode
//! into, one list/watch stream per resource, and the pooled client that
//! carries passthrough requests.

pub mod client;
pub mod deadline;
pub mod errors;
pub mod object;
pub mod reflector;

pub use client::{upstream, upstream_without_credentials, Upstream};
pub use object::{object_key, UpstreamObject};
