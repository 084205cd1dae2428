#!/usr/bin/env bash
# Load the two-site world into the cluster of cluster.sh: the nodes, Services
# and pods of fakeapi/sample/two-sites.json (the one test world, which the
# in-memory API server and the Rust tests use too); here the real
# controller-manager makes the Endpoints and EndpointSlices:
#   - nodes bj-1..3 (location=beijing) and gz-1..3 (location=guangzhou), Ready,
#     with an InternalIP (API objects only: no kubelet);
#   - Service servicegrid-demo-svc as a ServiceGrid generates it (annotation
#     topologyKeys: '["location"]'), plain-echo without it, the headless
#     echo-headless, and kube-system/kube-dns;
#   - their pods, bound to their nodes, Running and Ready (this plays kubelet).
# Idempotent: objects are applied, statuses patched.
#
# Needs kubectl >= 1.24 on PATH (for `patch --subresource=status`; it talks
# to the 1.20 API server fine), and python3 to read the JSON.
set -euo pipefail
E2E_NAME=sample
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"

RUN=${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}
export KUBECONFIG=$RUN/admin.kubeconfig
WAIT=${SITEGRID_E2E_WAIT:-60}
WORLD=$E2E_ROOT/fakeapi/sample/two-sites.json

# world WHAT: what two-sites.json says, for this script.
#   manifests  the nodes, Services and pods as one JSON v1 List (for kubectl apply)
#   nodes      "name ip" lines
#   pods       "namespace name node-ip pod-ip image" lines
#   endpoints  "namespace service count" lines: how many ready addresses each Service gets
world() {
    python3 - "$WORLD" "$1" <<'PY'
import json, sys
world = json.load(open(sys.argv[1]))
what = sys.argv[2]
ips = {n["name"]: n["ip"] for n in world["nodes"]}
def selects(svc, pod):
    return pod["namespace"] == svc["namespace"] and all(pod["labels"].get(k) == v for k, v in svc["selector"].items())
if what == "manifests":
    items = []
    for n in world["nodes"]:
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n["name"], "labels": {
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": n["name"], "kubernetes.io/os": "linux",
            "location": n["location"], "topology.kubernetes.io/zone": n["location"]}}})
    for s in world["services"]:
        meta = {"name": s["name"], "namespace": s["namespace"]}
        if s.get("grid"):
            # As SuperEdge's ServiceGrid controller generates it, with gridUniqKey location.
            meta["labels"] = {"superedge.io/grid-selector": s["grid"], "superedge.io/grid-uniq-key": "location"}
            meta["annotations"] = {"topologyKeys": '["location"]'}
        items.append({"apiVersion": "v1", "kind": "Service", "metadata": meta,
                      "spec": {"clusterIP": s["clusterIP"], "selector": s["selector"], "ports": [s["port"]]}})
    for p in world["pods"]:
        # Bound by spec.nodeName, so no scheduler is involved; no token
        # mount, so the pod does not wait for the ServiceAccount's secret.
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": p["name"], "namespace": p["namespace"], "labels": p["labels"]},
                      "spec": {"nodeName": p["node"], "automountServiceAccountToken": False,
                               "containers": [{"name": "main", "image": p["image"],
                                               "ports": [{"containerPort": p["port"]}]}]}})
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
elif what == "nodes":
    for n in world["nodes"]:
        print(n["name"], n["ip"])
elif what == "pods":
    for p in world["pods"]:
        print(p["namespace"], p["name"], ips[p["node"]], p["ip"], p["image"])
elif what == "endpoints":
    for s in world["services"]:
        print(s["namespace"], s["name"], sum(1 for p in world["pods"] if selects(s, p)))
PY
}

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# What a kubelet would report for a node: Ready, addresses, capacity.
node_status() {
    cat <<EOF
{"status": {
  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "played by deploy/e2e/sample.sh",
                  "lastHeartbeatTime": "$(now)", "lastTransitionTime": "$(now)"}],
  "addresses": [{"type": "InternalIP", "address": "$2"}, {"type": "Hostname", "address": "$1"}],
  "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
  "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
  "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
               "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "v1.20.2",
               "kubeProxyVersion": "v1.20.2", "operatingSystem": "linux", "architecture": "amd64"}}}
EOF
}

# ready_addresses NAMESPACE SERVICE: how many ready addresses its Endpoints have.
ready_addresses() {
    kubectl -n "$1" get endpoints "$2" -o jsonpath='{.subsets[*].addresses[*].ip}' | wc -w
}

# has_addresses NAMESPACE SERVICE COUNT: the Endpoints have COUNT ready addresses.
has_addresses() { (($(ready_addresses "$1" "$2") == $3)); }

main() {
    [[ -f $KUBECONFIG ]] || fail "$KUBECONFIG missing: run deploy/e2e/cluster.sh up first"
    world manifests | kubectl apply -f - >/dev/null
    local name ip ns node_ip image
    while read -r name ip; do
        kubectl patch node "$name" --subresource=status --type=strategic -p "$(node_status "$name" "$ip")" >/dev/null
    done < <(world nodes)
    while read -r ns name node_ip ip image; do
        kubectl -n "$ns" patch pod "$name" --subresource=status --type=merge \
            -p "$(pod_status "$node_ip" "$ip" True "$(now)" "$image")" >/dev/null
    done < <(world pods)
    log "nodes, Services and pods of $(basename "$WORLD") applied; pods Running and Ready"
    local svc count
    while read -r ns svc count; do
        retry "$WAIT" has_addresses "$ns" "$svc" "$count" ||
            fail "Endpoints $ns/$svc: $(ready_addresses "$ns" "$svc") of $count ready addresses after ${WAIT}s"
    done < <(world endpoints)
    kubectl get endpoints -A
}

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$E2E_DIR/lib.sh"
main "$@"
