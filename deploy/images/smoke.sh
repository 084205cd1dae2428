#!/usr/bin/env bash
# The proxy's image at work, offline: sitegrid-demo's in-memory API server
# (the two-site sample) on loopback, and sitegrid/sitegrid-proxy:TAG (from
# build.sh) run from its image with buildah (chroot isolation) as node gz-2
# against it: it runs as the image's user 65532, gets ready, and serves
# guangzhou's endpoints only. CI runs it after build.sh.
#
#   deploy/images/smoke.sh [TAG]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TAG=${1:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
# free_port FROM: the first port from FROM on that no socket holds. Ports below the kernel's
# ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default), which no outgoing
# connection takes as its own: CI runs this beside the loopback scenarios, and with fixed
# ports in that range one of their connections once held the proxy's port when it came to
# listen ("Address already in use").
free_port() {
    local p
    for ((p = $1; p < $1 + 100; p++)); do
        [[ -n $(ss -HtanO "sport = :$p") ]] || { echo "$p"; return 0; }
    done
    echo "smoke.sh: no free port in $1-$(($1 + 99))" >&2
    return 1
}
API=$(free_port 24100) DEMO_PROXY=$(free_port 24200) PROXY=$(free_port 24300)
buildah=(buildah --storage-driver vfs)
image=sitegrid/sitegrid-proxy:$TAG
work=$(mktemp -d)
demo= run= container=

die() { echo "smoke.sh: FAIL: $*" >&2; tail -n 20 "$work"/*.log >&2 2>/dev/null || true; exit 1; }
# retry SECONDS CMD...: until CMD succeeds, every 0.2 s.
retry() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}
# stop PID: TERM, then KILL after 5 s.
stop() {
    kill "$1" 2>/dev/null || return 0
    retry 5 bash -c "! kill -0 $1" || kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    set +e
    if [[ -n $run ]]; then stop "$run"; fi
    if [[ -n $demo ]]; then stop "$demo"; fi
    if [[ -n $container ]]; then "${buildah[@]}" rm "$container" >/dev/null 2>&1; fi
    rm -rf "$work"
}
trap cleanup EXIT

# SITEGRID_IMAGES_SKIP_CARGO=1 (as for build.sh): sitegrid-demo is built already, and another
# build may hold the lock meanwhile (.ci/run's fuzz stage).
[[ ${SITEGRID_IMAGES_SKIP_CARGO:-} == 1 ]] ||
    (cd "$ROOT" && flock /tmp/sitegrid-cargo.lock cargo build --quiet --locked -p sitegrid-loadtest --bin sitegrid-demo)
[[ -x $TARGET_DIR/debug/sitegrid-demo ]] || die "$TARGET_DIR/debug/sitegrid-demo: not built"
"$TARGET_DIR/debug/sitegrid-demo" --bind-address "127.0.0.1:$DEMO_PROXY" --upstream-address "127.0.0.1:$API" \
    >"$work/demo.log" 2>&1 &
demo=$!
retry 30 curl -sf "http://127.0.0.1:$API/version" || die "the demo's API server does not answer"

# Plain HTTP upstream, no certificate-authority: the image's CA bundle is what lets it start.
cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: demo, cluster: {server: "http://127.0.0.1:$API"}}]
users: [{name: demo, user: {}}]
contexts: [{name: demo, context: {cluster: demo, user: demo}}]
current-context: demo
KC
chmod 644 "$work/kubeconfig"
container=$("${buildah[@]}" from "$image")
"${buildah[@]}" run --isolation chroot -v "$work/kubeconfig:/etc/sitegrid/kubeconfig:ro" "$container" -- \
    /usr/local/bin/sitegrid-proxy --kubeconfig /etc/sitegrid/kubeconfig --hostname gz-2 \
    --bind-address "127.0.0.1:$PROXY" >"$work/proxy.log" 2>&1 &
run=$!
retry 30 curl -sf "http://127.0.0.1:$PROXY/readyz" || die "the image's proxy never got ready"

pid=$(ss -ltnpH "sport = :$PROXY" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1)
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[[ $uid == 65532 ]] || die "the image's proxy runs as uid $uid, not 65532"
ips=$(curl -sf "http://127.0.0.1:$PROXY/apis/discovery.k8s.io/v1/namespaces/default/endpointslices" |
    python3 -c 'import json, sys
print(" ".join(sorted(a for i in json.load(sys.stdin)["items"] if i["metadata"]["labels"].get("kubernetes.io/service-name") == "servicegrid-demo-svc"
    for e in i["endpoints"] or [] for a in e["addresses"])))')
[[ $ips == "10.0.0.139 10.0.1.8" ]] || die "gz-2's servicegrid-demo-svc endpoints through the image's proxy: '$ips'"
echo "smoke.sh: $image serves gz-2's view (servicegrid-demo-svc -> $ips) as uid $uid"
