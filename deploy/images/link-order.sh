#!/usr/bin/env bash
# Writes the functions a node's proxy runs first, as the order for the
# image build to link sitegrid-proxy with (docs/decisions/0012): the code
# an idle or lightly loaded proxy runs is a fifth of the binary's, spread
# over all of it, and the kernel maps 64 KiB around every page touched, so
# without an order nearly the whole of the code is resident.
#
#   order=$(deploy/images/link-order.sh PROFILE)   # after cargo built sitegrid-proxy in PROFILE
#
# Builds sitegrid-apiserver (the in-memory API server) in PROFILE, runs the
# proxy under valgrind's callgrind against it through a node's first
# seconds (start, first sync, kube-proxy's lists in JSON and protobuf, its
# watches while two EndpointSlice changes pass, a few seconds idle), and
# writes the functions it ran (callgrind lists them grouped by source file)
# as lld's symbol ordering file beside the binary
# (deploy/images/link-order.py); prints its path and nothing else.
# build.sh then links again with it (SITEGRID_LINK_ORDER, proxy/build.rs),
# with its own cargo command: the same features, so the same symbol names.
# Without valgrind, or for a binary another linker made, it says so and
# prints nothing. Listens on 127.0.0.1 only, on ports the kernel picks.
set -euo pipefail
[[ $# -eq 1 ]] || { sed -n '2,20p' "$0" >&2; exit 2; }
PROFILE=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TRIPLE=x86_64-unknown-linux-gnu
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
dir=$TARGET_DIR/$TRIPLE/$PROFILE
proxy=$dir/sitegrid-proxy
api=$dir/sitegrid-apiserver

skip() {
    echo "link-order.sh: $*: sitegrid-proxy keeps the linker's own order (an idle proxy then maps about 5 MiB more of its code)" >&2
    exit 0
}
[[ -x $proxy ]] || { echo "link-order.sh: $proxy: not built" >&2; exit 1; }
command -v valgrind >/dev/null || skip "valgrind not found (Debian: apt-get install valgrind)"
for tool in curl python3 nm readelf; do
    command -v "$tool" >/dev/null || { echo "link-order.sh: $tool not found" >&2; exit 1; }
done
comment=$(readelf -p .comment "$proxy" 2>/dev/null || true)
grep -q 'Linker: LLD' <<<"$comment" || skip "$proxy was not linked by LLD"

# The API server is only the proxy's peer here; with build.sh's flags its
# build shares what it can (cargo's output to stderr: stdout is the order's
# path).
(cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" flock /tmp/sitegrid-cargo.lock \
    cargo build --profile "$PROFILE" --locked --target "$TRIPLE" -p sitegrid-fakeapi --bin sitegrid-apiserver) >&2

work=$(mktemp -d)
pids=()
cleanup() {
    # The proxy handles SIGTERM (and may be stuck in its shutdown): KILL
    # after a grace, so this never waits without end.
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        ((alive)) || break
        sleep 0.1
    done
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The first line the in-memory API server prints is its URL.
# RUST_LOG would change what both print, which is read below.
env -u RUST_LOG "$api" --bind-address 127.0.0.1:0 --sample synthetic --sites 10 --nodes-per-site 2 \
    --services 20 --endpoints-per-service 4 >"$work/api.out" 2>&1 &
pids+=($!)
upstream=
for _ in $(seq 100); do
    upstream=$(sed -n '1s|^\(http://127\.0\.0\.1:[0-9]*\)$|\1|p' "$work/api.out")
    [[ -n $upstream ]] && break
    sleep 0.1
done
[[ -n $upstream ]] || { cat "$work/api.out" >&2; echo "link-order.sh: the in-memory API server did not start" >&2; exit 1; }
cat >"$work/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$upstream"}
contexts:
- name: c
  context: {cluster: c, user: u}
users:
- name: u
  user: {}
current-context: c
KUBECONFIG

env -u RUST_LOG valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
    "$proxy" --kubeconfig="$work/kubeconfig" --bind-address=127.0.0.1:0 --log-level=info \
    --hostname=site-0-node-0 --data-dir="$work/data" >"$work/proxy.log" 2>&1 &
grind=$!
pids+=($grind)
base=
for _ in $(seq 600); do
    base=$(sed -n 's/.*sitegrid-proxy starting.*local_addr=\(127\.0\.0\.1:[0-9]*\).*/http:\/\/\1/p;T;q' "$work/proxy.log")
    [[ -n $base ]] && curl -sf -o /dev/null -m 5 "$base/livez" && break
    base=
    sleep 0.2
done
[[ -n $base ]] || { cat "$work/proxy.log" >&2; echo "link-order.sh: the proxy did not start under valgrind" >&2; exit 1; }

# What the proxy is asked is best effort: a request that fails here (a slow
# machine, valgrind's pace) only leaves its code out of the order.
protobuf='Accept: application/vnd.kubernetes.protobuf, application/json'
slices=/apis/discovery.k8s.io/v1/endpointslices
for path in $slices /api/v1/services /api/v1/nodes/site-0-node-0; do
    curl -sf -o /dev/null -m 60 "$base$path" || true
    curl -sf -o /dev/null -m 60 -H "$protobuf" "$base$path" || true
done
watches=()
for path in "$slices?watch=1&allowWatchBookmarks=true" "/api/v1/services?watch=1&allowWatchBookmarks=true"; do
    curl -s -o /dev/null -m 8 "$base$path" &
    watches+=($!)
    curl -s -o /dev/null -m 8 -H "$protobuf" "$base$path" &
    watches+=($!)
done
sleep 2
slice=$(curl -sf "$upstream$slices" |
    python3 -c 'import json, sys; s = json.load(sys.stdin)["items"][0]["metadata"]; print(s["namespace"] + "/" + s["name"])' ||
    true)
for ready in false true; do
    [[ -n $slice ]] || break
    curl -sf -o /dev/null -X PATCH -H 'Content-Type: application/json-patch+json' \
        -d "[{\"op\": \"replace\", \"path\": \"/endpoints/0/conditions/ready\", \"value\": $ready}]" \
        "$upstream/apis/discovery.k8s.io/v1/namespaces/${slice%/*}/endpointslices/${slice#*/}" || true
    sleep 1
done
for w in "${watches[@]}"; do wait "$w" || true; done
sleep 3
# SIGINT: the proxy shuts down and callgrind writes what it counted.
kill -INT "$grind" 2>/dev/null ||
    { tail -20 "$work/proxy.log" >&2; echo "link-order.sh: the proxy under valgrind ended on its own" >&2; exit 1; }
for _ in $(seq 600); do
    kill -0 "$grind" 2>/dev/null || break
    sleep 0.2
done
if kill -0 "$grind" 2>/dev/null; then
    tail -20 "$work/proxy.log" >&2
    echo "link-order.sh: the proxy did not stop within 2 minutes of SIGINT under valgrind" >&2
    exit 1
fi
wait "$grind" || true

# Absolute: the proxy's build script and lld read it from other directories.
order=$(realpath -m "$dir/sitegrid-proxy.order")
python3 "$ROOT/deploy/images/link-order.py" "$work/callgrind.out" "$proxy" >"$order.new"
[[ -s $order.new ]] || { echo "link-order.sh: callgrind named none of the proxy's functions" >&2; exit 1; }
mv "$order.new" "$order"
echo "$order"
