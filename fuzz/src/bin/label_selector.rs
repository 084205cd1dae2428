//! AFL entry point of the `label_selector` target (see `sitegrid_fuzz::label_selector`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::label_selector(data));
}
