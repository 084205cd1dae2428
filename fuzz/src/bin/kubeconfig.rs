//! AFL entry point of the `kubeconfig` target (see `sitegrid_fuzz::kubeconfig`).

fn main() {
    afl::fuzz!(|data: &[u8]| sitegrid_fuzz::kubeconfig(data));
}
