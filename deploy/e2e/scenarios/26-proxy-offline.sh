# Edge autonomy on the real control plane: sitegrid-proxy reaches the API
# server through a relay, the relay is cut (the node loses the cloud), and
# then sitegrid-proxy and kube-proxy 1.20 both restart. kube-proxy gets its
# Services and EndpointSlices from the proxy's snapshot and writes the same
# DNAT rules as before the cut. When the route comes back, the proxy syncs
# and sends only what changed: a pod that joined the site meanwhile reaches
# kube-proxy's rules over the watch it already has (no relist, no 410).
# Then the proxy alone restarts offline while kube-proxy keeps running:
# kube-proxy reconnects to the snapshot's versions without a 410 and follows
# the next change once the route is back. (Through the harness's socat bridge
# a refused connection reaches kube-proxy as an immediate EOF, which client-go
# 1.20 answers with one LIST from its last version — served from the
# snapshot; on a node the connection is refused and it just re-watches. The
# resumed watch replaying persisted events is proven in proxy/tests/it/offline.rs.)
# shellcheck shell=bash
PORT=25241 RELAY=25246
BEIJING="10.0.0.70:8080 10.0.1.72:8080"
PLAIN="10.0.0.81:8080 10.0.1.33:8080"
GATES=EndpointSliceProxying=true
export PROXY_KUBECONFIG=$SITEGRID_E2E_RUN/offline-proxy.kubeconfig
sed "s#https://127.0.0.1:6443#https://127.0.0.1:$RELAY#" "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG" >"$PROXY_KUBECONFIG"
grep -q "127.0.0.1:$RELAY" "$PROXY_KUBECONFIG" || fail "the proxy's kubeconfig does not name the relay"

relay_up() {
    socat "TCP-LISTEN:$RELAY,bind=127.0.0.1,fork,reuseaddr" TCP:127.0.0.1:6443 2>>"$SITEGRID_E2E_LOGS/relay.log" &
    track $!
    retry 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$RELAY" 2>/dev/null || fail "the relay does not listen"
}
# relay_cut: the listener and every connection it forwards (socat forks one per connection).
relay_cut() {
    pkill -f "TCP-LISTEN:$RELAY," || true
    retry 5 bash -c "! exec 3<>/dev/tcp/127.0.0.1/$RELAY" 2>/dev/null || fail "the relay is still up"
}
readyz() { curl -s "http://127.0.0.1:$PORT/readyz"; }
# kube_proxy_lists KIND: the lists of KIND the proxy answered in protobuf (kube-proxy's).
kube_proxy_lists() {
    proxy_metric $PORT "cached_responses_total{verb=\"list\",resource=\"$1\",content_type=\"application/vnd.kubernetes.protobuf\"}"
}
# gone_answers: the 410s the proxy sent on watches (versions too old, or watchers left behind).
gone_answers() {
    local kind n=0
    for kind in services endpointslices endpoints nodes; do
        n=$((n + $(proxy_metric $PORT "watches_too_old_total{resource=\"$kind\"}")))
        n=$((n + $(proxy_metric $PORT "watchers_ended_lagging_total{resource=\"$kind\"}")))
    done
    echo $n
}

relay_up
start_proxy bj-1 $PORT --snapshot-interval=2s
start_kube_proxy bj-1 $PORT $GATES
expect_within 10 "bj-1 DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
expect_within 10 "bj-1 DNAT plain-echo" "$PLAIN" dnat_targets sg-bj-1 plain-echo
retry 10 more_than 0 proxy_metric $PORT snapshot_writes_total || fail "no snapshot written"

# The cut; then the proxy restarts (a graceful stop writes its last
# snapshot), and kube-proxy with a fresh network namespace, rules empty.
relay_cut
stop_pid "$(listener_pid $PORT)" 15
stop_node bj-1
start_proxy bj-1 $PORT --snapshot-interval=2s
ready=$(readyz)
[[ $ready == "ok, degraded: serving a snapshot from "* ]] || fail "/readyz while cut: '$ready'"
start_kube_proxy bj-1 $PORT $GATES
expect_within 10 "offline restart: bj-1 DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
expect_within 10 "offline restart: bj-1 DNAT plain-echo" "$PLAIN" dnat_targets sg-bj-1 plain-echo
expect_within 10 "kube-proxy's slice watch while cut" 1 proxy_metric $PORT 'watchers_open{resource="endpointslices"}'
log "kube-proxy restarted offline: its rules from the proxy's snapshot ($(stat -c %s "$SITEGRID_E2E_RUN/proxy-data/bj-1-$PORT/snapshot") bytes)"

# Meanwhile in the cluster a pod joins beijing; the node cannot know yet.
add_ready_pod echoserver-bj-2 bj-2 10.0.0.71
expect_within 30 "the API server's slices with bj-2's pod" "10.0.0.139 10.0.0.70 10.0.0.71 10.0.1.72 10.0.1.8" \
    slice_ips "$SITEGRID_E2E_APISERVER"
expect "bj-1 DNAT while cut" "$(dnat_targets sg-bj-1 servicegrid-demo-svc)" "$BEIJING"
lists_before=$(kube_proxy_lists endpointslices) gone_before=$(gone_answers)

# The route is back: the change reaches kube-proxy's rules over its open watch.
relay_up
expect_within 30 "bj-1 DNAT after the route is back" "10.0.0.70:8080 10.0.0.71:8080 10.0.1.72:8080" \
    dnat_targets sg-bj-1 servicegrid-demo-svc
expect_within 10 "/readyz after the sync" ok readyz
expect "kube-proxy's slice lists across the reconnection" "$(kube_proxy_lists endpointslices)" "$lists_before"
expect "410 answers across the reconnection" "$(gone_answers)" "$gone_before"
expect "410 answers in the whole scenario" "$gone_before" 0

# The proxy alone restarts while cut; kube-proxy keeps running and resumes
# its watches (the new process's counters start at zero).
relay_cut
stop_pid "$(listener_pid $PORT)" 15
start_proxy bj-1 $PORT --snapshot-interval=2s
for kind in endpointslices services; do
    expect_within 20 "kube-proxy's $kind watch back" 1 proxy_metric $PORT "watchers_open{resource=\"$kind\"}"
done
expect "410 answers after the proxy's restart" "$(gone_answers)" 0
expect "bj-1 DNAT across the proxy's restart" "$(dnat_targets sg-bj-1 servicegrid-demo-svc)" \
    "10.0.0.70:8080 10.0.0.71:8080 10.0.1.72:8080"
relay_up
delete_pod echoserver-bj-2
expect_within 30 "bj-1 DNAT after bj-2's pod left" "$BEIJING" dnat_targets sg-bj-1 servicegrid-demo-svc
expect "410 answers to the end" "$(gone_answers)" 0
stop_node bj-1
