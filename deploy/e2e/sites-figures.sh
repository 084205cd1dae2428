#!/usr/bin/env bash
# The sites controller's figures against the real control plane (issue 10).
# Not part of CI.
#
#   deploy/e2e/sites-figures.sh [NODES [QUIET]]   # default 1000 nodes, 600 s
#
# Brings up the cluster of cluster.sh (never next to another one: same ports),
# registers NODES nodes labelled rack=edge (API objects; half of them with a
# Ready condition), starts a release sitegrid-controller with the permissions
# of deploy/controller/rbac.yaml, and
#  1. with a NodeGroup `site` listing it already there, times from `kubectl
#     apply` of one NodeUnit whose selector matches all NODES nodes until
#     every node carries the unit's
#     label, its setNode label and site=<unit> (polled through kubectl), and
#     until its status says READY NODES/2 of NODES;
#  2. once nothing has been written for 30 s, counts the API writes during
#     QUIET seconds at rest: the controller's own count
#     (sitegrid_controller_api_writes_total) and the API server's write
#     requests for nodes, nodeunits, nodegroups and events.
set -euo pipefail
E2E_NAME=sites-figures
NODES=${1:-1000} QUIET=${2:-600}
PORT=18092
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
harness_up --release --no-sample sitegrid-controller
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$E2E_DIR/lib.sh"

# NODES nodes in one request; then a Ready condition on every other one.
for i in $(seq 1 "$NODES"); do
    printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: edge-%s\n  labels: {rack: edge}\n---\n' "$i"
done | kubectl apply -f - >/dev/null
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for i in $(seq 1 2 "$NODES"); do
    kubectl patch node "edge-$i" --subresource=status --type=merge -p "{\"status\": {\"conditions\": [
      {\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"KubeletReady\",
       \"lastHeartbeatTime\": \"$now\", \"lastTransitionTime\": \"$now\"}]}}" >/dev/null &
    if (((i + 1) % 40 == 0)); then wait; fi
done
wait
install_controller_prereqs
crds_established crd/nodeunits.site.superedge.io || fail "CRD nodeunits not established"
start_controller sites-figures $PORT --leader-elect=false --default-node-units=false
retry 30 curl -sf "http://127.0.0.1:$PORT/readyz" || fail "controller not ready"

labelled() { (($(kubectl get nodes -l 'edge-site=nodeunits.superedge.io,tier=edge,site=edge-site' -o name | wc -l) >= NODES)); }
ready_rate() { [[ $(kubectl get nodeunit edge-site -o jsonpath='{.status.readyRate}') == "$(((NODES + 1) / 2))/$NODES" ]]; }
# The group first: the timed step is the unit alone.
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: site.superedge.io/v1alpha2
kind: NodeGroup
metadata:
  name: site
spec:
  nodeUnits: [edge-site]
EOF
retry 30 bash -c "kubectl get nodegroup site -o jsonpath='{.metadata.finalizers}' | grep -q site-cleanup" ||
    fail "the controller never took the NodeGroup"
start=$(date +%s.%N)
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: site.superedge.io/v1alpha2
kind: NodeUnit
metadata:
  name: edge-site
spec:
  selector:
    matchExpressions:
    - {key: rack, operator: In, values: [edge]}
  setNode:
    labels: {tier: edge}
EOF
retry 600 labelled || fail "not every node got the unit's labels within 600 s"
labelled_at=$(date +%s.%N)
retry 60 ready_rate || fail "status never said $(((NODES + 1) / 2))/$NODES"
status_at=$(date +%s.%N)
awk -v n="$NODES" -v s="$start" -v l="$labelled_at" -v r="$status_at" 'BEGIN {
    printf "figures: %d nodes carry the unit'"'"'s labels %.2f s after kubectl apply; status %.2f s\n", n, l - s, r - s }'
echo "figures: controller writes so far: $(controller_metric $PORT api_writes_total)"

settle_writes $PORT

RESOURCES='nodes|nodeunits|nodegroups|events'
apiserver_writes "$RESOURCES" >"$SITEGRID_E2E_LOGS/apiserver-before.txt"
w0=$(controller_writes $PORT)
echo "figures: ${QUIET} s at rest..."
sleep "$QUIET"
w1=$(controller_writes $PORT)
apiserver_writes "$RESOURCES" >"$SITEGRID_E2E_LOGS/apiserver-after.txt"
echo "figures: controller writes at rest: $((w1 - w0))"
echo "figures: API server write requests by resource and verb at rest (after - before):"
writes_between "$SITEGRID_E2E_LOGS/apiserver-before.txt" "$SITEGRID_E2E_LOGS/apiserver-after.txt"
echo "figures: (node writes at rest, if any, are the node lifecycle controller's, not sitegrid's: see the controller's count)"
