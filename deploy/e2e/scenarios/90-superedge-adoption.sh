# Taking over a running SuperEdge installation: the grids, Deployments,
# StatefulSets and Service that SuperEdge's application-grid-controller made
# (captured from it, controller/tests/fixtures/superedge-a979e05/), on
# SuperEdge's own CRDs, with their pods Running; then the migration guide's
# steps (docs/migrate-from-superedge.md): sitegrid's CRDs over SuperEdge's,
# sitegrid-controller started. Every child is adopted in place: the same
# ReplicaSets, ControllerRevisions, pod UIDs, workload specs and ClusterIP, and the grids' status filled in. One Deployment that drifted
# from its grid while nobody reconciled it is reported on the grid, naming
# the field, and left running until it is annotated to roll.
# shellcheck shell=bash
NS=superedge
PORT=18111
OBJECTS=$SITEGRID_E2E_ROOT/deploy/e2e/superedge-objects.py
export PODS_NAMESPACE=$NS

for n in bj-1 bj-2 bj-3; do kubectl label node $n location=beijing --overwrite >/dev/null; done
for n in gz-1 gz-2 gz-3; do kubectl label node $n location=guangzhou --overwrite >/dev/null; done

# --- SuperEdge, as it was left -------------------------------------------------
# Its CRDs (no status subresource, no metadata under templatePool), in place of
# sitegrid's if an earlier scenario installed them. A CRD is replaced, never
# deleted: deleting it would delete every grid.
python3 "$OBJECTS" crds | python3 -c '
import json, subprocess, sys
for crd in json.load(sys.stdin)["items"]:
    name = crd["metadata"]["name"]
    got = subprocess.run(["kubectl", "get", "crd", name, "-o", "jsonpath={.metadata.resourceVersion}"],
                         capture_output=True, text=True)
    verb = "create"
    if got.returncode == 0:
        crd["metadata"]["resourceVersion"], verb = got.stdout, "replace"
    subprocess.run(["kubectl", verb, "-f", "-"], input=json.dumps(crd), text=True, check=True,
                   stdout=subprocess.DEVNULL)
'
for crd in deploymentgrids statefulsetgrids servicegrids; do
    crds_established crd/$crd.superedge.io || fail "CRD $crd not established"
    expect "$crd status subresource while SuperEdge's CRDs are installed" \
        "$(jget crd $crd.superedge.io '{.spec.versions[0].subresources}')" ""
done

kubectl create namespace $NS >/dev/null
python3 "$OBJECTS" grids $NS | kubectl create -f - >/dev/null
uids=()
for grid in DeploymentGrid/deploymentgrid-demo StatefulSetGrid/statefulsetgrid-demo ServiceGrid/servicegrid-demo; do
    uids+=("$grid=$(kubectl -n $NS get "${grid%%/*}.superedge.io" "${grid#*/}" -o jsonpath='{.metadata.uid}')")
done
python3 "$OBJECTS" children $NS "${uids[@]}" | kubectl create -f - >/dev/null

# The pods run (this suite plays kubelet): two per Deployment, three per StatefulSet.
sts_ready() { # NAME: play kubelet for its pods (made one by one) until 3 are ready
    run_bound_pods "$1-" 10.60.0 || return 1
    [[ $(kubectl -n $NS get sts "$1" -o jsonpath='{.status.readyReplicas}') == 3 ]]
}
deploy_ready_ns() { # NAME
    run_bound_pods "$1-" 10.60.0 || return 1
    [[ $(kubectl -n $NS get deploy "$1" -o jsonpath='{.status.readyReplicas}/{.status.replicas}/{.status.updatedReplicas}') == 2/2/2 ]]
}
# One Deployment drifted while nobody reconciled: someone changed its image by hand.
kubectl -n $NS set image deploy/deploymentgrid-demo-guangzhou echo=superedge/echoserver:2.1 >/dev/null
for site in beijing guangzhou; do
    retry 60 deploy_ready_ns deploymentgrid-demo-$site || fail "deploymentgrid-demo-$site never ran: $(kubectl -n $NS get deploy,rs,pods -o wide 2>&1)"
    retry 90 sts_ready statefulsetgrid-demo-$site || fail "statefulsetgrid-demo-$site never ran: $(kubectl -n $NS get sts,pods -o wide 2>&1)"
