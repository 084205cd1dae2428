//! AFL entry point of the `query` target (see `sitegrid_fuzz::query`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::query(data));
}
