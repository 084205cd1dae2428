# Multi-cluster distribution (issue 13; SuperEdge's "fed" on clusternet, pull model), on three
# real 1.20 control planes: the suite's cluster is the CONTROL cluster, and this scenario brings up
# two managed clusters, A and B (etcd, apiserver, controller-manager and scheduler each, own CA),
# and stops them at the end whatever happens. Each cluster runs its own sitegrid-controller
# (deploy/controller/rbac.yaml's permissions; short timings). The seed's example (seed 000 #10 =
# 001 #9, applied verbatim): A has a `zone: zone1` node and gets deploymentgrid-demo-zone1
# (template test1, 2 replicas); B has no zone node and gets nothing until one is labelled zone2
# (test2, 3 replicas); A's Deployment edited by hand goes back to the template; the control
# cluster's grid aggregates both clusters' states; B's API server down → B unreachable in the
# status, A untouched; back → converges; deleting the original removes everything in every
# cluster.
# shellcheck shell=bash
SEEDS=$SITEGRID_E2E_ROOT/controller/tests/fixtures
GRID=deploymentgrid-demo
# Ports (loopback, below the ephemeral range): A 25301-25305, B 25311-25315 (etcd client, etcd peer,
# apiserver, controller-manager, scheduler); the three sitegrid-controllers' /metrics: control
# 25300, A 25306, B 25316.
PORTS_A="25301 25302 25303 25304 25305" PORTS_B="25311 25312 25313 25314 25315"
CTL=25300 CTL_A=25306 CTL_B=25316
GRACE=8
FED_FLAGS=(--leader-elect=false --parent-heartbeat=2s --cluster-grace-period=${GRACE}s --resync-period=3s)
# The controllers run with deploy/controller/rbac.yaml's permissions (user sitegrid-controller, as
# in 30-controller), so a missing rule fails here; SITEGRID_E2E_FED_USER=admin runs them as admin.
FED_USER=${SITEGRID_E2E_FED_USER:-sitegrid-controller}
RUN_A=$(extra_cluster_run cluster-a) RUN_B=$(extra_cluster_run cluster-b)
KC=$KUBECONFIG KC_A=$RUN_A/admin.kubeconfig KC_B=$RUN_B/admin.kubeconfig
ka() { kubectl --kubeconfig "$KC_A" "$@"; }
kb() { kubectl --kubeconfig "$KC_B" "$@"; }

fed_cleanup() {
    local rc=$? kc
    set +e
    if ((rc != 0)); then
        # What each cluster had when the scenario failed (fed-*.yaml), and the control grid's status.
        kubectl get dg -A -o yaml >"$SITEGRID_E2E_LOGS/fed-control-grids.yaml" 2>&1
        kubectl get ns,lease -A -l clusternet.io/created-by=clusternet-agent -o yaml >"$SITEGRID_E2E_LOGS/fed-control-namespaces.yaml" 2>&1
        kubectl get lease -A -o yaml >"$SITEGRID_E2E_LOGS/fed-control-leases.yaml" 2>&1
        for kc in "$KC_A" "$KC_B"; do
            kubectl --kubeconfig "$kc" get dg,deploy,pods -A -o yaml >"$SITEGRID_E2E_LOGS/fed-$(basename "$(dirname "$kc")").yaml" 2>&1
        done
        echo "---- the control cluster's $GRID status:" >&2
        kubectl get dg "$GRID" -o json 2>&1 | jq '.status // .' >&2
    fi
    stop_group controllers
    stop_extra_cluster cluster-a
    stop_extra_cluster cluster-b
    # Leave the control cluster as the sample has it (even after a failure: no controller would
    # release the original's finalizer any more).
    kubectl delete dg "$GRID" --ignore-not-found --wait=false >/dev/null 2>&1
    kubectl patch dg "$GRID" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
    kubectl delete ns -l clusternet.io/created-by=clusternet-agent --wait=false >/dev/null 2>&1
    exit "$rc"
}
trap fed_cleanup EXIT

