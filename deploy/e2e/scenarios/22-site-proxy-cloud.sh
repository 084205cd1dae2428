# A site proxy in the cloud (issue 36, docs/placements.md, placement 3):
# beijing's site proxy runs beside the API server as deploy/site-proxy-cloud/
# runs it (--site-selector=location=beijing, HTTPS, --client-group
# sitegrid:site:beijing); bj-1's node proxy reaches it across the "WAN" with
# a client certificate of beijing's group made by sitegrid-certs, and the real
# kube-proxy 1.20 reads the node proxy. kube-proxy's DNAT rules are beijing's
# and follow beijing's pods; its Events pass through both proxies as the
# node proxy's user; a guangzhou certificate from the same CA gets 403 from
# beijing's site proxy for every read, and a node proxy holding it never
# serves.
# shellcheck shell=bash
CLOUD_PORT=25271 CLOUD_OPS=25272 NODE_PORT=25273 GZ_NODE_PORT=25274
PKI=$SITEGRID_E2E_RUN/site-proxy-cloud-certs
BEIJING="10.0.0.70:8080 10.0.1.72:8080"
PLAIN="10.0.0.81:8080 10.0.1.33:8080"

# What an operator runs (docs/placements.md): the CA, the site proxy's
# serving certificate, one client certificate per node proxy in its site's
# group, and their kubeconfigs naming the site proxy.
"$SITEGRID_CERTS_BIN" --out "$PKI" init >/dev/null
"$SITEGRID_CERTS_BIN" --out "$PKI" server >/dev/null
"$SITEGRID_CERTS_BIN" --out "$PKI" client bj-1 --user sitegrid:node-proxy:bj-1 --group sitegrid:site:beijing >/dev/null
"$SITEGRID_CERTS_BIN" --out "$PKI" client gz-2 --user sitegrid:node-proxy:gz-2 --group sitegrid:site:guangzhou >/dev/null
for node in bj-1 gz-2; do
    "$SITEGRID_CERTS_BIN" --out "$PKI" kubeconfig $node --server "https://127.0.0.1:$CLOUD_PORT" >/dev/null
done
# The node proxies' users may do what kube-proxy does (the site proxy
# impersonates them for what it passes through).
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sitegrid-e2e-node-proxies}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "sitegrid:node-proxy:bj-1"}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "sitegrid:node-proxy:gz-2"}
EOF

# beijing's site proxy, with deploy/site-proxy-cloud's flags (its upstream
# credentials here: the suite's admin, who may impersonate).
"$SITEGRID_PROXY_BIN" --kubeconfig "$SITEGRID_E2E_RUN/admin.kubeconfig" \
    --site-selector=location=beijing --client-group=sitegrid:site:beijing --drop-managed-fields \
    --bind-address "127.0.0.1:$CLOUD_PORT" --metrics-bind-address "127.0.0.1:$CLOUD_OPS" \
    --cert-file "$PKI/server.crt" --key-file "$PKI/server.key" --ca-file "$PKI/ca.crt" --data-dir= \
    >>"$SITEGRID_E2E_LOGS/proxy-cloud-beijing.log" 2>&1 &
CLOUD_PID=$!
track $CLOUD_PID
retry 30 curl -sf "http://127.0.0.1:$CLOUD_OPS/readyz" || fail "beijing's cloud site proxy is not ready"

# Each site's certificate against beijing's site proxy: beijing reads, guangzhou is refused.
read_as() { # NODE PATH: the HTTP code of GET PATH at the site proxy with NODE's certificate
    curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.crt" --cert "$PKI/$1.crt" --key "$PKI/$1.key" \
        "https://127.0.0.1:$CLOUD_PORT$2"
}
for path in /api/v1/services /api/v1/endpoints /apis/discovery.k8s.io/v1beta1/endpointslices /api/v1/nodes; do
    expect "bj-1's certificate: GET $path" "$(read_as bj-1 "$path")" 200
    expect "gz-2's certificate: GET $path" "$(read_as gz-2 "$path")" 403
done
# Passthrough runs as the certificate's user (the API server refuses it
# pods, as system:node-proxier) for beijing; the site proxy refuses guangzhou itself.
body_as() { curl -s --cacert "$PKI/ca.crt" --cert "$PKI/$1.crt" --key "$PKI/$1.key" "https://127.0.0.1:$CLOUD_PORT$2"; }
[[ $(body_as bj-1 /api/v1/namespaces/default/pods) == *'User \"sitegrid:node-proxy:bj-1\" cannot list resource \"pods\"'* ]] ||
    fail "bj-1's passthrough did not run as its user: $(body_as bj-1 /api/v1/namespaces/default/pods)"
[[ $(body_as gz-2 /api/v1/namespaces/default/pods) == *sitegrid:site:beijing* ]] ||
    fail "gz-2's refusal does not name the group it lacks: $(body_as gz-2 /api/v1/namespaces/default/pods)"
