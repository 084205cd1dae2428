//! HTTP building blocks every layer above uses: the one body type, responses
//! shaped as kube-apiserver shapes them, and serving TLS.

mod body;
pub mod caller;
pub mod framed;
pub mod produced;
pub mod response;
pub mod tls;

pub use body::{Body, BoxError};
pub use caller::{Caller, KubeletPort};
pub use framed::Framed;