# grid_jq FILTER: jq -r FILTER over the control cluster's grid ('' for null; false stays false).
grid_jq() { kubectl get dg "$GRID" -o json 2>/dev/null | jq -r "($1) | if . == null then \"\" else . end"; }
# grid_json FILTER: FILTER over the control cluster's grid as sorted compact JSON.
grid_json() { kubectl get dg "$GRID" -o json 2>/dev/null | jq -cS "$1"; }
# local_state KUBECONFIG SITE: status.states.SITE of the local grid there, as sorted compact JSON.
local_state() { kubectl --kubeconfig "$1" get dg "$GRID" -o json 2>/dev/null | jq -cS ".status.states.$2"; }
# condition TYPE: "status/reason" of the control grid's condition TYPE.
condition() { grid_jq "(.status.conditions // [] | map(select(.type == \"$1\")) | .[0] | \"\\(.status)/\\(.reason)\")"; }

# --- the clusters ---------------------------------------------------------------------
# This scenario's controllers are the only ones; the control cluster's nodes carry no `zone`
# (30-controller's canary labels them), and no earlier grid of this name is left.
stop_tracked_controllers
kubectl label node --all zone- >/dev/null
kubectl delete dg "$GRID" --ignore-not-found --wait=false >/dev/null
retry 30 gone dg "$GRID" || fail "an earlier $GRID stays"
retry 60 bash -c "! kubectl get deploy -A -o name | grep -q $GRID-" || fail "an earlier grid's Deployments stay"

started=$SECONDS
start_extra_cluster cluster-a "$PORTS_A" &
up_a=$!
start_extra_cluster cluster-b "$PORTS_B" &
up_b=$!
wait $up_a && a_ok=1 || a_ok=
wait $up_b && b_ok=1 || b_ok=
[[ -n $a_ok ]] || fail "cluster A did not come up (see $SITEGRID_E2E_LOGS/cluster-cluster-a.log)"
[[ -n $b_ok ]] || fail "cluster B did not come up (see $SITEGRID_E2E_LOGS/cluster-cluster-b.log)"
log "70: clusters A and B up in $((SECONDS - started)) s"
expect "A's API server" "$(ka config view --minify -o jsonpath='{.clusters[0].cluster.server}')" https://127.0.0.1:25303
expect "B's API server" "$(kb config view --minify -o jsonpath='{.clusters[0].cluster.server}')" https://127.0.0.1:25313

# The grid CRDs and the controller's RBAC in all three.
install_controller_prereqs
SITEGRID_E2E_RUN=$RUN_A KUBECONFIG=$KC_A install_controller_prereqs
SITEGRID_E2E_RUN=$RUN_B KUBECONFIG=$KC_B install_controller_prereqs
for kc in "$KC" "$KC_A" "$KC_B"; do
    kubectl --kubeconfig "$kc" get crd deploymentgrids.superedge.io >/dev/null || fail "no DeploymentGrid CRD in $kc"
done

# A's node carries zone=zone1; B's has no zone (as in the seed: B joins no NodeGroup).
in_cluster "$KC_A" add_node a-1 kubernetes.io/os=linux zone=zone1
in_cluster "$KC_B" add_node b-1 kubernetes.io/os=linux
ka patch node a-1 --subresource=status --type=merge -p '{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.101"}]}}' >/dev/null
kb patch node b-1 --subresource=status --type=merge -p '{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.111"}]}}' >/dev/null

# --- what clusternet's registration would leave in place --------------------------------
# Registration of A and B with the control cluster as their parent, as clusternet-agent and
# clusternet-hub's approver would have done it (clusternet-register.sh): in the control cluster a
# dedicated namespace clusternet-xxxxx per cluster (labels cluster-id, cluster-name, created-by),
# a ServiceAccount whose Role clusternet-managedcluster-role allows everything there and nothing
# elsewhere; in the managed cluster the Secret clusternet-system/parent-cluster with the control
# API server's URL, the token, the control CA and the dedicated namespace.
NS_A=$("$E2E_DIR/clusternet-register.sh" cluster-a "$KC_A" "$SITEGRID_E2E_APISERVER") || fail "registering A"
NS_B=$("$E2E_DIR/clusternet-register.sh" cluster-b "$KC_B" "$SITEGRID_E2E_APISERVER") || fail "registering B"
# The managed clusters get the opt-in multi-cluster RBAC (deploy/multicluster/rbac.yaml: reading
# the parent-cluster Secret in clusternet-system, which the registration made), also bound to the
# controllers' user.
for kc in "$KC_A" "$KC_B"; do
    kubectl --kubeconfig "$kc" apply -f "$SITEGRID_E2E_ROOT/deploy/multicluster/rbac.yaml" >/dev/null || fail "deploy/multicluster in $kc"
    kubectl --kubeconfig "$kc" -n clusternet-system patch rolebinding sitegrid-controller-parent-cluster --type=json \
        -p '[{"op":"add","path":"/subjects/-","value":{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"sitegrid-controller"}}]' >/dev/null
