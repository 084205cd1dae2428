//! AFL entry point of the `projector` target (see `sitegrid_fuzz::projector`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::projector(data));
}
