# sitegrid-proxy against the real kube-apiserver 1.20: each node sees only its
# site's endpoints of a topologyKeys Service, all of a plain one, and follows
# a node moving site. kubectl 1.27 and 1.33 list and watch through it.
# shellcheck shell=bash
start_proxy bj-1 25201
start_proxy gz-2 25202
BJ=http://127.0.0.1:25201 GZ=http://127.0.0.1:25202

expect "apiserver slices" "$(slice_ips "$SITEGRID_E2E_APISERVER")" "10.0.0.139 10.0.0.70 10.0.1.72 10.0.1.8"
expect "bj-1 slices" "$(slice_ips $BJ)" "10.0.0.70 10.0.1.72"
expect "gz-2 slices" "$(slice_ips $GZ)" "10.0.0.139 10.0.1.8"
expect "bj-1 endpoints" "$(endpoints_ips $BJ servicegrid-demo-svc)" "10.0.0.70 10.0.1.72"
expect "bj-1 plain endpoints" "$(endpoints_ips $BJ plain-echo)" "10.0.0.81 10.0.1.33"
# v1 is served even though this apiserver only has v1beta1; nodeName comes from topology.
kubectl --server $BJ get --raw /apis/discovery.k8s.io/v1/endpointslices | has '"nodeName":"bj-1"' || fail "v1 view lacks nodeName"

# A node moves site: bj-3 joins guangzhou, and its endpoint moves with it.
rv=$(kubectl --server $BJ get --raw /api/v1/namespaces/default/endpoints | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])')
kubectl label node bj-3 location=guangzhou --overwrite >/dev/null
retry 10 bash -c "[[ \"\$(source $(dirname "${BASH_SOURCE[0]}")/../lib.sh; endpoints_ips $BJ servicegrid-demo-svc)\" == 10.0.0.70 ]]" || fail "bj-1 still sees bj-3's endpoint"
expect "gz-2 after the move" "$(endpoints_ips $GZ servicegrid-demo-svc)" "10.0.0.139 10.0.1.72 10.0.1.8"
# kubectl 1.27 replays what happened after the list's version.
watch=$("${KUBECTL_DIR:-/usr/lib/google-cloud-sdk/bin}/kubectl.1.27" --server $BJ get --raw \
    "/api/v1/namespaces/default/endpoints?watch=1&resourceVersion=$rv&timeoutSeconds=2")
grep -q '"type":"MODIFIED".*"name":"servicegrid-demo-svc"' <<<"$watch" || fail "no MODIFIED replayed: $watch"
kubectl label node bj-3 location=beijing --overwrite >/dev/null
retry 10 bash -c "[[ \"\$(source $(dirname "${BASH_SOURCE[0]}")/../lib.sh; endpoints_ips $BJ servicegrid-demo-svc)\" == '10.0.0.70 10.0.1.72' ]]" || fail "bj-3 did not come back"

# kubectl 1.33 prints the server's table through the proxy.
"${KUBECTL_DIR:-/usr/lib/google-cloud-sdk/bin}/kubectl.1.33" --server $BJ get endpoints servicegrid-demo-svc | has '10.0.0.70:8080,10.0.1.72:8080' || fail "kubectl 1.33 table"

# Passthrough over the proxy's own TLS client credentials (kube-proxy's certificate):
# discovery, and the event kube-proxy posts at start-up (RBAC: system:node-proxier).
kubectl --server $BJ get --raw /version | has '"gitVersion": *"v1.20.2"' || fail "/version through the proxy"
code=$(curl -s -o "$SITEGRID_E2E_LOGS/event.json" -w '%{http_code}' -X POST -H 'content-type: application/json' \
    "$BJ/api/v1/namespaces/default/events" \
    -d '{"apiVersion":"v1","kind":"Event","metadata":{"name":"kube-proxy-bj-1.e2e"},"involvedObject":{"kind":"Node","name":"bj-1"},"reason":"Starting","message":"Starting kube-proxy.","type":"Normal"}')
expect "event POST through the proxy" "$code" 201
kubectl get event kube-proxy-bj-1.e2e -o name | has kube-proxy-bj-1.e2e || fail "the event is not in the API server"