done
[[ $NS_A =~ ^clusternet-[a-z0-9]{5}$ && $NS_B =~ ^clusternet-[a-z0-9]{5}$ && $NS_A != "$NS_B" ]] || fail "dedicated namespaces '$NS_A' '$NS_B'"
for c in a b; do
    ns=NS_${c^^}
    ns=${!ns}
    expect "$ns labels" "$(kubectl get ns "$ns" -o jsonpath='{.metadata.labels.clusters\.clusternet\.io/cluster-name} {.metadata.labels.clusternet\.io/created-by}')" "cluster-$c clusternet-agent"
    [[ $(kubectl get ns "$ns" -o jsonpath='{.metadata.labels.clusters\.clusternet\.io/cluster-id}') =~ ^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$ ]] || fail "$ns has no cluster-id uuid"
    expect "$ns role" "$(kubectl -n "$ns" get role clusternet-managedcluster-role -o jsonpath='{.rules[0].apiGroups} {.rules[0].resources} {.rules[0].verbs}')" '["*"] ["*"] ["*"]'
    kc=KC_${c^^}
    kc=${!kc}
    expect "cluster-$c parent-cluster Secret" "$(kubectl --kubeconfig "$kc" -n clusternet-system get secret parent-cluster -o json |
        jq -r '[.type, (.data | keys | join(",")), (.data["apiserver-advertise-url"] | @base64d), (.data.namespace | @base64d)] | join(" ")')" \
        "Opaque apiserver-advertise-url,ca.crt,namespace,token $SITEGRID_E2E_APISERVER $ns"
    expect "cluster-$c ca.crt is the control CA" "$(kubectl --kubeconfig "$kc" -n clusternet-system get secret parent-cluster -o jsonpath='{.data.ca\.crt}' | base64 -d | sha256sum)" "$(sha256sum <"$SITEGRID_E2E_CA")"
done

