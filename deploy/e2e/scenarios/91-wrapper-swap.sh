# Swapping SuperEdge's application-grid-wrapper for sitegrid-proxy on a
# running node, as docs/migrate-from-superedge.md does it: the real kube-proxy
# 1.20 of bj-1 reads the wrapper on 127.0.0.1:51006 (its plain-HTTP port, in
# the node's network namespace, as SuperEdge's DaemonSet runs it); the wrapper
# stops and sitegrid-proxy starts on the same port; kube-proxy is neither
# restarted nor reconfigured. Its DNAT rules, sampled every 100 ms
# throughout, name beijing's endpoints only and are never empty; kube-proxy's
# watches are then sitegrid's, and a pod that joined beijing while nothing
# listened on 51006 is in its rules. Requests from the node to the Service,
# every 50 ms throughout, all answered, all from beijing.
# shellcheck shell=bash
WRAPPER=$SITEGRID_K8S_BIN/application-grid-wrapper
[[ -x $WRAPPER ]] || fail "$WRAPPER missing: deploy/e2e/install.sh builds it with SuperEdge's wrapper build script (set SITEGRID_SUPEREDGE_WRAPPER_BUILD)"
NODE=bj-1 PORT=51006
BEIJING="10.0.0.70:8080 10.0.1.72:8080"
PLAIN="10.0.0.81:8080 10.0.1.33:8080"

# The node: its namespace, the API server's port bridged into it (the wrapper
# and sitegrid-proxy read the API server with kube-proxy's credentials, as a
# SuperEdge node's wrapper reads lite-apiserver), kube-proxy pointed at 51006.
ns=$(node_netns $NODE)
apiserver_port=${SITEGRID_E2E_APISERVER##*:}
netns_bridge "$ns" "$apiserver_port"
in_node() { ip netns exec "$ns" "$@"; }
serves_on_node() { in_node curl -sf -o /dev/null "http://127.0.0.1:$PORT/api/v1/services?limit=1"; }

# (ip netns exec, not in_node: $! must be the wrapper itself, which ip execs.)
ip netns exec "$ns" "$WRAPPER" --kubeconfig "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG" --hostname $NODE \
    --bind-address 127.0.0.1:$PORT --wrapper-in-cluster=false --v=2 \
    >>"$SITEGRID_E2E_LOGS/application-grid-wrapper.log" 2>&1 &
WRAPPER_PID=$!
track $WRAPPER_PID "$ns"
retry 30 serves_on_node || fail "application-grid-wrapper does not serve (see application-grid-wrapper.log)"

kubeconfig=$SITEGRID_E2E_RUN/netns/$ns-wrapper.kubeconfig
plain_kubeconfig $PORT >"$kubeconfig"
run_kube_proxy $NODE EndpointSliceProxying=true "$kubeconfig"
kube_proxy=$KUBE_PROXY_PID
expect_within 10 "through the wrapper: DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets "$ns" servicegrid-demo-svc
expect_within 10 "through the wrapper: DNAT plain-echo" "$PLAIN" dnat_targets "$ns" plain-echo

# Requests, counted as scenario 80 counts them: every endpoint of
# servicegrid-demo-svc answers on the node's loopback with its site's name
# (the pods' addresses; their Services' DNAT rules are the only way there),
# and a client on the node asks the ClusterIP every 50 ms throughout.
# (It reads the request before answering: closing on an unread request
# resets the connection, which a client may see before the answer.)
answer=$SITEGRID_E2E_RUN/netns/answer.sh
cat >"$answer" <<'SH'
#!/bin/sh
# Answers one HTTP request with $1, after reading its head.
cr=$(printf '\r')
while IFS= read -r line; do
    case $line in "" | "$cr") break ;; esac
