//! AFL entry point of the `api_path` target (see `sitegrid_fuzz::api_path`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::api_path(data));
}
