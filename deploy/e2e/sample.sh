#!/usr/bin/env bash
# Load the two-site SuperEdge example into the cluster of cluster.sh, the
# same data as the in-memory sample (fakeapi/src/sample), but here the real
# controller-manager produces the Endpoints and EndpointSlices:
#   - nodes bj-1..3 (location=beijing) and gz-1..3 (location=guangzhou),
#     Ready, with an InternalIP (API objects only: no kubelet);
#   - Service servicegrid-demo-svc as a ServiceGrid generates it
#     (annotation topologyKeys: '["location"]'), and plain-echo without it,
#     both selecting appGrid=echo;
#   - 4 pods echoserver-* bound to bj-1, bj-3, gz-2, gz-3, Running and Ready.
# Idempotent: objects are applied, statuses patched.
#
# Needs kubectl >= 1.24 on PATH (for `patch --subresource=status`; it talks
# to the 1.20 API server fine).
set -euo pipefail

RUN=${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}
export KUBECONFIG=$RUN/admin.kubeconfig
WAIT=${SITEGRID_E2E_WAIT:-60}

# name location InternalIP (as in fakeapi/src/sample)
NODES=(
    "bj-1 beijing 192.0.2.11" "bj-2 beijing 192.0.2.12" "bj-3 beijing 192.0.2.13"
    "gz-1 guangzhou 192.0.2.21" "gz-2 guangzhou 192.0.2.22" "gz-3 guangzhou 192.0.2.23"
)
# pod node podIP
PODS=(
    "echoserver-bj-1 bj-1 10.0.0.70" "echoserver-bj-3 bj-3 10.0.1.72"
    "echoserver-gz-2 gz-2 10.0.0.139" "echoserver-gz-3 gz-3 10.0.1.8"
)

log() { printf 'sample: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

node_ip() {
    local n name ip
    for n in "${NODES[@]}"; do
        read -r name _ ip <<<"$n"
        [[ $name == "$1" ]] && { echo "$ip"; return; }
    done
    die "unknown node $1"
}

apply_nodes() {
    local n name location ip
    for n in "${NODES[@]}"; do
        read -r name location ip <<<"$n"
        kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    location: $location
    topology.kubernetes.io/zone: $location
EOF
        # What a kubelet would report: Ready, addresses, capacity.
        kubectl patch node "$name" --subresource=status --type=strategic -p "$(
            cat <<EOF
{"status": {
  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "played by deploy/e2e/sample.sh",
                  "lastHeartbeatTime": "$(now)", "lastTransitionTime": "$(now)"}],
  "addresses": [{"type": "InternalIP", "address": "$ip"}, {"type": "Hostname", "address": "$name"}],
  "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
  "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
  "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
               "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "v1.20.2",
               "kubeProxyVersion": "v1.20.2", "operatingSystem": "linux", "architecture": "amd64"}}}
EOF
        )" >/dev/null
    done
    log "nodes: ${#NODES[@]} Ready"
}

apply_services() {
    kubectl apply -f - >/dev/null <<'EOF'
# As SuperEdge's ServiceGrid controller generates it for ServiceGrid
# servicegrid-demo with gridUniqKey location.
apiVersion: v1
kind: Service
metadata:
  name: servicegrid-demo-svc
  namespace: default
  labels:
    superedge.io/grid-selector: servicegrid-demo
    superedge.io/grid-uniq-key: location
  annotations:
    topologyKeys: '["location"]'
spec:
  clusterIP: 10.96.33.231
  selector:
    appGrid: echo
  ports:
  - protocol: TCP
    port: 80
    targetPort: 8080
---
# The same pods without topology: every node keeps all endpoints.
apiVersion: v1
kind: Service
metadata:
  name: plain-echo
  namespace: default
spec:
  clusterIP: 10.96.120.15
  selector:
    appGrid: echo
  ports:
  - protocol: TCP
    port: 80
    targetPort: 8080
EOF
    log "services: servicegrid-demo-svc, plain-echo"
}

apply_pods() {
    local p name node ip
    for p in "${PODS[@]}"; do
        read -r name node ip <<<"$p"
        # Bound by spec.nodeName, so no scheduler is involved; no token
        # mount, so the pod does not wait for the ServiceAccount's secret.
        kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: default
  labels:
    appGrid: echo
spec:
  nodeName: $node
  automountServiceAccountToken: false
  containers:
  - name: echo
    image: superedge/echoserver:2.2
    ports:
    - containerPort: 8080
EOF
        # Play kubelet: the pod runs and is Ready at its IP.
        kubectl patch pod "$name" --subresource=status --type=merge -p "$(
            cat <<EOF
{"status": {"phase": "Running", "hostIP": "$(node_ip "$node")",
  "podIP": "$ip", "podIPs": [{"ip": "$ip"}], "startTime": "$(now)",
  "conditions": [
    {"type": "Initialized", "status": "True", "lastTransitionTime": "$(now)"},
    {"type": "ContainersReady", "status": "True", "lastTransitionTime": "$(now)"},
    {"type": "Ready", "status": "True", "lastTransitionTime": "$(now)"},
    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "$(now)"}],
  "containerStatuses": [{"name": "echo", "ready": true, "started": true, "restartCount": 0,
    "image": "superedge/echoserver:2.2", "imageID": "",
    "state": {"running": {"startedAt": "$(now)"}}}]}}
EOF
        )" >/dev/null
    done
    log "pods: ${#PODS[@]} Running and Ready"
}

# wait_count WHAT WANT CMD...: until CMD prints WANT words (bounded).
wait_count() {
    local what=$1 want=$2 deadline=$((SECONDS + WAIT)) got
    shift 2
    while :; do
        got=$("$@" 2>/dev/null | wc -w) || got=0
        ((got == want)) && break
        ((SECONDS < deadline)) || die "timed out: $what has $got of $want"
        sleep 0.5
    done
    log "$what: $want ok"
}

verify() {
    local svc
    for svc in servicegrid-demo-svc plain-echo; do
        wait_count "Endpoints $svc addresses" "${#PODS[@]}" \
            kubectl get endpoints "$svc" -o jsonpath='{.subsets[*].addresses[*].nodeName}'
        wait_count "EndpointSlices $svc ready endpoints" "${#PODS[@]}" \
            kubectl get endpointslices.v1beta1.discovery.k8s.io \
            -l "kubernetes.io/service-name=$svc" \
            -o jsonpath='{.items[*].endpoints[?(@.conditions.ready==true)].topology.kubernetes\.io/hostname}'
    done
    kubectl get endpoints servicegrid-demo-svc plain-echo
}

main() {
    [[ -f $KUBECONFIG ]] || die "$KUBECONFIG missing: run deploy/e2e/cluster.sh up first"
    apply_nodes
    apply_services
    apply_pods
    verify
}

main "$@"
