//! Fuzz targets for every parser in sitegrid that sees outside bytes: what
//! clients send the proxy (selectors, query strings, continue tokens, paths,
//! `Accept`), what the API server sends it (objects, watch frames), what it
//! reads back from disk (the snapshot) and what the binaries read at start
//! (kubeconfigs, certificates and keys).
//!
//! Each target is a plain function over `&[u8]`: the AFL binaries in
//! `src/bin` call it (`cargo afl build --features afl`), and
//! `tests/corpus.rs` replays the committed corpus and regressions through it
//! on every `cargo test`. A target never unwraps what the code under test
//! returns: errors are answers. Only a panic raised by the code under test,
//! or a broken invariant asserted here (a parsed value that does not survive
//! its own printed form), is a finding.
#![warn(missing_docs)]

mod targets;

pub use targets::{
    accept, api_path, certs, continue_token, field_selector, kubeconfig, label_selector,
    node_cache_file, pod_status, projector, protobuf, protobuf_answer, query, serve, snapshot,
    watch_frames,
};

/// A target: its name (of its binary and its corpus folder) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target by name, as `run.sh`, the corpus folders and the corpus test name them.
pub const TARGETS: &[Target] = &[
    ("label_selector", label_selector),
    ("field_selector", field_selector),
    ("query", query),
    ("serve", serve),
    ("continue_token", continue_token),
    ("api_path", api_path),
    ("accept", accept),
    ("snapshot", snapshot),
    ("projector", projector),
    ("watch_frames", watch_frames),
    ("protobuf", protobuf),
    ("protobuf_answer", protobuf_answer),
    ("kubeconfig", kubeconfig),
    ("certs", certs),
    ("node_cache_file", node_cache_file),
    ("pod_status", pod_status),
];

/// The input as text when it is UTF-8 (what an HTTP library or a file
/// reader hands on): the string parsers never see anything else.
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
