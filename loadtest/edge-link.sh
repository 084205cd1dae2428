#!/usr/bin/env bash
# The edge link in OpenYurt's YurtHub traffic test (issue 36), on the real
# Kubernetes 1.20 control plane of deploy/e2e: bytes counted on the link of
# one site (beijing, 3 nodes) in five placements at once, all reading the same
# API server through the same waves:
#
#   A  kube-proxy direct      bj-1's kube-proxy 1.20 (protobuf, as it asks) -> link -> API server
#   B  a node proxy           bj-2's kube-proxy -> sitegrid-proxy --hostname bj-2 -> link -> API server
#   C  site proxy at the site 3 node proxies -> site proxy (location=beijing) -> link -> API server
#                             (bj-3's kube-proxy behind its node proxy)
#   D  site proxy in the cloud 3 node proxies -> link -> site proxy (location=beijing) -> API server
#   E  both                   3 node proxies -> site proxy at the site -> link -> D's site proxy
#                             in the cloud -> API server
#
# Each link is a counting relay (edge-link/relay.py) on loopback. The load
# (edge-link/load.py), as OpenYurt's report describes it: 2,000 pods and
# 1,000 Services of 50 endpoints each (Service i selects pod group i mod 40),
# the Services with topologyKeys ["location"]; 20 more nodes in 10 more
# sites, so beijing holds 3 of 26 nodes. Phases: idle; the create wave
# (pods, then Services, until every EndpointSlice holds 50 endpoints); idle
# with every node writing its status once; the delete wave (Services, then
# pods, until no endpoint is left); idle.
#
#   loadtest/edge-link.sh [OUT_DIR]     default: a new folder under /tmp
#
# Bounded: every wait has a limit, the relays stop by themselves, the
# cluster is torn down on exit. Writes OUT_DIR/{relay-*.log,phases,checks}
# and prints where; loadtest/edge-link/report.py turns them into the report.
set -euo pipefail
E2E_NAME=edge-link
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../deploy/e2e/lib.sh
source "$HERE/../deploy/e2e/lib.sh"
OUT=${1:-$(mktemp -d /tmp/edge-link.XXXXXX)}
mkdir -p "$OUT"
harness_up sitegrid-proxy

