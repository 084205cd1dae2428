//! AFL entry point of the `protobuf_answer` target (see `sitegrid_fuzz::protobuf_answer`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::protobuf_answer(data));
}
