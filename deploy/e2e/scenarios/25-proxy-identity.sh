# sitegrid-proxy with an identity of its own and least privilege, serving the
# real kube-proxy 1.20 over HTTPS with the CA, serving certificate, client
# certificate and kubeconfig that sitegrid-certs wrote; what it passes through
# runs as the caller:
# - kube-proxy's client certificate (system:kube-proxy) is impersonated: its
#   Event is created although the proxy itself may not create Events;
# - a request without credentials runs as the proxy only for what kube-proxy
#   needs (so the proxy's RBAC decides it), anything else gets the proxy's 403;
# - a caller's own token gets exactly what that ServiceAccount may do.
# shellcheck shell=bash
TLS_PORT=25221 TLS_OPS=25231 PLAIN_PORT=25222
PKI=$SITEGRID_E2E_RUN/sitegrid-certs
BEIJING="10.0.0.70:8080 10.0.1.72:8080"

# The proxy's own identity: what it caches, and impersonating kube-proxy.
# No Events: kube-proxy's Event can only go through as kube-proxy itself.
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sitegrid-proxy-e2e}
rules:
- apiGroups: [""]
  resources: [services, endpoints, nodes]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [users]
  verbs: [impersonate]
  resourceNames: [system:kube-proxy]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: sitegrid-proxy-e2e}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: sitegrid-proxy-e2e}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: sitegrid-proxy}]
EOF
"$SITEGRID_E2E_ROOT/deploy/e2e/cluster.sh" cert sitegrid-proxy /CN=sitegrid-proxy
"$SITEGRID_E2E_ROOT/deploy/e2e/cluster.sh" kubeconfig sitegrid-proxy
PROXY_KUBECONFIG=$SITEGRID_E2E_RUN/sitegrid-proxy.kubeconfig
expect "the proxy's identity may not delete Services" \
    "$(kubectl auth can-i delete services --as=sitegrid-proxy 2>/dev/null || true)" no

# What an operator runs (certs/README.md).
"$SITEGRID_CERTS_BIN" --out "$PKI" init >/dev/null
"$SITEGRID_CERTS_BIN" --out "$PKI" server >/dev/null
"$SITEGRID_CERTS_BIN" --out "$PKI" client kube-proxy --user system:kube-proxy >/dev/null
"$SITEGRID_CERTS_BIN" --out "$PKI" kubeconfig kube-proxy --server "https://127.0.0.1:$TLS_PORT" >/dev/null

"$SITEGRID_PROXY_BIN" --kubeconfig "$PROXY_KUBECONFIG" --hostname bj-1 --bind-address "127.0.0.1:$TLS_PORT" \
    --cert-file "$PKI/server.crt" --key-file "$PKI/server.key" --ca-file "$PKI/ca.crt" \
    --metrics-bind-address "127.0.0.1:$TLS_OPS" --data-dir "$SITEGRID_E2E_RUN/proxy-data/bj-1-tls" \
    >"$SITEGRID_E2E_LOGS/proxy-tls-bj-1.log" 2>&1 &
track $!
"$SITEGRID_PROXY_BIN" --kubeconfig "$PROXY_KUBECONFIG" --hostname bj-1 --bind-address "127.0.0.1:$PLAIN_PORT" \
    --data-dir "$SITEGRID_E2E_RUN/proxy-data/bj-1-plain" >"$SITEGRID_E2E_LOGS/proxy-plain-bj-1.log" 2>&1 &
track $!
retry 30 curl -sf "http://127.0.0.1:$TLS_OPS/readyz" || fail "the TLS proxy is not ready (see proxy-tls-bj-1.log)"
retry 30 curl -sf "http://127.0.0.1:$PLAIN_PORT/readyz" || fail "the plain proxy is not ready"

# kube-proxy over HTTPS with its client certificate: in-site rules, and its
# start-up Event created as system:kube-proxy (impersonated).
events_before=$(kubectl get events -n default -o name \
    --field-selector source=kube-proxy,involvedObject.name=bj-1,reason=Starting | wc -l)
start_kube_proxy bj-1 $TLS_PORT EndpointSliceProxying=true "$PKI/kube-proxy.kubeconfig"
expect_within 10 "kube-proxy over HTTPS: bj-1 DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
starting_events() {
    kubectl get events -n default -o name \
        --field-selector source=kube-proxy,involvedObject.name=bj-1,reason=Starting | wc -l
}
retry 10 more_than "$events_before" starting_events \
    || fail "kube-proxy's Event did not reach the API server through the proxy (impersonation)"
stop_node bj-1

# A certificate holder gets its own rights, not the proxy's.
if out=$(kubectl --kubeconfig "$PKI/kube-proxy.kubeconfig" get secrets -n default 2>&1); then
    fail "system:kube-proxy listed Secrets through the proxy: $out"
fi
[[ $out == *'User "system:kube-proxy" cannot list resource "secrets"'* ]] || fail "not the API server's refusal of system:kube-proxy: $out"

# Without credentials: kube-proxy's own needs run as the proxy, whose RBAC
# decides (no Events: the API server refuses user sitegrid-proxy) ...
plain=http://127.0.0.1:$PLAIN_PORT
curl -sf "$plain/api/v1/nodes/bj-1" | has '"name": *"bj-1"' || fail "anonymous GET of its own Node"
out=$(curl -s -X POST -H 'Content-Type: application/json' "$plain/api/v1/namespaces/default/events" \
    -d '{"apiVersion":"v1","kind":"Event","metadata":{"name":"anon.1"},"involvedObject":{"kind":"Node","name":"bj-1"},"reason":"Test"}')
[[ $out == *'User \"sitegrid-proxy\" cannot create resource \"events\"'* ]] || fail "anonymous Event not run as the proxy: $out"
# ... and anything else is the proxy's 403, naming the flag.
out=$(curl -s -w ' %{http_code}' "$plain/api/v1/namespaces/kube-system/secrets")
[[ $out == *'--anonymous-passthrough=all'*' 403' ]] || fail "anonymous Secrets: $out"
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$plain/api/v1/namespaces/default/services/plain-echo")
expect "anonymous delete of a Service" "$code" 403
kubectl get service plain-echo >/dev/null || fail "plain-echo is gone"

# A caller's own token: exactly what its ServiceAccount may do.
kubectl create serviceaccount secret-reader >/dev/null
kubectl create role secret-reader --verb=get,list --resource=secrets >/dev/null
kubectl create rolebinding secret-reader --role=secret-reader --serviceaccount=default:secret-reader >/dev/null
sa_token_secret() { kubectl get serviceaccount secret-reader -o jsonpath='{.secrets[0].name}' | grep .; }
retry 30 sa_token_secret || fail "no token Secret for ServiceAccount secret-reader"
secret=$(sa_token_secret)
token=$(kubectl get secret "$secret" -o jsonpath='{.data.token}' | base64 -d)
out=$(curl -sf -H "Authorization: Bearer $token" "$plain/api/v1/namespaces/default/secrets") \
    || fail "the reader's token could not list default's Secrets through the proxy"
[[ $out == *"\"name\": \"$secret\""* || $out == *"\"name\":\"$secret\""* ]] || fail "the reader's list lacks $secret: $out"
out=$(curl -s -w ' %{http_code}' -H "Authorization: Bearer $token" "$plain/api/v1/namespaces/kube-system/secrets")
[[ $out == *'system:serviceaccount:default:secret-reader'*' 403' ]] || fail "the reader's token reached kube-system: $out"
