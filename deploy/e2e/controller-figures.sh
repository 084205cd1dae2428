#!/usr/bin/env bash
# sitegrid-controller's figures against the real control plane. Not part of CI.
#
#   deploy/e2e/controller-figures.sh [SITES [QUIET [RESYNC]]]   # default 100 sites, 600 s, 10s
#
# Brings up the cluster of cluster.sh (never next to another one: same ports),
# registers SITES nodes, each its own site (location=site-N), starts a release
# sitegrid-controller with the permissions of deploy/controller/rbac.yaml, and
#  1. applies the seed DeploymentGrid (seed000-04, verbatim) and times until
#     all SITES per-site Deployments exist (polled through kubectl);
#  2. scales the grid to 0 replicas (no kubelet runs pods here, so Deployments
#     with replicas change status by themselves at their progress deadline),
#     and once the workloads' statuses have settled, counts the API writes during
#     QUIET seconds of no-op resyncs (every RESYNC) — the controller's own count
#     (sitegrid_controller_api_writes_total) and the API server's PATCH/DELETE
#     counts for the kinds it writes; the leader lease's renewals are listed apart.
set -euo pipefail
E2E_NAME=figures
SITES=${1:-100} QUIET=${2:-600} RESYNC=${3:-10s}
PORT=18091
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
harness_up --release --no-sample sitegrid-controller
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$E2E_DIR/lib.sh"

# SITES nodes in one request.
for i in $(seq 1 "$SITES"); do
    printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: site-%s\n  labels: {location: site-%s}\n---\n' "$i" "$i"
done | kubectl apply -f - >/dev/null
install_controller_prereqs
start_controller figures $PORT --leader-elect=false --resync-period="$RESYNC"
retry 30 curl -sf "http://127.0.0.1:$PORT/readyz" || fail "controller not ready"

# all_deployments: every site has its Deployment.
all_deployments() { (($(kubectl get deploy -l superedge.io/grid-selector=deploymentgrid-demo -o name | wc -l) >= SITES)); }
start=$(date +%s.%N)
kubectl apply -f "$E2E_ROOT/controller/tests/fixtures/seed000-04-deploymentgrid.yaml" >/dev/null
retry 600 all_deployments || fail "not every site got its Deployment within 600 s"
done_at=$(date +%s.%N)
awk -v n="$SITES" -v s="$start" -v e="$done_at" 'BEGIN {printf "figures: %d per-site Deployments exist %.2f s after kubectl apply\n", n, e - s}'

# No kubelet runs the pods, so Deployments with replicas would change status
# on their own 600 s later (ProgressDeadlineExceeded), and the grid's status
# would rightly follow. Scale to 0 so that nothing changes; then wait until a
# 30 s window passes with no controller write.
kubectl patch dg deploymentgrid-demo --type=merge -p '{"spec":{"template":{"replicas":0}}}' >/dev/null
settle_writes $PORT

RESOURCES='deployments|statefulsets|services|deploymentgrids|statefulsetgrids|servicegrids|leases'
apiserver_writes "$RESOURCES" >"$SITEGRID_E2E_LOGS/apiserver-before.txt"
w0=$(controller_writes $PORT) r0=$(controller_metric $PORT reconciles_total)
echo "figures: ${QUIET} s of no-op resyncs (every $RESYNC)..."
sleep "$QUIET"
w1=$(controller_writes $PORT) r1=$(controller_metric $PORT reconciles_total)
apiserver_writes "$RESOURCES" >"$SITEGRID_E2E_LOGS/apiserver-after.txt"
echo "figures: reconciles during the quiet period: $((r1 - r0)); controller writes: $((w1 - w0))"
echo "figures: API server write requests by resource and verb during the quiet period (after - before):"
writes_between "$SITEGRID_E2E_LOGS/apiserver-before.txt" "$SITEGRID_E2E_LOGS/apiserver-after.txt"
echo "figures: (deployments/PUT are the deployment controller's status updates, not sitegrid's)"
