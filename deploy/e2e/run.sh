#!/usr/bin/env bash
# The real-cluster end-to-end suite: install (cached), bring up the Kubernetes
# 1.20 control plane on loopback, load the two-site sample, run every
# scenario in scenarios/ (or the ones named), and always tear down.
#
#   deploy/e2e/run.sh                   # all scenarios
#   deploy/e2e/run.sh 10-proxy-filter   # some, by file name without .sh
#
# A scenario is a small bash file sourced with lib.sh's helpers and the
# cluster's environment; it fails by exiting non-zero. Logs of every
# component and of sitegrid stay in $SITEGRID_E2E_LOGS and are printed on
# failure.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export SITEGRID_E2E_LOGS=${SITEGRID_E2E_LOGS:-/tmp/sitegrid-e2e-logs}
rm -rf "$SITEGRID_E2E_LOGS" && mkdir -p "$SITEGRID_E2E_LOGS"

"$HERE/install.sh"
(cd "$ROOT" && cargo build -p sitegrid-proxy -p sitegrid-controller --locked)
export SITEGRID_E2E_ROOT=$ROOT
export SITEGRID_PROXY_BIN=$ROOT/target/debug/sitegrid-proxy
export SITEGRID_CONTROLLER_BIN=$ROOT/target/debug/sitegrid-controller

"$HERE/cluster.sh" down >/dev/null 2>&1 || true
cleanup() {
    local rc=$? ns
    [[ -f $SITEGRID_E2E_LOGS/pids ]] && xargs -r kill <"$SITEGRID_E2E_LOGS/pids" 2>/dev/null || true
    # Network namespaces the scenarios made (lib.sh: sg-NODE): keep their rules, then delete them.
    for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^sg-/ {print $1}'); do
        ip netns exec "$ns" iptables-save >"$SITEGRID_E2E_LOGS/iptables-$ns.txt" 2>&1 || true
        ip netns delete "$ns" 2>/dev/null || true
    done
    if ((rc != 0)); then
        for f in "$SITEGRID_E2E_LOGS"/*.log /tmp/sitegrid-e2e/logs/*.log; do
            [[ -f $f ]] || continue
            echo "---- $f (last 30 lines)"; tail -n 30 "$f"
        done
    fi
    cp -r /tmp/sitegrid-e2e/logs "$SITEGRID_E2E_LOGS/cluster" 2>/dev/null || true
    "$HERE/cluster.sh" down >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT
"$HERE/cluster.sh" up >/dev/null
"$HERE/sample.sh" >/dev/null
eval "$("$HERE/cluster.sh" env)"

passed=0 failed=0
if (($#)); then names=("$@"); else names=(); for f in "$HERE"/scenarios/*.sh; do names+=("$(basename "$f" .sh)"); done; fi
for name in "${names[@]}"; do
    started=$(date +%s)
    if (source "$HERE/lib.sh"; source "$HERE/scenarios/$name.sh"); then
        echo "e2e: $name ... ok ($(($(date +%s) - started)) s)"; passed=$((passed + 1))
    else
        echo "e2e: $name ... FAILED"; failed=$((failed + 1))
    fi
done
echo "e2e: $passed passed, $failed failed"
((failed == 0))