API_PORT=${SITEGRID_E2E_APISERVER##*:}
RA=25601 RB=25602 RC=25603 RD=25604 RE=25605
B_NODE=25611
C_SITE=25620 C_NODES=(25621 25622 25623)
D_SITE=25630 D_NODES=(25631 25632 25633)
E_SITE=25640 E_NODES=(25641 25642 25643)
BEIJING=(bj-1 bj-2 bj-3)
LOAD="python3 $HERE/edge-link/load.py"

relay() { # PORT TARGET NAME
    python3 "$HERE/edge-link/relay.py" "$1" "$2" "$OUT/relay-$3.log" 3600 &
    track $!
    retry 10 bash -c "ss -ltnH 'sport = :$1' | grep -q ." || fail "relay $3 does not listen on $1"
}
# kubeconfig NAME PORT: kube-proxy's credentials for https://127.0.0.1:PORT (a relay to the API server).
kubeconfig_via() {
    sed "s#https://127.0.0.1:$API_PORT#https://127.0.0.1:$2#" "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG" >"$SITEGRID_E2E_RUN/$1.kubeconfig"
    echo "$SITEGRID_E2E_RUN/$1.kubeconfig"
}
# proxy NAME PORT KUBECONFIG FLAGS...: a sitegrid-proxy, waited for on what kube-proxy
# reads (Services, v1beta1 EndpointSlices, and for a node proxy its Node): no
# Endpoints, so the link carries what kube-proxy with EndpointSliceProxying needs.
proxy() {
    local name=$1 port=$2 kubeconfig=$3 node=""
    shift 3
    "$SITEGRID_PROXY_BIN" --kubeconfig "$kubeconfig" --bind-address "127.0.0.1:$port" \
        --data-dir "$SITEGRID_E2E_RUN/proxy-data/$name" "$@" >>"$SITEGRID_E2E_LOGS/proxy-$name.log" 2>&1 &
    track $!
    for flag in "$@"; do [[ $flag == --hostname=* ]] && node=${flag#--hostname=}; done
    local paths=(/api/v1/services?limit=1 /apis/discovery.k8s.io/v1beta1/endpointslices?limit=1)
    [[ -n $node ]] && paths+=("/api/v1/nodes?fieldSelector=metadata.name%3D$node")
    for path in "${paths[@]}"; do
        retry 60 curl -sf -o /dev/null "http://127.0.0.1:$port$path" || fail "proxy $name does not serve $path"
    done
}
plain_kubeconfig_file() { # NAME PORT
    plain_kubeconfig "$2" >"$SITEGRID_E2E_RUN/$1.kubeconfig"
    echo "$SITEGRID_E2E_RUN/$1.kubeconfig"
}
phase() { echo "$1 $(date +%s.%N | cut -c1-14)" >>"$OUT/phases"; log "phase $1"; }

$LOAD nodes 10 2
relay $RA "$API_PORT" A
relay $RB "$API_PORT" B
relay $RC "$API_PORT" C

# D's site proxy first (its relay leads to it).
# With deploy/site-proxy-cloud's --drop-managed-fields: what D and E carry.
proxy d-site $D_SITE "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG" --site-selector=location=beijing --anonymous-passthrough=all --drop-managed-fields
relay $RD $D_SITE D
relay $RE $D_SITE E
proxy c-site $C_SITE "$(kubeconfig_via c-site $RC)" --site-selector=location=beijing --anonymous-passthrough=all
proxy e-site $E_SITE "$(plain_kubeconfig_file e-site $RE)" --site-selector=location=beijing --anonymous-passthrough=all
for i in 0 1 2; do
    node=${BEIJING[$i]}
    proxy "c-$node" "${C_NODES[$i]}" "$(plain_kubeconfig_file "c-$node" $C_SITE)" --hostname="$node"
    proxy "d-$node" "${D_NODES[$i]}" "$(plain_kubeconfig_file "d-$node" $RD)" --hostname="$node"
    proxy "e-$node" "${E_NODES[$i]}" "$(plain_kubeconfig_file "e-$node" $E_SITE)" --hostname="$node"
done
proxy b-bj-2 $B_NODE "$(kubeconfig_via b-bj-2 $RB)" --hostname=bj-2

GATES=EndpointSliceProxying=true
start_kube_proxy bj-1 $RA $GATES "$(kubeconfig_via a-kube-proxy $RA)"
start_kube_proxy bj-2 $B_NODE $GATES
start_kube_proxy bj-3 "${C_NODES[2]}" $GATES

phase idle-before
sleep 60
phase create
$LOAD pods 2000 40
$LOAD services 1000 40
$LOAD slices 1000 50
phase created
sleep 20
phase idle-loaded
$LOAD heartbeat
sleep 60

# Nothing lost: every kube-proxy has a rule per edge Service; behind a proxy
# its rules for each group's first Service are the group's beijing pods.
expected() { # GROUP: the sorted addresses of group GROUP's pods on beijing's nodes
    kubectl -n edge get pods -l "grp=g$1" -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.podIP}{"\n"}{end}' |
        awk '$1 ~ /^bj-/ {print $2 ":8080"}' | sort | paste -sd' '
}
# all_targets NS: the DNAT targets kube-proxy programs in NS for edge/s0..s39,
# one line each (edge-link/dnat.py: past 1,000 endpoints kube-proxy drops its
# per-endpoint rule comments).
all_targets() {
    ip netns exec "$1" iptables-save -t nat | python3 "$HERE/edge-link/dnat.py" $(for g in $(seq 0 39); do echo "edge/s$g"; done)
}
served() { # PORT SERVICE: the addresses a node proxy serves for edge/SERVICE
    curl -sf "http://127.0.0.1:$1/apis/discovery.k8s.io/v1beta1/namespaces/edge/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D$2" |
        python3 -c 'import json,sys; print(" ".join(sorted(a + ":8080" for s in json.load(sys.stdin)["items"] for e in s.get("endpoints") or [] for a in e["addresses"] if (e.get("conditions") or {}).get("ready", True))))'
}
# kube-proxy writes 50,000 rules per sync here (iptables-restore takes tens
# of seconds on this machine): each check is retried for up to 5 minutes.
check_loaded() {
    local g want got a port ns
    declare -A rules
    for ns in sg-bj-1 sg-bj-2 sg-bj-3; do rules[$ns]=$(all_targets $ns); done
    for g in $(seq 0 39); do
        want=$(expected "$g")
        for ns in sg-bj-2 sg-bj-3; do
            got=$(sed -n "$((g + 1))p" <<<"${rules[$ns]}")
            [[ $got == "$want" ]] || echo "LOST $ns s$g: got '$got' want '$want'"
        done
        for port in "$B_NODE" "${C_NODES[@]}" "${D_NODES[@]}" "${E_NODES[@]}"; do
            got=$(served "$port" "s$g")
            [[ $got == "$want" ]] || echo "LOST :$port s$g: got '$got' want '$want'"
        done
        a=$(sed -n "$((g + 1))p" <<<"${rules[sg-bj-1]}" | wc -w)
        ((a == 50)) || echo "LOST sg-bj-1 s$g: $a DNAT targets, want 50 (kube-proxy direct filters nothing)"
    done
}
# settle NAME CHECK: run CHECK until it reports nothing lost (at most 5 minutes);
# its last report goes to $OUT/checks.
settle() {
    local name=$1 check=$2 deadline=$((SECONDS + 300)) report
    while true; do
        report=$($check)
        [[ -z $report || $SECONDS -ge $deadline ]] && break
        sleep 5
    done
    echo "== $name: $(grep -c LOST <<<"$report" || true) lost" >>"$OUT/checks"
    if [[ -n $report ]]; then echo "$report" >>"$OUT/checks"; fi
}
: >"$OUT/checks"
for g in $(seq 0 39); do echo "group $g: $(expected "$g" | wc -w) beijing endpoints" >>"$OUT/checks"; done
settle loaded check_loaded
# What the waves carry, as lists: the edge Services and EndpointSlices in
# protobuf, whole (the API server) and as beijing's view (D's site proxy).
$LOAD sizes $D_SITE >"$OUT/sizes" || { log "sizes not measured"; rm -f "$OUT/sizes"; }

phase delete
$LOAD delete
$LOAD gone
phase deleted
sleep 20
phase idle-after
sleep 30
phase end
check_deleted() {
    local ns left port
    for ns in sg-bj-1 sg-bj-2 sg-bj-3; do
        left=$(ip netns exec $ns iptables-save -t nat | grep -c -- 'edge/s' || true)
        ((left == 0)) || echo "LOST $ns: $left rules of edge Services left after the delete wave"
    done
    for port in "$B_NODE" "${C_NODES[@]}" "${D_NODES[@]}" "${E_NODES[@]}"; do
        left=$(curl -sf "http://127.0.0.1:$port/apis/discovery.k8s.io/v1beta1/namespaces/edge/endpointslices" |
            python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
        ((left == 0)) || echo "LOST :$port: $left edge EndpointSlices left after the delete wave"
    done
}
settle deleted check_deleted
lost=$(grep -c LOST "$OUT/checks" || true)
log "done: $lost lost; results in $OUT"
