#!/usr/bin/env bash
# How fast do kube-proxy's iptables rules follow an EndpointSlice change,
# through sitegrid-proxy vs straight from the API server? Not part of CI.
#
#   deploy/e2e/latency.sh [CHANGES [PAUSE]]   # default 60 changes, 2.2 s apart: about 4 minutes
#
# Brings up the cluster of cluster.sh with the two-site sample (like run.sh,
# and never next to another cluster: it uses the same ports), then runs two
# kube-proxies 1.20 in iptables mode (EndpointSlices v1beta1), each in its own
# network namespace (lib.sh):
#   via-sitegrid  node bj-1, kubeconfig -> a release sitegrid-proxy for bj-1
#   direct        node bj-3, kube-proxy's own kubeconfig -> the API server
# and flips the readiness of a beijing pod (10.0.0.71 on bj-2) CHANGES times.
# latency.py times each change from the EndpointSlice event on the API
# server to the DNAT rule in each namespace's iptables-save.
set -euo pipefail
E2E_NAME=latency
CHANGES=${1:-60} PAUSE=${2:-2.2}
PROXY_PORT=25221
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
harness_up --release sitegrid-proxy
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$E2E_DIR/lib.sh"

start_proxy bj-1 $PROXY_PORT
start_kube_proxy bj-1 $PROXY_PORT EndpointSliceProxying=true
start_kube_proxy bj-3 6443 EndpointSliceProxying=true "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG"
add_ready_pod echoserver-bj-2 bj-2 10.0.0.71

python3 "$E2E_DIR/latency.py" --changes "$CHANGES" --pause "$PAUSE" --apiserver "$SITEGRID_E2E_APISERVER" \
    --pki "$SITEGRID_E2E_RUN/pki" --pod echoserver-bj-2 --ip 10.0.0.71 \
    --csv "$SITEGRID_E2E_LOGS/latency.csv" via-sitegrid=sg-bj-1 direct=sg-bj-3
