//! AFL entry point of the `certs` target (see `sitegrid_fuzz::certs`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::certs(data));
}
