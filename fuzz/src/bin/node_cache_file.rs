//! AFL entry point of the `node_cache_file` target (see `sitegrid_fuzz::node_cache_file`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::node_cache_file(data));
}
