# kubectl sitegrid (plugin/) against the real kube-apiserver 1.20, run as a
# user runs it: kubectl finds kubectl-sitegrid on PATH. With the sample
# world, a sitegrid-controller and the seeds' DeploymentGrid and
# ServiceGrid: `status` shows each site's ready/desired as the grid's status
# and the Deployments say, marks a site whose pod turns unready, and counts
# the ServiceGrid's endpoints per site as the EndpointSlices have them;
# `sites` shows NodeUnits as `kubectl get nodeunit` does, a NotReady node
# included; `endpoints --node` marks served exactly what a real
# sitegrid-proxy for that node serves (v1beta1 slices), with the matching
# key and why the rest is dropped, and finds a proxy pod on the node. A
# second control plane without sitegrid's CRDs gets the one-line "not
# installed" error, and kubectl's "connection refused" once its API server stops.
# shellcheck shell=bash
PORT=25861 BJ_PROXY=25862 GZ_PROXY=25863
BARE_PORTS="25851 25852 25853 25854 25855"
SEEDS=$SITEGRID_E2E_ROOT/controller/tests/fixtures
TMP=$SITEGRID_E2E_RUN/plugin
mkdir -p "$TMP/bin"

# A control plane without the CRDs comes up meanwhile (about 15 s).
start_extra_cluster bare "$BARE_PORTS" &
BARE_STARTING=$!

# kubectl finds the plugin on PATH.
ln -sf "$SITEGRID_PLUGIN_BIN" "$TMP/bin/kubectl-sitegrid"
export PATH="$TMP/bin:$PATH"
kubectl plugin list 2>/dev/null | has -x "$TMP/bin/kubectl-sitegrid" || fail "kubectl plugin list: $(kubectl plugin list 2>&1)"

# This scenario's controller is the only one; the sites as sample.sh made them.
stop_tracked_controllers
kubectl label node --all zone- >/dev/null
for n in bj-1 bj-2 bj-3; do kubectl label node $n location=beijing --overwrite >/dev/null; done
for n in gz-1 gz-2 gz-3; do kubectl label node $n location=guangzhou --overwrite >/dev/null; done
install_controller_prereqs
crds_established crd/nodeunits.site.superedge.io || fail "CRD nodeunits not established"
start_controller plugin $PORT --leader-elect=false --resync-period=3s
kubectl apply -f "$SEEDS/seed000-04-deploymentgrid.yaml" -f "$SEEDS/seed000-05-servicegrid.yaml" >/dev/null
for site in beijing guangzhou; do
    retry 30 exists deploy deploymentgrid-demo-$site || fail "deploymentgrid-demo-$site never appeared"
done
retry 60 deploy_ready deploymentgrid-demo-beijing 2 10.3.0 || fail "beijing's pods never ran"
retry 60 deploy_ready deploymentgrid-demo-guangzhou 2 10.3.1 || fail "guangzhou's pods never ran"

# status_cell GRID COLUMN: that cell of `kubectl sitegrid status` (row GRID, e.g. dg/deploymentgrid-demo).
status_cell() {
    kubectl sitegrid status "${@:3}" | python3 -c 'import sys
rows = [l.split() for l in sys.stdin.read().splitlines()]
col = rows[0].index(sys.argv[2].upper())
print(next(r[col] for r in rows[1:] if r[0] == sys.argv[1]))' "$1" "$2"
}
# deploy_cell SITE: readyReplicas/replicas of the site's Deployment, as the API server has them.
deploy_cell() { jget deploy "deploymentgrid-demo-$1" '{.status.readyReplicas}/{.spec.replicas}'; }
# slice_cell SERVICE SITE: ready/all endpoints of SERVICE's EndpointSlices on nodes with location=SITE.
slice_cell() {
    kubectl get nodes -o json >"$TMP/nodes.json"
    kubectl get endpointslices -l "kubernetes.io/service-name=$1" -o json >"$TMP/slices.json"
    python3 - "$TMP/nodes.json" "$TMP/slices.json" "$2" <<'PY'
import json, sys
nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in json.load(open(sys.argv[1]))["items"]}
ready = total = 0
for s in json.load(open(sys.argv[2]))["items"]:
    for e in s.get("endpoints") or []:
        node = e.get("nodeName") or e.get("topology", {}).get("kubernetes.io/hostname")
        if nodes.get(node, {}).get("location") == sys.argv[3]:
            total += 1
            ready += e.get("conditions", {}).get("ready", True) is not False
