# Helpers for scenarios (sourced by run.sh in a subshell, with `set -euo pipefail`).
# shellcheck shell=bash

# fail MESSAGE: stop the scenario.
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }

# start_proxy NODE PORT: a sitegrid-proxy for NODE on 127.0.0.1:PORT with
# kube-proxy's credentials; waits until it serves every cached kind.
start_proxy() {
    local node=$1 port=$2
    "$SITEGRID_PROXY_BIN" --kubeconfig "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG" --hostname "$node" \
        --bind-address "127.0.0.1:$port" --log-level info >"$SITEGRID_E2E_LOGS/proxy-$node.log" 2>&1 &
    echo $! >>"$SITEGRID_E2E_LOGS/pids"
    local path
    for path in /api/v1/services /api/v1/endpoints /apis/discovery.k8s.io/v1beta1/endpointslices /api/v1/nodes; do
        eventually 30 curl -sf -o /dev/null "http://127.0.0.1:$port$path?limit=1" || fail "proxy for $node does not serve $path"
    done
}

# eventually SECONDS CMD...: retry CMD every 0.2 s until it succeeds or time is up.
eventually() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# slice_ips URL: the sorted endpoint addresses of servicegrid-demo-svc's slices at URL (a proxy or the apiserver).
slice_ips() {
    kubectl --server "$1" get --raw /apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices \
        | python3 -c 'import json,sys
items=json.load(sys.stdin)["items"]
print(" ".join(sorted(a for i in items if i["metadata"]["labels"].get("kubernetes.io/service-name")=="servicegrid-demo-svc"
    for e in i["endpoints"] or [] for a in e["addresses"])))'
}

# endpoints_ips URL SERVICE: the sorted ready addresses of SERVICE's Endpoints at URL.
endpoints_ips() {
    kubectl --server "$1" get --raw "/api/v1/namespaces/default/endpoints/$2" \
        | python3 -c 'import json,sys
o=json.load(sys.stdin)
print(" ".join(sorted(a["ip"] for s in o.get("subsets") or [] for a in s.get("addresses") or [])))'
}

# expect WHAT ACTUAL EXPECTED
expect() { [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"; }