# parent_kubeconfig CHILD_KUBECONFIG OUT: a kubeconfig built from the child's parent-cluster Secret only.
parent_kubeconfig() {
    kubectl --kubeconfig "$1" -n clusternet-system get secret parent-cluster -o json | jq -r '.data | "apiVersion: v1
kind: Config
clusters: [{name: parent, cluster: {server: \"\(.["apiserver-advertise-url"] | @base64d)\", certificate-authority-data: \"\(.["ca.crt"])\"}}]
users: [{name: dedicated, user: {token: \"\(.token | @base64d)\"}}]
contexts: [{name: parent, context: {cluster: parent, user: dedicated, namespace: \"\(.namespace | @base64d)\"}}]
current-context: parent"' >"$2"
}
# The token can do anything in its dedicated namespace and nothing elsewhere.
TOKEN_A=$SITEGRID_E2E_RUN/parent-of-cluster-a.kubeconfig
parent_kubeconfig "$KC_A" "$TOKEN_A"
expect "A's token: anything in $NS_A" "$(kubectl --kubeconfig "$TOKEN_A" auth can-i '*' '*' -n "$NS_A" 2>&1)" yes
kubectl --kubeconfig "$TOKEN_A" -n "$NS_A" get deploymentgrids >/dev/null 2>&1 || fail "A's token cannot list grids in $NS_A"
kubectl --kubeconfig "$TOKEN_A" -n "$NS_A" create configmap probe >/dev/null 2>&1 || fail "A's token cannot create in $NS_A"
kubectl --kubeconfig "$TOKEN_A" -n "$NS_A" delete configmap probe >/dev/null 2>&1 || fail "A's token cannot delete in $NS_A"
for ns in default "$NS_B" kube-system; do
    out=$(kubectl --kubeconfig "$TOKEN_A" get deploymentgrids -n "$ns" 2>&1) && fail "A's token lists grids in $ns"
    grep -q Forbidden <<<"$out" || fail "A's token in $ns: not a refusal: $out"
done
out=$(kubectl --kubeconfig "$TOKEN_A" get namespaces 2>&1) && fail "A's token lists namespaces"
grep -q Forbidden <<<"$out" || fail "A's token, namespaces: not a refusal: $out"
expect "A's token: create grids in default" "$(kubectl --kubeconfig "$TOKEN_A" auth can-i create deploymentgrids.superedge.io -n default 2>&1)" no

# --- the controllers -------------------------------------------------------------------
# The control cluster has no parent (the base's --parent-secret=); A and B watch theirs.
start_controller_in "$SITEGRID_E2E_RUN/$FED_USER.kubeconfig" fed-control $CTL "${FED_FLAGS[@]}" --parent-secret=
start_controller_in "$RUN_A/$FED_USER.kubeconfig" fed-a $CTL_A "${FED_FLAGS[@]}"
start_controller_in "$RUN_B/$FED_USER.kubeconfig" fed-b $CTL_B "${FED_FLAGS[@]}"
# Each managed controller keeps its heartbeat Lease in its dedicated namespace.
retry 30 kubectl -n "$NS_A" get lease sitegrid-controller || fail "no heartbeat Lease from A in $NS_A"
retry 30 kubectl -n "$NS_B" get lease sitegrid-controller || fail "no heartbeat Lease from B in $NS_B"

# --- a. the seed's grid in the control cluster ------------------------------------------
kubectl apply -f "$SEEDS/seed000-10-deploymentgrid.yaml" >/dev/null || fail "applying the seed's grid"
expect "the seed's grid is marked for distribution" "$(jget dg "$GRID" '{.metadata.labels.superedge\.io/fed}')" yes

# --- b. A renders zone1; B nothing; the control cluster only holds the copies ------------
retry 30 ka get dg "$GRID" || fail "no local grid default/$GRID in A"
expect "A's grid labels" "$(ka get dg "$GRID" -o json | jq -r '.metadata.labels | [.["superedge.io/fed"], .["superedge.io/target-namespace"], (.["superedge.io/dis"] // "-")] | join(" ")')" "yes default -"
retry 30 ka get deploy "$GRID-zone1" || fail "no $GRID-zone1 in A"
expect "A's $GRID-zone1 (template test1)" "$(ka get deploy "$GRID-zone1" -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].image}')" "2 superedge/echoserver:2.2"
retry 60 in_cluster "$KC_A" deploy_ready "$GRID-zone1" 2 10.1.0 || fail "A's $GRID-zone1 never had 2 ready pods: $(ka get deploy "$GRID-zone1" -o jsonpath='{.status}')"
retry 30 bash -c "[[ \$(kubectl --kubeconfig $KC_A get dg $GRID -o jsonpath='{.status.states.zone1.readyReplicas}') == 2 ]]" || fail "A's grid status: $(ka get dg "$GRID" -o jsonpath='{.status}')"
for c in A B; do
    ns=NS_$c
    ns=${!ns}
    retry 30 kubectl -n "$ns" get dg "$GRID" || fail "no copy of $GRID in $ns (cluster $c)"
    expect "copy in $ns: labels" "$(kubectl -n "$ns" get dg "$GRID" -o jsonpath='{.metadata.labels.superedge\.io/dis} {.metadata.labels.superedge\.io/target-namespace} {.metadata.labels.superedge\.io/fed}')" "yes default yes"
    expect "copy in $ns: original-uid" "$(kubectl -n "$ns" get dg "$GRID" -o jsonpath='{.metadata.annotations.sitegrid\.io/original-uid}')" "$(jget dg "$GRID" '{.metadata.uid}')"
    expect "copy in $ns: spec" "$(kubectl -n "$ns" get dg "$GRID" -o json | jq -cS .spec | sha256sum)" "$(kubectl get dg "$GRID" -o json | jq -cS .spec | sha256sum)"
done
[[ $(jget dg "$GRID" '{.metadata.finalizers}') == *sitegrid.io/distributed* ]] || fail "the original has no finalizer sitegrid.io/distributed: $(jget dg "$GRID" '{.metadata.finalizers}')"
# B: a few resyncs later, still nothing.
sleep 6
kb get dg "$GRID" >/dev/null 2>&1 && fail "B has a grid though no node of B has a zone"
[[ -z $(kb get deploy -A -o name | grep "$GRID") ]] || fail "B has Deployments: $(kb get deploy -A -o name)"
# The control cluster renders nothing itself (no node of it has a zone).
[[ -z $(kubectl get deploy -A -o name | grep "$GRID") ]] || fail "the control cluster rendered: $(kubectl get deploy -A -o name | grep "$GRID")"

# --- c. B's node joins zone2: B gets zone2 (template test2) -----------------------------
kb label node b-1 zone=zone2 >/dev/null
retry 30 kb get dg "$GRID" || fail "no local grid in B after its node joined zone2"
retry 30 kb get deploy "$GRID-zone2" || fail "no $GRID-zone2 in B"
expect "B's $GRID-zone2 (template test2)" "$(kb get deploy "$GRID-zone2" -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].image}')" "3 superedge/echoserver:2.2"
retry 60 in_cluster "$KC_B" deploy_ready "$GRID-zone2" 3 10.2.0 || fail "B's $GRID-zone2 never had 3 ready pods: $(kb get deploy "$GRID-zone2" -o jsonpath='{.status}')"
[[ -z $(ka get deploy -o name | grep "$GRID-zone2") ]] || fail "A got zone2 too"

# --- d. a hand edit in A goes back to the template ---------------------------------------
gen=$(ka get deploy "$GRID-zone1" -o jsonpath='{.metadata.generation}')
ka scale deploy "$GRID-zone1" --replicas=5 >/dev/null || fail "kubectl scale in A"
retry 20 bash -c "[[ \$(kubectl --kubeconfig $KC_A get deploy $GRID-zone1 -o jsonpath='{.spec.replicas}') == 2 && \$(kubectl --kubeconfig $KC_A get deploy $GRID-zone1 -o jsonpath='{.metadata.generation}') -ge $((gen + 2)) ]]" ||
    fail "A's $GRID-zone1 not put back: $(ka get deploy "$GRID-zone1" -o jsonpath='{.spec.replicas} (generation {.metadata.generation}, was '"$gen"')')"
retry 60 in_cluster "$KC_A" deploy_ready "$GRID-zone1" 2 10.1.0 || fail "A's $GRID-zone1 not 2/2 ready after the revert: $(ka get deploy "$GRID-zone1" -o jsonpath='{.status}')"
# The pods the scale-up made stay Terminating (no kubelet confirms): gone at once, as a kubelet would.
for pod in $(ka get pods -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{" "}{end}'); do
    in_cluster "$KC_A" delete_pod "$pod"
done

# --- e. the control cluster's grid aggregates both clusters ------------------------------
expect_within 30 "control states zone1" "2/2" grid_jq '"\(.status.states.zone1.replicas)/\(.status.states.zone1.readyReplicas)"'
expect_within 30 "control states zone2" "3/3" grid_jq '"\(.status.states.zone2.replicas)/\(.status.states.zone2.readyReplicas)"'
expect_within 30 "control sites/readySites" "2/2" grid_jq '"\(.status.sites)/\(.status.readySites)"'
expect_within 30 "cluster-a reachable" true grid_jq '.status.clusters["cluster-a"].reachable'
expect_within 30 "cluster-b reachable" true grid_jq '.status.clusters["cluster-b"].reachable'
expect "cluster-a's own states" "$(grid_jq '.status.clusters["cluster-a"].states | keys | join(",")')" zone1
expect "cluster-b's own states" "$(grid_jq '.status.clusters["cluster-b"].states | keys | join(",")')" zone2
expect "cluster-b's zone2" "$(grid_jq '.status.clusters["cluster-b"].states.zone2.replicas')" 3
# A site in one cluster is that cluster's state verbatim, in status.clusters and in status.states
# (after the scale to 5 and back, a field the local state dropped must not linger).
for c in a:zone1 b:zone2; do
    kc=KC_${c%%:*}
    kc=${kc^^}
    want=$(local_state "${!kc}" "${c#*:}")
    expect_within 30 "cluster-${c%%:*}'s ${c#*:} as the cluster reports it" "$want" grid_json ".status.clusters[\"cluster-${c%%:*}\"].states.${c#*:}"
    expect_within 10 "states.${c#*:} (one cluster: verbatim)" "$want" grid_json ".status.states.${c#*:}"
done
expect_within 10 "SitesUnique" True/SitesUnique condition SitesUnique
expect_within 10 "ClustersReachable" True/AllReachable condition ClustersReachable

# --- f. B's API server down: B unreachable, A untouched; back: converges ---------------------
retry 30 bash -c "[[ \$(kubectl --kubeconfig $KC_A get deploy $GRID-zone1 -o jsonpath='{.status.observedGeneration}') == \$(kubectl --kubeconfig $KC_A get deploy $GRID-zone1 -o jsonpath='{.metadata.generation}') ]]" || fail "A's Deployment never settled"
a_before=$(ka get deploy "$GRID-zone1" -o jsonpath='{.metadata.uid} {.metadata.resourceVersion} {.spec.replicas}')
# (The API server refuses new connections at once, and takes a few seconds to end its watches and exit.)
down_at=$SECONDS
b_log_lines=$(wc -l <"$SITEGRID_E2E_LOGS/controller-fed-b.log")
extra_cluster cluster-b stop apiserver || fail "stopping B's API server"
kb get --raw /readyz --request-timeout=2s >/dev/null 2>&1 && fail "B's API server still answers"
expect_within $((GRACE + 20)) "cluster-b reachable with its API server down" false grid_jq '.status.clusters["cluster-b"].reachable'
log "70: cluster-b unreachable $((SECONDS - down_at)) s after its API server was told to stop (grace ${GRACE}s)"
# lease_renewed NS: renewTime of the heartbeat Lease in the control cluster's namespace NS.
lease_renewed() { kubectl -n "$1" get lease sitegrid-controller -o jsonpath='{.spec.renewTime}'; }
b_report=$(grid_jq '.status.clusters["cluster-b"].lastReportTime')
b_renewed=$(lease_renewed "$NS_B")
[[ -n $b_report ]] || fail "no lastReportTime for the unreachable cluster-b"
expect_within 10 "ClustersReachable while B is down" False/Unreachable condition ClustersReachable
expect "cluster-a reachable while B is down" "$(grid_jq '.status.clusters["cluster-a"].reachable')" true
kubectl -n "$NS_B" get dg "$GRID" >/dev/null 2>&1 || fail "B's copy went while B was unreachable"
sleep 4 # a few of A's resyncs and heartbeats
expect "B's heartbeat while its API server is down" "$(lease_renewed "$NS_B")" "$b_renewed"
expect "A's $GRID-zone1 while B is down (uid, resourceVersion, replicas)" "$(ka get deploy "$GRID-zone1" -o jsonpath='{.metadata.uid} {.metadata.resourceVersion} {.spec.replicas}')" "$a_before"
extra_cluster cluster-b start apiserver || fail "restarting B's API server"
expect_within 30 "cluster-b reachable again" true grid_jq '.status.clusters["cluster-b"].reachable'
[[ $(lease_renewed "$NS_B") > $b_renewed ]] || fail "B's heartbeat did not move on: $(lease_renewed "$NS_B") (was $b_renewed)"
expect_within 20 "ClustersReachable after B is back" True/AllReachable condition ClustersReachable
expect "B's $GRID-zone2 after the outage" "$(kb get deploy "$GRID-zone2" -o jsonpath='{.spec.replicas}')" 3
expect_within 30 "control states after the outage" "2/2 3/3 2/2" grid_jq '"\(.status.states.zone1.replicas)/\(.status.states.zone1.readyReplicas) \(.status.states.zone2.replicas)/\(.status.states.zone2.readyReplicas) \(.status.sites)/\(.status.readySites)"'

# --- f2. the control cluster's API server down: the managed clusters keep everything; back: the
# next change in the control cluster reaches them, and both are shown reachable. (While its API
# server shuts down, the control controller may still judge them for a moment — its open watch
# goes quiet before it closes and pooled connections still answer — but it cannot write that.)
a_before=$(ka get deploy "$GRID-zone1" -o jsonpath='{.metadata.uid} {.metadata.resourceVersion} {.spec.replicas}')
a_grid=$(ka get dg "$GRID" -o jsonpath='{.metadata.uid} {.metadata.resourceVersion}')
b_before=$(kb get deploy "$GRID-zone2" -o jsonpath='{.metadata.uid} {.spec.replicas}')
ctl_lines=$(wc -l <"$SITEGRID_E2E_LOGS/controller-fed-control.log")
a_lines=$(wc -l <"$SITEGRID_E2E_LOGS/controller-fed-a.log")
"$E2E_DIR/cluster.sh" stop apiserver >>"$SITEGRID_E2E_LOGS/cluster-control.log" 2>&1 || fail "stopping the control API server"
kubectl get --raw /readyz --request-timeout=2s >/dev/null 2>&1 && fail "the control API server still answers"
sleep $((GRACE + 4)) # longer than a grace period: A's and B's heartbeats and watches fail meanwhile
expect "A's local grid while the control cluster is down" "$(ka get dg "$GRID" -o jsonpath='{.metadata.uid} {.metadata.resourceVersion}')" "$a_grid"
expect "A's $GRID-zone1 while the control cluster is down" "$(ka get deploy "$GRID-zone1" -o jsonpath='{.metadata.uid} {.metadata.resourceVersion} {.spec.replicas}')" "$a_before"
expect "B's $GRID-zone2 while the control cluster is down" "$(kb get deploy "$GRID-zone2" -o jsonpath='{.metadata.uid} {.spec.replicas}')" "$b_before"
"$E2E_DIR/cluster.sh" start apiserver >>"$SITEGRID_E2E_LOGS/cluster-control.log" 2>&1 || fail "restarting the control API server"
retry 60 bash -c 'kubectl get --raw /readyz >/dev/null' || fail "the control API server is not ready again"
up_at=$SECONDS
# A change made in the control cluster now reaches A, once the watches came back: they retry with
# client-go's backoff (0.8 s doubling to 30 s, reset after 2 min without errors), so after an
# outage of a grace period the first retry may be 30 s away.
kubectl patch dg "$GRID" --type=merge -p '{"spec":{"templatePool":{"test1":{"replicas":1}}}}' >/dev/null || fail "editing the original"
retry 120 bash -c "[[ \$(kubectl --kubeconfig $KC_A get deploy $GRID-zone1 -o jsonpath='{.spec.replicas}') == 1 ]]" || fail "A's $GRID-zone1 did not follow the control cluster after its outage"
expect_within 30 "both clusters reachable after the control cluster's outage" "true true" grid_jq '"\(.status.clusters["cluster-a"].reachable) \(.status.clusters["cluster-b"].reachable)"'
expect_within 30 "zone1 after the control cluster's outage" "1/1" grid_jq '"\(.status.states.zone1.replicas)/\(.status.states.zone1.readyReplicas)"'
log "70: the control cluster's outage: nothing touched in A and B; a change $((SECONDS - up_at)) s after it was back reached A and its status came back"
ctl_back=$(wc -l <"$SITEGRID_E2E_LOGS/controller-fed-control.log")
a_back=$(wc -l <"$SITEGRID_E2E_LOGS/controller-fed-a.log")

# --- g. deleting the original removes it everywhere -----------------------------------------
kubectl delete dg "$GRID" --wait=false >/dev/null || fail "deleting the original"
retry 30 bash -c "! kubectl -n $NS_A get dg $GRID" || fail "the copy in $NS_A outlived the original"
retry 30 bash -c "! kubectl -n $NS_B get dg $GRID" || fail "the copy in $NS_B outlived the original"
retry 30 gone dg "$GRID" || fail "the original stays (finalizer $(jget dg "$GRID" '{.metadata.finalizers}'))"
retry 30 in_cluster "$KC_A" gone dg "$GRID" || fail "A's local grid outlived the original and its copy"
retry 30 in_cluster "$KC_B" gone dg "$GRID" || fail "B's local grid outlived the original and its copy"
retry 60 in_cluster "$KC_A" gone deploy "$GRID-zone1" || fail "A's $GRID-zone1 outlived its grid"
retry 60 in_cluster "$KC_B" gone deploy "$GRID-zone2" || fail "B's $GRID-zone2 outlived its grid"
# No controller was refused anything (B's only until its API server restarted: a restarting API server
# may answer 403 to requests it takes before it is ready, its RBAC caches still empty).
# Nor over the control API server's restart (f2), whose first answers may be refusals too.
outside() { sed -n "1,${2}p; $(($3 + 1)),\$p" "$SITEGRID_E2E_LOGS/$1"; }
refusals=$(cat <(outside controller-fed-control.log "$ctl_lines" "$ctl_back") <(outside controller-fed-a.log "$a_lines" "$a_back") \
    <(head -n "$b_log_lines" "$SITEGRID_E2E_LOGS/controller-fed-b.log") | grep -i forbidden | head -3)
[[ -z $refusals ]] || fail "a controller was refused: $refusals"