done
printf 'HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s' "${#1}" "$1"
SH
chmod +x "$answer"
for endpoint in 10.0.0.70:beijing 10.0.1.72:beijing 10.0.0.71:beijing 10.0.0.139:guangzhou 10.0.1.8:guangzhou 10.0.1.9:guangzhou; do
    ip=${endpoint%%:*} site=${endpoint#*:}
    ip -n "$ns" addr add "$ip/32" dev lo
    ip netns exec "$ns" socat "TCP-LISTEN:8080,bind=$ip,fork,reuseaddr" "EXEC:$answer $site" \
        2>>"$SITEGRID_E2E_LOGS/socat-$ns.log" &
    track $! "$ns"
done
# The service CIDR through lo: routed there, then DNATed by kube-proxy's rules.
ip -n "$ns" route add 10.96.0.0/16 dev lo
cluster_ip=$(jget svc servicegrid-demo-svc '{.spec.clusterIP}')
expect_within 10 "a request to servicegrid-demo-svc on bj-1" beijing in_node curl -s --max-time 1 "http://$cluster_ip/"
requests=$SITEGRID_E2E_RUN/wrapper-swap-requests
: >"$requests"
(
    while [[ ! -e $requests.stop ]]; do
        in_node curl -s --max-time 1 "http://$cluster_ip/" || printf failed
        echo
        sleep 0.05
    done
) >>"$requests" &
track $!

# kube-proxy's rules for servicegrid-demo-svc, every 100 ms, until told to stop.
samples=$SITEGRID_E2E_RUN/wrapper-swap-samples
: >"$samples"
(
    while [[ ! -e $samples.stop ]]; do
        echo "$(date +%s.%N | cut -c1-14) $(dnat_targets "$ns" servicegrid-demo-svc)"
        sleep 0.1
    done
) >>"$samples" &
track $!

# --- The swap ---------------------------------------------------------------------
sleep 2
stop_pid $WRAPPER_PID
stopped_at=$(date +%s.%N)
# While nothing listens on 51006, a pod joins beijing.
add_ready_pod echoserver-bj-2 bj-2 10.0.0.71 "{appGrid: echo}"
sleep 2
ip netns exec "$ns" "$SITEGRID_PROXY_BIN" --kubeconfig "$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG" --hostname $NODE \
    --bind-address 127.0.0.1:$PORT --data-dir "$SITEGRID_E2E_RUN/proxy-data/$NODE-swap" \
    --log-level info >>"$SITEGRID_E2E_LOGS/proxy-$NODE-swap.log" 2>&1 &
track $! "$ns"
retry 30 serves_on_node || fail "sitegrid-proxy does not serve on $NODE:$PORT"
serving_at=$(date +%s.%N)

# kube-proxy comes back by itself, to sitegrid: its watches, and the pod it missed.
node_metric() { # SERIES: sitegrid_proxy_SERIES of the proxy on the node
    in_node curl -sf "http://127.0.0.1:$PORT/metrics" | awk -v m="sitegrid_proxy_$1" '$1 == m {v = $2} END {print v + 0}'
}
for kind in endpointslices services; do
    expect_within 60 "kube-proxy's watch on $kind, now sitegrid's" 1 node_metric "watchers_open{resource=\"$kind\"}"
done
expect_within 30 "after the swap: DNAT servicegrid-demo-svc with the pod that joined meanwhile" \
    "10.0.0.70:8080 10.0.0.71:8080 10.0.1.72:8080" dnat_targets "$ns" servicegrid-demo-svc
converged_at=$(date +%s.%N)
expect "after the swap: DNAT plain-echo" "$(dnat_targets "$ns" plain-echo)" "$PLAIN"
pid_running "$kube_proxy" || fail "kube-proxy exited during the swap"
expect "kube-proxy processes in $ns" "$(pgrep -f "kube-proxy --kubeconfig=$kubeconfig" | wc -l)" 1

# And it follows sitegrid: a guangzhou pod stays out, a beijing pod leaves.
add_ready_pod echoserver-gz-1 gz-1 10.0.1.9 "{appGrid: echo}"
delete_pod echoserver-bj-2
expect_within 10 "sitegrid's view: DNAT servicegrid-demo-svc" "$BEIJING" dnat_targets "$ns" servicegrid-demo-svc
delete_pod echoserver-gz-1
touch "$samples.stop" "$requests.stop"
sleep 1.2

# Throughout: never empty, never a guangzhou endpoint.
total=$(wc -l <"$samples")
bad=$(awk '{ $1 = ""; t = substr($0, 2) } t != "10.0.0.70:8080 10.0.1.72:8080" && t != "10.0.0.70:8080 10.0.0.71:8080 10.0.1.72:8080" {n++} END {print n + 0}' "$samples")
((total > 50)) || fail "only $total samples of kube-proxy's rules"
expect "samples of kube-proxy's rules that were not beijing's (of $total)" "$bad" 0
# How kube-proxy came back, which depends on how its watches ended: broken
# mid-stream, client-go's reflector lists again (refused until sitegrid
# listens, with backoff); ended cleanly, it watches again from its last
# resourceVersion: "" when the wrapper sent it no event (its lists carry
# none), which sitegrid answers as kube-apiserver does, with every object
# first; the API server's otherwise, older than any sitegrid issued: 410,
# and it lists. All three converge, as the rules above show.
node_sum() { # PREFIX: the sum of the node proxy's series starting with PREFIX
    in_node curl -sf "http://127.0.0.1:$PORT/metrics" | awk -v p="sitegrid_proxy_$1" 'index($1, p) == 1 {v += $2} END {print v + 0}'
}
too_old=$(node_sum 'watches_too_old_total{resource="endpointslices"}')
lists=$(node_sum 'cached_responses_total{verb="list",resource="endpointslices"')
log "figures: kube-proxy's EndpointSlices from sitegrid: $lists list(s), $too_old watch(es) answered 410"
sent=$(wc -l <"$requests")
failed=$(grep -cv -e '^beijing$' -e '^guangzhou$' "$requests" || true)
other=$(grep -c '^guangzhou$' "$requests" || true)
((sent > 50)) || fail "only $sent requests sent"
expect "requests that failed during the swap (of $sent)" "$failed" 0
expect "requests answered from guangzhou during the swap (of $sent)" "$other" 0
log "figures: requests from bj-1 to servicegrid-demo-svc throughout: $sent sent, $failed failed, $other from another site"
log "figures: wrapper stopped -> sitegrid serving $(awk -v a="$stopped_at" -v b="$serving_at" 'BEGIN {printf "%.1f", b - a}') s (2 s of it deliberate); -> kube-proxy's rules had the missed pod $(awk -v a="$serving_at" -v b="$converged_at" 'BEGIN {printf "%.1f", b - a}') s later; $total samples of its rules, every one beijing's"
stop_node $NODE
