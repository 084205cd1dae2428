//! AFL entry point of the `protobuf` target (see `sitegrid_fuzz::protobuf`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::protobuf(data));
}
