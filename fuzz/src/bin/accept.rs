//! AFL entry point of the `accept` target (see `sitegrid_fuzz::accept`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::accept(data));
}
