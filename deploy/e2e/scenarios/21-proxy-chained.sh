# Per-site chaining (issue 16): a site proxy for beijing (--site-selector
# location=beijing) is the upstream of bj-2's node proxy; bj-1's node proxy
# talks to the API server directly. The real kube-proxy 1.20 behind each
# writes the same DNAT rules, before and after nodes change site; a node's
# status write reaches no node proxy behind the site proxy.
# shellcheck shell=bash
SITE_PORT=25216 DIRECT_PORT=25217 CHAINED_PORT=25218
GATES=EndpointSliceProxying=true
BEIJING="10.0.0.70:8080 10.0.1.72:8080"
PLAIN="10.0.0.81:8080 10.0.1.33:8080"

start_site_proxy location=beijing $SITE_PORT
start_proxy bj-1 $DIRECT_PORT
# bj-2's node proxy reads everything through the site proxy.
chained_kubeconfig=$SITEGRID_E2E_RUN/chained.kubeconfig
cat >"$chained_kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: site, cluster: {server: "http://127.0.0.1:$SITE_PORT"}}]
users: [{name: node, user: {}}]
contexts: [{name: site, context: {cluster: site, user: node}}]
current-context: site
KC
PROXY_KUBECONFIG=$chained_kubeconfig start_proxy bj-2 $CHAINED_PORT
start_kube_proxy bj-1 $DIRECT_PORT $GATES
start_kube_proxy bj-2 $CHAINED_PORT $GATES

# same_rules SERVICE WANT: both kube-proxies route SERVICE to WANT.
same_rules() {
    expect_within 10 "direct bj-1: $1" "$2" dnat_targets sg-bj-1 "$1"
    expect_within 10 "chained bj-2: $1" "$2" dnat_targets sg-bj-2 "$1"
}
same_rules servicegrid-demo-svc "$BEIJING"
same_rules plain-echo "$PLAIN"

# The site proxy serves bj-2's node proxy: its Services and EndpointSlices,
# and its node scope from the cache (metadata only, as the node proxy asks).
for kind in services endpointslices nodes; do
    retry 10 more_than 0 proxy_metric $SITE_PORT "watchers_open{resource=\"$kind\"}" ||
        fail "the site proxy serves no watch of $kind to bj-2's node proxy"
done

# bj-3's status is written (what kubelet does every 5 minutes), then bj-3
# moves to guangzhou: the site proxy sends bj-2's node proxy the move only.
nodes_out=$(proxy_metric $SITE_PORT 'watch_events_out_total{resource="nodes"}')
kubectl patch node bj-3 --subresource=status --type=merge \
    -p '{"status":{"nodeInfo":{"kernelVersion":"sitegrid-e2e-heartbeat"}}}' >/dev/null
kubectl label node bj-3 location=guangzhou --overwrite >/dev/null
same_rules servicegrid-demo-svc "10.0.0.70:8080"
expect_within 10 "node events the site proxy sent (bj-3's move, not its status)" "$((nodes_out + 1))" \
    proxy_metric $SITE_PORT 'watch_events_out_total{resource="nodes"}'

# gz-2 comes to beijing: its pod joins both nodes' rules; then both go back.
kubectl label node gz-2 location=beijing --overwrite >/dev/null
same_rules servicegrid-demo-svc "10.0.0.139:8080 10.0.0.70:8080"
kubectl label node gz-2 location=guangzhou --overwrite >/dev/null
kubectl label node bj-3 location=beijing --overwrite >/dev/null
same_rules servicegrid-demo-svc "$BEIJING"
same_rules plain-echo "$PLAIN"

stop_node bj-1
stop_node bj-2
