//! Encoding objects once into shareable bytes, in the two wire formats the
//! cached kinds are served in: JSON ([`json`]) and Kubernetes protobuf
//! ([`proto`]). Tables are built per request from the JSON.

pub mod codec;
pub mod json;
pub mod proto;

pub use json::{encode_body, Encoded};

use std::{cell::RefCell, thread::LocalKey};

/// The largest buffer [`with_scratch`] keeps for its thread between uses.
const SCRATCH_KEPT: usize = 256 << 10;

/// Runs `f` on `buffer`, a scratch buffer of this thread's (cleared first),
/// so that encoding an object allocates only what is kept of it: not a new
/// buffer per object, grown in steps, whose pieces left holes in the heap
/// between the long-lived packed bodies. A buffer a large object grew past
/// 256 KiB is given back afterwards.
pub(crate) fn with_scratch<R>(
    buffer: &'static LocalKey<RefCell<Vec<u8>>>,
    f: impl FnOnce(&mut Vec<u8>) -> R,
) -> R {
    buffer.with_borrow_mut(|buf| {
        buf.clear();
        let result = f(buf);
        if buf.capacity() > SCRATCH_KEPT {
            *buf = Vec::new();
        }
        result
    })
}

/// The wire format an object or an event is encoded in once and shared.
pub use sitegrid_apimachinery::negotiate::Wire;
