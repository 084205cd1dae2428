//! AFL entry point of the `watch_frames` target (see `sitegrid_fuzz::watch_frames`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::watch_frames(data));
}
