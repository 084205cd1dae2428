//! AFL entry point of the `serve` target (see `sitegrid_fuzz::serve`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::serve(data));
}
