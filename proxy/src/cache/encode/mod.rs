//! Encoding objects once into shareable bytes, in the two wire formats the
//! cached kinds are served in: JSON ([`json`]) and Kubernetes protobuf
//! ([`proto`]). Tables are built per request from the JSON.

pub mod json;
pub mod packed;
pub mod proto;

pub use json::{encode_body, Encoded};

/// A wire format an object or an event is encoded in once and shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}
