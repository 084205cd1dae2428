#!/usr/bin/env bash
# How fast does sitegrid-dnsd follow a pod, and how much memory does it take?
# Not part of CI.
#
#   deploy/e2e/dnsd-figures.sh [CHANGES [GRIDS]]   # default 100 changes, 100 grids: about 2 minutes after the build
#
# Brings up the cluster of cluster.sh with the two-site sample (like run.sh,
# and never next to another cluster: same ports), a release
# sitegrid-controller and a release sitegrid-dnsd for bj-1 whose file dnsmasq
# serves on 127.0.0.1:15311. Then:
#   1. the seeds' StatefulSetGrid and headless ServiceGrid; dnsd-latency.py
#      writes a new address into pod statefulsetgrid-demo-beijing-0's status
#      CHANGES times and times each from the PATCH's response to dnsmasq's
#      first answer with it (UDP queries every millisecond);
#   2. the seed grid deleted, GRIDS StatefulSetGrids of one replica each: once
#      dnsd's file has GRIDS names, dnsd's resident memory (VmRSS).
set -euo pipefail
E2E_NAME=dnsd-figures
CHANGES=${1:-100} GRIDS=${2:-100}
CTL=18101 OPS=18103 DNS=15311
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
harness_up --release sitegrid-controller sitegrid-dnsd
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$E2E_DIR/lib.sh"
SEEDS=$E2E_ROOT/controller/tests/fixtures

install_controller_prereqs
install_dnsd_prereqs
start_controller fig $CTL --leader-elect=false
kubectl delete svc servicegrid-demo-svc >/dev/null
kubectl apply -f "$SEEDS/seed000-06-statefulsetgrid.yaml" -f "$SEEDS/seed000-08-servicegrid.yaml" >/dev/null
for i in 0 1 2; do run_bound_pod statefulsetgrid-demo-beijing-$i 10.0.5.1$i; done
start_dnsd bj-1 $OPS
start_dnsmasq "$SITEGRID_E2E_RUN/dnsd-bj-1" $DNS
rss() { awk '$1 == "VmRSS:" {print $2 " kB"}' "/proc/$DNSD_PID_bj_1/status"; }
log "dnsd RSS with 1 grid (3 pods in its site): $(rss)"

log "latency: $CHANGES address changes"
python3 "$E2E_DIR/dnsd-latency.py" --apiserver "$SITEGRID_E2E_APISERVER" --pki "$SITEGRID_E2E_RUN/pki" \
    --pod statefulsetgrid-demo-beijing-0 --name statefulsetgrid-demo-0.servicegrid-demo-svc.default.svc.cluster.local \
    --dns-port $DNS --changes "$CHANGES" --csv "$SITEGRID_E2E_LOGS/dnsd-latency.csv"

log "memory: $GRIDS StatefulSetGrids"
kubectl delete ssg statefulsetgrid-demo >/dev/null
grids=$SITEGRID_E2E_LOGS/grids.yaml
for g in $(seq 1 "$GRIDS"); do
    cat <<GRID
---
apiVersion: superedge.io/v1
kind: StatefulSetGrid
metadata: {name: fig-$g, namespace: default}
spec:
  gridUniqKey: location
  template:
    selector: {matchLabels: {app: fig-$g}}
    serviceName: fig-svc
    replicas: 1
    template:
      metadata: {labels: {app: fig-$g}}
      spec: {containers: [{name: main, image: "superedge/echoserver:2.2"}]}
GRID
done >"$grids"
kubectl apply -f "$grids" >/dev/null
for g in $(seq 1 "$GRIDS"); do run_bound_pod "fig-$g-beijing-0" "10.0.8.$g"; done
retry 120 bash -c "[[ \$(awk '!/^#/ {n++} END {print n + 0}' $SITEGRID_E2E_RUN/dnsd-bj-1/hosts) == $GRIDS ]]" || fail "dnsd's file never had $GRIDS names"
sleep 5
log "dnsd RSS with $GRIDS grids ($GRIDS pods in its site, $((2 * GRIDS)) StatefulSets in the cluster): $(rss)"
curl -sf "http://127.0.0.1:$OPS/metrics" | grep -E '^sitegrid_dnsd_(names|writes_total|selector_changes_total)' >&2
