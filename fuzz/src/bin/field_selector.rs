//! AFL entry point of the `field_selector` target (see `sitegrid_fuzz::field_selector`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::field_selector(data));
}
