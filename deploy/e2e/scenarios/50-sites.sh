# Sites as resources: the seed's NodeUnits beijing and guangzhou and NodeGroup
# location (000_…, "将边缘节点分组") on kube-apiserver 1.20, handled by
# sitegrid-controller alone (with the RBAC of deploy/controller/rbac.yaml):
# `kubectl get nodeunit` as in the seed, nodes labelled location=<unit> and
# <unit>=nodeunits.superedge.io with no hand labelling, the seed's
# DeploymentGrid expanding over them with pods bound in-site, readiness
# followed, a node moving unit, cordon and uncordon, a label set by someone
# else kept, and a NodeGroup deleted while the controller is down cleaned up
# when it comes back.
# shellcheck shell=bash
PORT=25251
SEEDS=$SITEGRID_E2E_ROOT/controller/tests/fixtures

# This scenario's controller is the only one: earlier scenarios' replicas stop.
pkill -TERM -f "^$SITEGRID_CONTROLLER_BIN" 2>/dev/null || true
retry 10 bash -c "! pgrep -f '^$SITEGRID_CONTROLLER_BIN'" || fail "earlier controllers still running"
install_controller_prereqs
crds_established crd/nodeunits.site.superedge.io crd/nodegroups.site.superedge.io || fail "CRDs not established"
# No hand labelling: the sample's location labels go, the units bring them back.
kubectl label node --all location- >/dev/null
kubectl label node bj-1 team=ops >/dev/null
# guangzhou is chosen by a selector on a label of the nodes' own.
kubectl label node gz-1 gz-2 gz-3 --overwrite rack=gz >/dev/null
# Someone else set gz-3's unit label by hand, to another value: it stays, and
# guangzhou reports the conflict.
kubectl label node gz-3 --overwrite guangzhou=by-hand >/dev/null

start_controller sites $PORT --leader-elect=false
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: site.superedge.io/v1alpha2
kind: NodeUnit
metadata:
  name: beijing
spec:
  type: edge
  nodes: [bj-1, bj-2, bj-3]
---
apiVersion: site.superedge.io/v1alpha2
kind: NodeUnit
metadata:
  name: guangzhou
spec:
  type: edge
  selector:
    matchExpressions:
    - {key: rack, operator: In, values: [gz]}
---
apiVersion: site.superedge.io/v1alpha2
kind: NodeGroup
metadata:
  name: location
spec:
  nodeUnits: [beijing, guangzhou]
EOF

# `kubectl get nodeunit`, as in the seed.
units() { kubectl get nodeunit --no-headers | awk '{print $1, $2, $3}' | paste -sd' '; }
expect_within 15 "kubectl get nodeunit" "beijing edge 3/3 guangzhou edge 3/3 unit-node-all other 6/6" units
location() { kubectl get nodes -L location --no-headers | awk '{print $1 "=" $NF}' | sort | paste -sd' '; }
expect_within 10 "nodes' location" \
    "bj-1=beijing bj-2=beijing bj-3=beijing gz-1=guangzhou gz-2=guangzhou gz-3=guangzhou" location
label() { kubectl get node "$1" -o jsonpath="{.metadata.labels.$2}"; }
expect "bj-1 beijing label" "$(label bj-1 beijing)" nodeunits.superedge.io
expect "gz-1 guangzhou label" "$(label gz-1 guangzhou)" nodeunits.superedge.io
expect "gz-3 guangzhou label set by hand" "$(label gz-3 guangzhou)" by-hand
conflict() { kubectl get nodeunit guangzhou -o jsonpath='{.status.conditions[?(@.type=="Conflict")].status}'; }
expect_within 10 "guangzhou Conflict condition" True conflict
kubectl get nodeunit guangzhou -o jsonpath='{.status.conditions[?(@.type=="Conflict")].message}' | has 'gz-3' ||
    fail "the Conflict condition does not name gz-3"
retry 10 bash -c '(( $(kubectl get events -A --field-selector reason=Conflict,involvedObject.name=guangzhou -o name | wc -l) >= 1 ))' ||
    fail "no Conflict event on guangzhou"
expect "bj-1 default unit label" "$(label bj-1 unit-node-all)" nodeunits.superedge.io
group() { kubectl get nodegroup location -o jsonpath='{.status.unitNumber} {.status.nodeUnits}'; }
expect_within 10 "nodegroup location status" '2 ["beijing","guangzhou"]' group
kubectl get nodegroup location --no-headers | awk '{print $2}' | has -x 2 || fail "kubectl get nodegroup UNITS"
described=$(kubectl describe nodeunit beijing)
for field in "Set Node:" "Beijing: +nodeunits.superedge.io" "Location: +beijing" "Type: +edge" \
    "Ready Rate: +3/3" "Ready Nodes:"; do
    grep -Eq "^ *$field" <<<"$described" || fail "kubectl describe nodeunit beijing lacks '$field': $described"
done
described=$(kubectl describe nodegroup location)
for field in "Node Units:" "Unit Number: +2"; do
    grep -Eq "^ *$field" <<<"$described" || fail "kubectl describe nodegroup location lacks '$field': $described"
done

# The seed's DeploymentGrid (gridUniqKey: location) expands over the units.
kubectl apply -f "$SEEDS/seed000-04-deploymentgrid.yaml" >/dev/null
expect_within 30 "per-unit Deployments" "deploymentgrid-demo-beijing deploymentgrid-demo-guangzhou" \
    bash -c "kubectl get deploy -o name | sed 's#.*/##' | grep '^deploymentgrid-demo-' | sort | paste -sd' '"