# Without a certificate the TLS handshake itself fails: no HTTP answer at all.
expect "no certificate: GET /api/v1/services" \
    "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI/ca.crt" "https://127.0.0.1:$CLOUD_PORT/api/v1/services" || true)" 000

# bj-1's node proxy across the link, kube-proxy behind it.
PROXY_KUBECONFIG=$PKI/bj-1.kubeconfig start_proxy bj-1 $NODE_PORT
events_before=$(kubectl get events -n default -o name --field-selector source=kube-proxy,involvedObject.name=bj-1,reason=Starting | wc -l)
start_kube_proxy bj-1 $NODE_PORT EndpointSliceProxying=true
expect_within 10 "bj-1 behind the cloud site proxy: DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
expect_within 10 "bj-1 behind the cloud site proxy: DNAT plain-echo" "$PLAIN" dnat_targets sg-bj-1 plain-echo
for kind in services endpointslices; do
    retry 10 more_than 0 proxy_metric $CLOUD_OPS "watchers_open{resource=\"$kind\"}" ||
        fail "the cloud site proxy serves bj-1's node proxy no watch of $kind"
done
# The API server's slices carry managedFields; what crosses the link does
# not (--drop-managed-fields, as deploy/site-proxy-cloud runs it).
managed_fields() { grep -o '"managedFields"' | wc -l; }
api_managed=$(kubectl get --raw /apis/discovery.k8s.io/v1beta1/endpointslices | managed_fields)
((api_managed > 0)) || fail "the API server's EndpointSlices carry no managedFields: nothing to check"
expect "managedFields in what the cloud site proxy serves bj-1" \
    "$(body_as bj-1 /apis/discovery.k8s.io/v1beta1/endpointslices | managed_fields)" 0
expect "managedFields in what bj-1's node proxy serves" \
    "$(curl -sf "http://127.0.0.1:$NODE_PORT/apis/discovery.k8s.io/v1beta1/endpointslices" | managed_fields)" 0
# Both links carry protobuf: kube-apiserver's answers to the site proxy, the
# site proxy's to the node proxy (each read back as JSON on arrival).
for kind in services endpointslices; do
    expect "the cloud site proxy reads $kind from kube-apiserver in protobuf" \
        "$(proxy_metric $CLOUD_OPS "upstream_protobuf{resource=\"$kind\"}")" 1
    expect "bj-1's node proxy reads $kind from the site proxy in protobuf" \
        "$(proxy_metric $NODE_PORT "upstream_protobuf{resource=\"$kind\"}")" 1
done
starting_events() {
    kubectl get events -n default -o name --field-selector source=kube-proxy,involvedObject.name=bj-1,reason=Starting | wc -l
}
retry 10 more_than "$events_before" starting_events || fail "kube-proxy's Starting event did not pass through both proxies"

# beijing's pods come and go in bj-1's rules; guangzhou's never enter them.
add_ready_pod echoserver-bj-2 bj-2 10.0.0.71 "{appGrid: echo}"
add_ready_pod echoserver-gz-1 gz-1 10.0.1.9 "{appGrid: echo}"
expect_within 10 "bj-1 after pods joined both sites" "10.0.0.70:8080 10.0.0.71:8080 10.0.1.72:8080" \
    dnat_targets sg-bj-1 servicegrid-demo-svc
delete_pod echoserver-bj-2
delete_pod echoserver-gz-1
expect_within 10 "bj-1 after they left" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc

# A node proxy holding guangzhou's certificate, pointed at beijing's site
# proxy by mistake, never serves (it cannot list through it).
"$SITEGRID_PROXY_BIN" --kubeconfig "$PKI/gz-2.kubeconfig" --hostname gz-2 \
    --bind-address "127.0.0.1:$GZ_NODE_PORT" --data-dir "$SITEGRID_E2E_RUN/proxy-data/gz-2-cloud" \
    >>"$SITEGRID_E2E_LOGS/proxy-gz-2-cloud.log" 2>&1 &
GZ_PID=$!
track $GZ_PID
sleep 5
curl -sf -o /dev/null "http://127.0.0.1:$GZ_NODE_PORT/api/v1/services?limit=1" &&
    fail "a node proxy with guangzhou's certificate serves beijing's view"
grep -q 403 "$SITEGRID_E2E_LOGS/proxy-gz-2-cloud.log" || fail "gz-2's node proxy does not log the 403 (see proxy-gz-2-cloud.log)"

# Everything this scenario started goes, ports included (later scenarios
# choose their own, but nothing of this one should outlive it).
stop_node bj-1
stop_pid "$(listener_pid $NODE_PORT)"
stop_pid $GZ_PID
stop_pid $CLOUD_PID
kubectl delete clusterrolebinding sitegrid-e2e-node-proxies >/dev/null
