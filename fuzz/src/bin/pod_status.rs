//! AFL entry point of the `pod_status` target (see `sitegrid_fuzz::pod_status`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::pod_status(data));
}