done
# The drifted one's old pods go (a rollout, finished before sitegrid starts);
# as their kubelet would, confirm their deletion.
reaped() { # PREFIX: true once no pod named PREFIX* is terminating
    local name
    for name in $(kubectl -n $NS get pods -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{"\n"}{end}'); do
        [[ $name == "$1"* ]] && kubectl -n $NS delete pod "$name" --grace-period=0 --force >/dev/null 2>&1
    done
    [[ $(kubectl -n $NS get pods -o name | grep -c "^pod/$1") == 2 ]]
}
retry 30 reaped deploymentgrid-demo-guangzhou- || fail "the drifted rollout did not finish"

# What must not change.
snapshot() {
    {
        kubectl -n $NS get rs,controllerrevisions -o jsonpath='{range .items[*]}{.kind} {.metadata.name}{"\n"}{end}'
        kubectl -n $NS get pods -o jsonpath='{range .items[*]}pod {.metadata.name} {.metadata.uid}{"\n"}{end}'
        # A Deployment's generation also counts annotation changes (the
        # controller copies them to the ReplicaSet; sitegrid adds one): its
        # spec is compared whole instead, a StatefulSet's generation too.
        local kind name
        for kind in deploy sts; do
            for name in $(kubectl -n $NS get $kind -o jsonpath='{.items[*].metadata.name}'); do
                echo "$kind $name spec $(kubectl -n $NS get $kind "$name" -o jsonpath='{.spec}' | sha256sum | cut -c1-16)"
            done
        done
        kubectl -n $NS get sts -o jsonpath='{range .items[*]}{.kind} {.metadata.name} generation {.metadata.generation}{"\n"}{end}'
        kubectl -n $NS get svc servicegrid-demo-svc -o jsonpath='service clusterIP {.spec.clusterIP}{"\n"}'
    } | sort
}
before=$(snapshot)
[[ $(grep -c '^pod ' <<<"$before") == 10 ]] || fail "want 10 pods before the takeover: $before"
log "before the takeover: $(grep -c '^ReplicaSet ' <<<"$before") ReplicaSets, $(grep -c '^ControllerRevision ' <<<"$before") ControllerRevisions, 10 pods"

# --- The migration guide's steps ---------------------------------------------------
# (application-grid-controller is not running: the guide stops it first.)
# sitegrid's CRDs over SuperEdge's (kubectl apply, as deploy/crds is applied),
# its RBAC, and the controller.
install_controller_prereqs
for crd in deploymentgrids statefulsetgrids servicegrids; do
    expect "$crd status subresource after sitegrid's CRDs" "$(jget crd $crd.superedge.io '{.spec.versions[0].subresources.status}')" "{}"
done
start_controller adopt $PORT --resync-period=3s

# Every child that matches its grid carries sitegrid's applied hash: it was applied, in place.
adopted() { # KIND NAME
    [[ -n $(kubectl -n $NS get "$1" "$2" -o jsonpath='{.metadata.annotations.sitegrid\.io/applied-hash}') ]]
}
for child in deploy/deploymentgrid-demo-beijing sts/statefulsetgrid-demo-beijing sts/statefulsetgrid-demo-guangzhou svc/servicegrid-demo-svc; do
    retry 30 adopted "${child%%/*}" "${child#*/}" || fail "$child was not adopted (see controller-adopt.log)"
done
# Status filled in: both sites of the StatefulSetGrid ready, beijing of the DeploymentGrid.
expect_within 30 "statefulsetgrid status" "2/2" kubectl -n $NS get ssg statefulsetgrid-demo -o jsonpath='{.status.readySites}/{.status.sites}'
expect_within 30 "deploymentgrid beijing state" "2" kubectl -n $NS get dg deploymentgrid-demo -o jsonpath='{.status.states.beijing.readyReplicas}'
expect_within 30 "servicegrid Synced" "True" kubectl -n $NS get sg servicegrid-demo -o jsonpath='{.status.conditions[?(@.type=="Synced")].status}'

# The drifted Deployment: reported on the grid, naming it and the field, and left alone.
drift_reason() { kubectl -n $NS get dg deploymentgrid-demo -o jsonpath='{.status.states.guangzhou.conditions[?(@.type=="SiteReconciled")].reason}'; }
expect_within 30 "guangzhou's condition" AdoptionWouldRestart drift_reason
message=$(kubectl -n $NS get dg deploymentgrid-demo -o jsonpath='{.status.states.guangzhou.conditions[?(@.type=="SiteReconciled")].message}')
for part in "Deployment $NS/deploymentgrid-demo-guangzhou" "spec.template.spec.containers[0].image" '"superedge/echoserver:2.1"' "sitegrid.io/adopt=roll"; do
    [[ $message == *"$part"* ]] || fail "the condition does not name $part: $message"
done
retry 10 bash -c "kubectl -n $NS get events.events.k8s.io -o jsonpath='{range .items[*]}{.reason} {.note}{\"\\n\"}{end}' | grep -q '^AdoptionWouldRestart .*deploymentgrid-demo-guangzhou'" ||
    fail "no AdoptionWouldRestart event"
expect "the drifted image" "$(kubectl -n $NS get deploy deploymentgrid-demo-guangzhou -o jsonpath='{.spec.template.spec.containers[0].image}')" superedge/echoserver:2.1

# A few resyncs later nothing moved: same ReplicaSets, revisions, pods, specs, ClusterIP.
sleep 10
after=$(snapshot)
[[ $after == "$before" ]] || fail "the takeover changed what runs: $(diff <(echo "$before") <(echo "$after"))"
log "after the takeover: the same ReplicaSets, ControllerRevisions, pod UIDs, workload specs and ClusterIP ($(wc -l <<<"$after") lines)"

# The user lets sitegrid roll the drifted one: it runs the grid's image, and the condition goes.
kubectl -n $NS annotate deploy deploymentgrid-demo-guangzhou sitegrid.io/adopt=roll >/dev/null
expect_within 30 "guangzhou rolled to the grid's image" superedge/echoserver:2.2 \
    kubectl -n $NS get deploy deploymentgrid-demo-guangzhou -o jsonpath='{.spec.template.spec.containers[0].image}'
retry 60 deploy_ready_ns deploymentgrid-demo-guangzhou || fail "the rolled Deployment never ran"
retry 30 reaped deploymentgrid-demo-guangzhou- || fail "the roll did not finish"
expect_within 30 "guangzhou's condition after the roll (none: the site is reconciled)" "" drift_reason
expect_within 30 "deploymentgrid status" "2/2" kubectl -n $NS get dg deploymentgrid-demo -o jsonpath='{.status.readySites}/{.status.sites}'

kubectl delete namespace $NS --wait=false >/dev/null
stop_tracked_controllers