pod_nodes() { # name/node of the grid's live pods (earlier scenarios' pods stay Terminating: no kubelet)
    kubectl get pods -l appGrid=echo --no-headers \
        -o custom-columns='N:.metadata.name,NODE:.spec.nodeName,DEL:.metadata.deletionTimestamp' 2>/dev/null |
        awk '$3 == "<none>" && $1 ~ /^deploymentgrid-demo-(beijing|guangzhou)-/ {print $1 "/" ($2 == "<none>" ? "" : $2)}' |
        sort -u | paste -sd' '
}
in_site() {
    local p bound=0
    for p in $(pod_nodes); do
        case $p in
        deploymentgrid-demo-beijing-*/bj-* | deploymentgrid-demo-guangzhou-*/gz-*) bound=$((bound + 1)) ;;
        */) return 1 ;; # not bound yet
        *) return 1 ;;  # bound out of its site
        esac
    done
    ((bound >= 4))
}
retry 60 in_site || fail "grid pods not bound in-site: $(pod_nodes)"

# Readiness: bj-2 NotReady → beijing 2/3.
kubectl patch node bj-2 --subresource=status --type=strategic \
    -p '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","lastHeartbeatTime":null}]}}' >/dev/null
ready() { kubectl get nodeunit "$1" -o jsonpath='{.status.readyRate} {.status.notReadyNodes}'; }
expect_within 10 "beijing with bj-2 NotReady" '2/3 ["bj-2"]' ready beijing

# bj-3 moves to guangzhou: its labels move, the grid's pods follow the labels.
kubectl patch nodeunit beijing --type=merge -p '{"spec":{"nodes":["bj-1","bj-2"]}}' >/dev/null
kubectl patch nodeunit guangzhou --type=merge -p '{"spec":{"nodes":["bj-3"]}}' >/dev/null
expect_within 10 "bj-3 location" guangzhou label bj-3 location
expect "bj-3 no longer in beijing" "$(label bj-3 beijing)" ""
expect_within 10 "guangzhou with bj-3" '4/4 ' ready guangzhou
# Pods already bound stay (nodeSelector is IgnoredDuringExecution); new ones
# follow the labels: with 4 replicas per site, the new beijing pods land on
# bj-1/bj-2 only, the new guangzhou ones on gz-* or bj-3.
before=$(pod_nodes | tr ' ' '\n' | sed 's#/.*##')
kubectl patch dg deploymentgrid-demo --type=merge -p '{"spec":{"template":{"replicas":4}}}' >/dev/null
follow() {
    local p new=0
    for p in $(pod_nodes); do
        grep -qxF "${p%%/*}" <<<"$before" && continue
        case $p in
        deploymentgrid-demo-beijing-*/bj-[12] | deploymentgrid-demo-guangzhou-*/gz-* | deploymentgrid-demo-guangzhou-*/bj-3)
            new=$((new + 1)) ;;
        *) return 1 ;; # not bound yet, or out of its site
        esac
    done
    ((new >= 4))
}
retry 60 follow || fail "new grid pods not bound by the new labels: $(pod_nodes)"

# Cordon and uncordon.
kubectl patch nodeunit guangzhou --type=merge -p '{"spec":{"unschedulable":true}}' >/dev/null
cordoned() { kubectl get nodes -o jsonpath='{range .items[?(@.spec.unschedulable==true)]}{.metadata.name} {end}' | tr ' ' '\n' | { grep . || true; } | sort | paste -sd' '; }
expect_within 10 "guangzhou cordoned" "bj-3 gz-1 gz-2 gz-3" cordoned
kubectl patch nodeunit guangzhou --type=merge -p '{"spec":{"unschedulable":false}}' >/dev/null
expect_within 10 "guangzhou uncordoned" "" cordoned

# Deleting the NodeGroup while the controller is down: the finalizer holds it,
# and the controller cleans up when it comes back.
kill -TERM "$CONTROLLER_PID_sites"
retry 15 bash -c "! kill -0 $CONTROLLER_PID_sites" || fail "controller did not stop"
kubectl delete nodegroup location --wait=false >/dev/null
kubectl get nodegroup location >/dev/null 2>&1 || fail "the NodeGroup went without the controller (no finalizer)"
start_controller sites-again $PORT --leader-elect=false
expect_within 15 "no location labels after the group is deleted" "" \
    bash -c "kubectl get nodes -o jsonpath='{.items[*].metadata.labels.location}'"
retry 15 bash -c "! kubectl get nodegroup location" || fail "the NodeGroup stays"
expect "bj-1 beijing label stays" "$(label bj-1 beijing)" nodeunits.superedge.io

# Someone else's label survived every step.
expect "bj-1 team label" "$(label bj-1 team)" ops

# Deleting the units takes their labels off (the controller runs), and the
# sample's world is back for later scenarios.
kubectl delete dg deploymentgrid-demo --wait=false >/dev/null
kubectl delete nodeunit beijing guangzhou --wait=false >/dev/null
retry 15 bash -c "! kubectl get nodeunit beijing guangzhou 2>/dev/null | grep -q ." || fail "the units stay"
expect "bj-1 beijing label after its unit went" "$(label bj-1 beijing)" ""
kill -TERM "$CONTROLLER_PID_sites_again"
retry 15 bash -c "! kill -0 $CONTROLLER_PID_sites_again" || true
kubectl label node bj-1 bj-2 bj-3 --overwrite location=beijing >/dev/null
kubectl label node gz-1 gz-2 gz-3 --overwrite location=guangzhou >/dev/null
kubectl label node gz-1 gz-2 gz-3 rack- >/dev/null
kubectl label node bj-1 team- >/dev/null
kubectl label node gz-3 guangzhou- >/dev/null
kubectl patch node bj-2 --subresource=status --type=strategic -p '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}' >/dev/null
