//! AFL entry point of the `continue_token` target (see `sitegrid_fuzz::continue_token`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::continue_token(data));
}