print(f"{ready}/{total}")
PY
}
# sg_agrees SITE: the ServiceGrid's cell is what the EndpointSlices have in SITE, and that is not nothing.
sg_agrees() {
    local want
    want=$(slice_cell servicegrid-demo-svc "$1")
    [[ $want != 0/* && $(status_cell sg/servicegrid-demo "$1") == "$want" ]]
}

# status: the seed's grid ready in both sites, as its Deployments say; the ServiceGrid as its slices say.
expect_within 30 "dg readySites" 2 jget dg deploymentgrid-demo '{.status.readySites}'
for site in beijing guangzhou; do
    expect "dg $site" "$(status_cell dg/deploymentgrid-demo $site)" "$(deploy_cell $site)"
    expect "dg $site is 2/2" "$(deploy_cell $site)" 2/2
    retry 20 sg_agrees $site || fail "sg $site: $(status_cell sg/servicegrid-demo $site), slices: $(slice_cell servicegrid-demo-svc $site)"
done
expect "dg READY" "$(status_cell dg/deploymentgrid-demo ready)" 2/2
expect "wide KEY" "$(status_cell dg/deploymentgrid-demo key -o wide)" location
# One beijing pod turns unready: the site is marked, in the table and the JSON.
pod=$(kubectl get pods -o name | awk -F/ '/^pod\/deploymentgrid-demo-beijing-/ && !n++ {print $2}')
set_pod_ready "$pod" False
expect_within 30 "unready beijing" "1/2*" status_cell dg/deploymentgrid-demo beijing
expect "READY with beijing unready" "$(status_cell dg/deploymentgrid-demo ready)" 1/2
json_ready=$(kubectl sitegrid status -o json | python3 -c 'import json,sys
g = next(g for g in json.load(sys.stdin)["grids"] if g["name"] == "deploymentgrid-demo")
print(g["cells"]["beijing"]["isReady"], g["cells"]["beijing"]["source"], g["cells"]["guangzhou"]["isReady"])')
expect "status -o json" "$json_ready" "False gridStatus True"
pod_endpoint_ready() {
    kubectl get endpointslices -l kubernetes.io/service-name=servicegrid-demo-svc \
        -o jsonpath="{.items[*].endpoints[?(@.targetRef.name==\"$1\")].conditions.ready}"
}
expect_within 30 "$pod's endpoint" false pod_endpoint_ready "$pod"
retry 20 sg_agrees beijing || fail "sg beijing with $pod unready: $(status_cell sg/servicegrid-demo beijing), slices: $(slice_cell servicegrid-demo-svc beijing)"
kubectl sitegrid status -o wide >"$SITEGRID_E2E_LOGS/plugin-status-unready.txt"
set_pod_ready "$pod" True
expect_within 30 "beijing ready again" 2/2 status_cell dg/deploymentgrid-demo beijing
kubectl sitegrid status >"$SITEGRID_E2E_LOGS/plugin-status.txt"

# sites: the seed's NodeUnits as `kubectl get nodeunit` prints them, bj-2 NotReady included.
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: site.superedge.io/v1alpha2
kind: NodeUnit
metadata: {name: beijing}
spec: {type: edge, nodes: [bj-1, bj-2, bj-3]}
---
apiVersion: site.superedge.io/v1alpha2
kind: NodeUnit
metadata: {name: guangzhou}
spec: {type: edge, nodes: [gz-1, gz-2, gz-3]}
EOF
kubectl patch node bj-2 --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady"}]}}' >/dev/null
units() { kubectl get nodeunit --no-headers | awk '{print $1, $2, $3}' | paste -sd' '; }
plugin_units() { kubectl sitegrid sites | awk 'NR > 1 {print $1, $2, $3}' | paste -sd' '; }
unit() { kubectl get nodeunit "$1" --no-headers | awk '{print $1, $2, $3}'; }
plugin_unit() { kubectl sitegrid sites | awk -v u="$1" '$1 == u {print $1, $2, $3}'; }
expect_within 20 "kubectl get nodeunit beijing" "beijing edge 2/3" unit beijing
expect_within 20 "kubectl get nodeunit guangzhou" "guangzhou edge 3/3" unit guangzhou
expect "sites" "$(plugin_units)" "$(units)"
expect "sites NODES" "$(kubectl sitegrid sites | awk '$1 == "beijing" {print $4}')" bj-1,bj-2,bj-3
expect "sites NOT-READY" "$(kubectl sitegrid sites -o wide | awk '$1 == "beijing" {print $5}')" bj-2
kubectl sitegrid sites -o wide >"$SITEGRID_E2E_LOGS/plugin-sites.txt"
kubectl patch node bj-2 --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}' >/dev/null
expect_within 20 "bj-2 Ready again" "beijing edge 3/3" plugin_unit beijing
expect "sites after bj-2 is back" "$(plugin_units)" "$(units)"

# endpoints: what real proxies for bj-1 and gz-2 serve, and why.
start_proxy bj-1 $BJ_PROXY
start_proxy gz-2 $GZ_PROXY
# plugin_served NODE: the sorted addresses `kubectl sitegrid endpoints` marks served for NODE.
plugin_served() {
    kubectl sitegrid endpoints servicegrid-demo-svc --node "$1" -o json 2>/dev/null | python3 -c 'import json,sys
r = json.load(sys.stdin)
print(" ".join(sorted(a for e in r["endpoints"] if e["served"] for a in e["addresses"])))'
}
for pair in bj-1:$BJ_PROXY gz-2:$GZ_PROXY; do
    node=${pair%:*} port=${pair#*:}
    expect_within 20 "served to $node" "$(slice_ips "http://127.0.0.1:$port")" plugin_served "$node"
    [[ $(plugin_served "$node" | wc -w) -ge 2 ]] || fail "$node is served $(plugin_served "$node")"
done
[[ $(plugin_served bj-1) != "$(plugin_served gz-2)" ]] || fail "both sites are served the same"
text=$(kubectl sitegrid endpoints servicegrid-demo-svc --node bj-1 2>&1)
echo "$text" >"$SITEGRID_E2E_LOGS/plugin-endpoints.txt"
grep -q "^Computed from the API server's Service, Nodes and EndpointSlices (discovery.k8s.io/v1beta1) with sitegrid-proxy's own filter code.$" <<<"$text" || fail "no source line: $text"
grep -q "key location matched (bj-1 has location=beijing)" <<<"$text" || fail "no matched key: $text"
grep -Eq ' no +dropped: node gz-[123] has location=guangzhou, bj-1 has location=beijing$' <<<"$text" || fail "no dropped reason: $text"
grep -q "^Proxy: no sitegrid-proxy on node bj-1" <<<"$text" || fail "a proxy pod found where there is none: $text"
# A proxy pod on bj-1 (as the DaemonSet would run it; this suite plays kubelet) is named.
kubectl -n kube-system apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: sitegrid-proxy-bj-1, namespace: kube-system, labels: {app: sitegrid-proxy}}
spec:
  nodeName: bj-1
  automountServiceAccountToken: false
  containers: [{name: proxy, image: "sitegrid/sitegrid-proxy:0.1.0"}]
EOF
kubectl -n kube-system patch pod sitegrid-proxy-bj-1 --subresource=status --type=merge \
    -p "$(pod_status 192.0.2.11 192.0.2.11 True "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" >/dev/null
kubectl sitegrid endpoints servicegrid-demo-svc --node bj-1 | has -x "Proxy: sitegrid-proxy on bj-1: kube-system/sitegrid-proxy-bj-1 (Running)." ||
    fail "proxy pod not found: $(kubectl sitegrid endpoints servicegrid-demo-svc --node bj-1)"
kubectl -n kube-system delete pod sitegrid-proxy-bj-1 --grace-period=0 --force >/dev/null 2>&1
kubectl sitegrid endpoints plain-echo --node bj-1 | has "^Filter: the Service has no topologyKeys annotation" || fail "plain-echo not said unfiltered"
if out=$(kubectl sitegrid endpoints servicegrid-demo-svc --node nope 2>&1); then fail "an unknown node succeeded: $out"; fi
expect "unknown node" "$out" 'error: node "nope" not found'

# A cluster without the CRDs, then without its API server.
wait "$BARE_STARTING" || fail "the bare control plane did not come up (see $SITEGRID_E2E_LOGS/cluster-bare.log)"
BARE_KC=$(extra_cluster_run bare)/admin.kubeconfig
for pair in status:deploymentgrids.superedge.io sites:nodeunits.site.superedge.io; do
    if out=$(KUBECONFIG=$BARE_KC kubectl sitegrid "${pair%:*}" 2>&1); then fail "${pair%:*} without CRDs succeeded: $out"; fi
    [[ $(wc -l <<<"$out") == 1 && $out == "error: sitegrid's CRDs are not installed in this cluster"*"${pair#*:}"*"kubectl apply -f deploy/crds/"* ]] ||
        fail "${pair%:*} without CRDs: $out"
done
extra_cluster bare stop apiserver
if out=$(kubectl sitegrid status --kubeconfig "$BARE_KC" 2>&1); then fail "status without an API server succeeded: $out"; fi
expect "API server down" "$out" "The connection to the server 127.0.0.1:$(cut -d' ' -f3 <<<"$BARE_PORTS") was refused - did you specify the right host or port?"
stop_extra_cluster bare

# What the user read, kept with the logs.
kubectl sitegrid endpoints servicegrid-demo-svc --node gz-2 -o wide >"$SITEGRID_E2E_LOGS/plugin-endpoints-wide.txt"

# Leave the world as found: no grid, no unit, no controller or proxy of this scenario.
kubectl delete dg deploymentgrid-demo --wait=false >/dev/null
kubectl delete nodeunit beijing guangzhou --wait=false >/dev/null
retry 20 bash -c "! kubectl get nodeunit beijing guangzhou 2>/dev/null | grep -q ." || fail "the units stay"
stop_tracked_controllers
rm -rf "$TMP"
