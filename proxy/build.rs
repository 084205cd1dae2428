//! The image build's code order (deploy/images/link-order.sh, decision
//! 0012): with `SITEGRID_LINK_ORDER` naming a symbol ordering file, the
//! proxy binary is linked with lld's `--symbol-ordering-file` of it. Unset
//! (every other build), nothing changes. A build script, not `cargo rustc`
//! or RUSTFLAGS: the image build relinks with the same command, so the
//! dependencies keep the features they were built with and their symbols
//! the names the file holds, and nothing but the proxy is built again.

fn main() {
    println!("cargo:rerun-if-env-changed=SITEGRID_LINK_ORDER");
    let Some(order) = std::env::var_os("SITEGRID_LINK_ORDER").filter(|o| !o.is_empty()) else {
        return;
    };
    let order = std::path::PathBuf::from(order);
    println!("cargo:rerun-if-changed={}", order.display());
    println!(
        "cargo:rustc-link-arg-bin=sitegrid-proxy=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    // Names the order holds that this link does not have (a function
    // inlined everywhere) are no error.
    println!("cargo:rustc-link-arg-bin=sitegrid-proxy=-Wl,--no-warn-symbol-ordering");
}
