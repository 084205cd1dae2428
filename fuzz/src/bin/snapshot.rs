//! AFL entry point of the `snapshot` target (see `sitegrid_fuzz::snapshot`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::snapshot(data));
}
