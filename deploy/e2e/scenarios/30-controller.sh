# sitegrid-controller against the real kube-apiserver 1.20 with the real
# controller-manager and scheduler: the seeds' DeploymentGrid, StatefulSetGrid,
# ServiceGrid and canary YAML applied verbatim; per-site workloads, pods bound
# only inside their site, sites following node labels, status per site, no
# writes on a no-op resync, and a standby replica taking over from the leader.
# shellcheck shell=bash
SEEDS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../controller/tests/fixtures" && pwd)
A=18081 B=18082

# Sites as sample.sh made them (an earlier scenario moves bj-3).
for n in bj-1 bj-2 bj-3; do kubectl label node $n location=beijing --overwrite >/dev/null; done
for n in gz-1 gz-2 gz-3; do kubectl label node $n location=guangzhou --overwrite >/dev/null; done

install_controller_prereqs
# Two replicas; the first takes the lease, the second stands by (healthy and ready).
ELECT=(--leader-elect-lease-duration=6s --leader-elect-renew-margin=2s --resync-period=3s)
start_controller ctl-a $A "${ELECT[@]}"
retry 30 bash -c "[[ \$(curl -sf http://127.0.0.1:$A/metrics | awk '\$1 == \"sitegrid_controller_leader\" {print \$2}') == 1 ]]" || fail "ctl-a never led"
start_controller ctl-b $B "${ELECT[@]}"
retry 15 curl -sf "http://127.0.0.1:$B/readyz" || fail "standby ctl-b is not ready"
expect "standby ctl-b leads" "$(controller_metric $B leader)" 0

# The seeds' YAML, unchanged.
kubectl apply -f "$SEEDS/seed000-04-deploymentgrid.yaml" -f "$SEEDS/seed000-06-statefulsetgrid.yaml" -f "$SEEDS/seed000-05-servicegrid.yaml" >/dev/null
# Seed 002's ServiceGrid mislabelled `kind: StatefulSetGrid` is refused, naming the missing pod template.
# (--validate=false: the API server's CRD schema decides, not kubectl.)
if refused=$(kubectl apply --dry-run=server --validate=false -f "$SEEDS/seed002-02-statefulsetgrid.yaml" 2>&1); then
    fail "the mislabelled seed was accepted"
fi
grep -q 'spec.template.template: Required value' <<<"$refused" || fail "unclear refusal: $refused"

# One Deployment per site with the template's image and replicas, pinned to the site.
for site in beijing guangzhou; do
    retry 30 exists deploy deploymentgrid-demo-$site || fail "deploymentgrid-demo-$site never appeared"
    expect "$site image" "$(jget deploy deploymentgrid-demo-$site '{.spec.template.spec.containers[0].image}')" "superedge/echoserver:2.2"
    expect "$site replicas" "$(jget deploy deploymentgrid-demo-$site '{.spec.replicas}')" 2
    expect "$site nodeSelector" "$(jget deploy deploymentgrid-demo-$site '{.spec.template.spec.nodeSelector.location}')" $site
    expect "$site grid label" "$(jget deploy deploymentgrid-demo-$site '{.metadata.labels.superedge\.io/grid-selector}')" deploymentgrid-demo
    expect "$site owner" "$(jget deploy deploymentgrid-demo-$site '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')" "DeploymentGrid/deploymentgrid-demo/true"
done
# The real scheduler binds each site's pods only to that site's nodes.
bound_nodes() { # PREFIX: the sorted node names of pods named PREFIX*, one per pod
    kubectl get pods -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' |
        awk -v p="$1" 'index($1, p) == 1 && $2 != "" {print $2}' | sort | tr '\n' ' '
}
retry 30 bash -c "[[ \$(kubectl get pods -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{\"\\n\"}{end}' | grep -c '^deploymentgrid-demo-.*=..*') == 4 ]]" || fail "deploymentgrid pods never bound"
[[ $(bound_nodes deploymentgrid-demo-beijing-) =~ ^(bj-[123] ){2}$ ]] || fail "beijing pods on $(bound_nodes deploymentgrid-demo-beijing-)"
[[ $(bound_nodes deploymentgrid-demo-guangzhou-) =~ ^(gz-[123] ){2}$ ]] || fail "guangzhou pods on $(bound_nodes deploymentgrid-demo-guangzhou-)"

# StatefulSets share the template's headless Service; pods are {ssg}-{unit}-{i}.
for site in beijing guangzhou; do
    retry 30 exists sts statefulsetgrid-demo-$site || fail "statefulsetgrid-demo-$site never appeared"
    expect "$site serviceName" "$(jget sts statefulsetgrid-demo-$site '{.spec.serviceName}')" servicegrid-demo-svc
    retry 30 bash -c "[[ -n \$(kubectl get pod statefulsetgrid-demo-$site-0 -o jsonpath='{.spec.nodeName}' 2>/dev/null) ]]" || fail "statefulsetgrid-demo-$site-0 never bound"
done
[[ $(bound_nodes statefulsetgrid-demo-beijing-0) =~ ^bj-[123]\ $ ]] || fail "statefulset beijing pod on $(bound_nodes statefulsetgrid-demo-beijing-0)"
[[ $(bound_nodes statefulsetgrid-demo-guangzhou-0) =~ ^gz-[123]\ $ ]] || fail "statefulset guangzhou pod on $(bound_nodes statefulsetgrid-demo-guangzhou-0)"

# The ServiceGrid's Service: topologyKeys, owner, and the clusterIP sample.sh gave it survives updates.
retry 30 bash -c "[[ \$(kubectl get svc servicegrid-demo-svc -o jsonpath='{.metadata.ownerReferences[0].kind}') == ServiceGrid ]]" || fail "servicegrid-demo-svc not adopted by its ServiceGrid"
expect "topologyKeys" "$(jget svc servicegrid-demo-svc '{.metadata.annotations.topologyKeys}')" '["location"]'
expect "clusterIP" "$(jget svc servicegrid-demo-svc '{.spec.clusterIP}')" 10.96.33.231
expect "sg condition" "$(jget sg servicegrid-demo '{.status.conditions[0].type}={.status.conditions[0].status}')" "Synced=True"
# A template the API server refuses (two ports, the first unnamed): Synced=False, a Warning event, the Service untouched.
kubectl patch sg servicegrid-demo --type=json -p '[{"op":"add","path":"/spec/template/ports/-","value":{"name":"metrics","port":9100,"targetPort":9100,"protocol":"TCP"}}]' >/dev/null
retry 20 bash -c "[[ \$(kubectl get sg servicegrid-demo -o jsonpath='{.status.conditions[0].status}/{.status.conditions[0].reason}') == False/ApplyFailed ]]" || fail "no ApplyFailed condition: $(kubectl get sg servicegrid-demo -o jsonpath='{.status}')"
kubectl get events.events.k8s.io -o jsonpath='{range .items[*]}{.type} {.reason} {.regarding.name} {.note}{"\n"}{end}' | has '^Warning ApplyFailed servicegrid-demo .*spec.ports\[0\].name' || fail "no ApplyFailed Warning event"
expect "ports while refused" "$(jget svc servicegrid-demo-svc '{.spec.ports[*].port}')" 80
kubectl patch sg servicegrid-demo --type=json -p '[{"op":"add","path":"/spec/template/ports/0/name","value":"http"}]' >/dev/null
retry 20 bash -c "[[ \$(kubectl get svc servicegrid-demo-svc -o jsonpath='{.spec.ports[*].port}') == '80 9100' ]]" || fail "ServiceGrid port change not applied"
expect "clusterIP after update" "$(jget svc servicegrid-demo-svc '{.spec.clusterIP}')" 10.96.33.231
expect "sg condition" "$(jget sg servicegrid-demo '{.status.conditions[0].type}={.status.conditions[0].status}')" "Synced=True"

# Status per site, and `kubectl get dg` prints it.
retry 20 bash -c "[[ \$(kubectl get dg deploymentgrid-demo -o jsonpath='{.status.states.beijing.replicas}/{.status.states.guangzhou.replicas}/{.status.sites}') == 2/2/2 ]]" || fail "dg status per site: $(kubectl get dg deploymentgrid-demo -o jsonpath='{.status}')"
kubectl get dg | grep -Eq '^deploymentgrid-demo +2 +0 ' || fail "kubectl get dg: $(kubectl get dg)"
kubectl get ssg statefulsetgrid-demo -o jsonpath='{.status.states.beijing.replicas}' | has 1 || fail "ssg status: $(kubectl get ssg statefulsetgrid-demo -o jsonpath='{.status}')"

# A new site appears with its first node and goes with its last.
add_node sh-1 location=shanghai
retry 20 exists deploy deploymentgrid-demo-shanghai || fail "deploymentgrid-demo-shanghai never appeared"
retry 20 exists sts statefulsetgrid-demo-shanghai || fail "statefulsetgrid-demo-shanghai never appeared"
kubectl delete node sh-1 >/dev/null
retry 20 gone deploy deploymentgrid-demo-shanghai || fail "deploymentgrid-demo-shanghai outlived its site"
retry 20 gone sts statefulsetgrid-demo-shanghai || fail "statefulsetgrid-demo-shanghai outlived its site"
retry 20 bash -c "[[ -z \$(kubectl get dg deploymentgrid-demo -o jsonpath='{.status.states.shanghai}') ]]" || fail "shanghai still in the status"

# Only replicas changed: each site's Deployment scales, and no new ReplicaSet (no pod churn).
# Count only the two remaining sites' ReplicaSets: shanghai's may still be waiting
# for the garbage collector after its Deployment went.
site_rs() { kubectl get rs -o name | grep -cE 'deploymentgrid-demo-(beijing|guangzhou)-'; }
rs_before=$(site_rs)
kubectl patch dg deploymentgrid-demo --type=merge -p '{"spec":{"template":{"replicas":3}}}' >/dev/null
retry 20 bash -c "[[ \$(kubectl get deploy deploymentgrid-demo-beijing deploymentgrid-demo-guangzhou -o jsonpath='{.items[*].spec.replicas}') == '3 3' ]]" || fail "replicas not rolled out to the sites"
sleep 2
expect "ReplicaSets after a replicas change" "$(site_rs)" "$rs_before"
# An image change rolls each site as a Deployment update does: a new ReplicaSet per site.
kubectl patch dg deploymentgrid-demo --type=json -p '[{"op":"replace","path":"/spec/template/template/spec/containers/0/image","value":"superedge/echoserver:2.3"}]' >/dev/null
retry 20 bash -c "[[ \$(kubectl get rs -o name | grep -cE 'deploymentgrid-demo-(beijing|guangzhou)-') == $((rs_before + 2)) ]]" || fail "image change did not roll the sites"

# A resync with nothing to do writes nothing (resync every 3 s here): wait for the
# workloads' statuses to settle, then no write in 4 resyncs while reconciles go on.
settled() {
    local w r
    w=$(controller_metric $A api_writes_total); r=$(controller_metric $A reconciles_total)
    sleep 12
    [[ $(controller_metric $A api_writes_total) == "$w" ]] && (($(controller_metric $A reconciles_total) > r + 4))
}
retry 90 settled || fail "the controller keeps writing on no-op resyncs"

# Canary: the seed's per-zone templates (zone1 → test1, zone2 → test2).
for n in bj-1 bj-2 bj-3; do kubectl label node $n zone=zone1 --overwrite >/dev/null; done
for n in gz-1 gz-2 gz-3; do kubectl label node $n zone=zone2 --overwrite >/dev/null; done
kubectl apply -f "$SEEDS/seed000-09-deploymentgrid.yaml" >/dev/null
retry 30 exists deploy deploymentgrid-demo-zone2 || fail "canary zone2 never appeared"
expect "zone1 template" "$(jget deploy deploymentgrid-demo-zone1 '{.spec.replicas} {.spec.template.spec.containers[0].image}')" "2 superedge/echoserver:2.2"
expect "zone2 template" "$(jget deploy deploymentgrid-demo-zone2 '{.spec.replicas} {.spec.template.spec.containers[0].image}')" "3 superedge/echoserver:2.3"
retry 20 gone deploy deploymentgrid-demo-beijing || fail "the old location sites outlived the gridUniqKey change"
# A site naming a missing template: a Warning event and a condition for that site; the others go on.
kubectl patch dg deploymentgrid-demo --type=merge -p '{"spec":{"templates":{"zone2":"test9"},"templatePool":{"test1":{"replicas":1}}}}' >/dev/null
retry 20 bash -c "[[ \$(kubectl get dg deploymentgrid-demo -o jsonpath='{.status.states.zone2.conditions[?(@.type==\"SiteReconciled\")].reason}') == TemplateNotFound ]]" || fail "no TemplateNotFound condition for zone2: $(kubectl get dg deploymentgrid-demo -o jsonpath='{.status}')"
retry 20 bash -c "[[ \$(kubectl get deploy deploymentgrid-demo-zone1 -o jsonpath='{.spec.replicas}') == 1 ]]" || fail "zone1 not reconciled while zone2 fails"
expect "zone2 keeps running what it had" "$(jget deploy deploymentgrid-demo-zone2 '{.spec.replicas}')" 3
retry 20 bash -c "kubectl get events.events.k8s.io -o jsonpath='{range .items[*]}{.type} {.reason} {.note}{\"\\n\"}{end}' | grep -q '^Warning TemplateNotFound .*zone2'" || fail "no TemplateNotFound Warning event naming zone2"
# autoDeleteUnusedTemplate: test2 is now unused and goes; test1 stays.
kubectl patch dg deploymentgrid-demo --type=merge -p '{"spec":{"templates":{"zone2":"test1"},"autoDeleteUnusedTemplate":true}}' >/dev/null
retry 20 bash -c "[[ \$(kubectl get dg deploymentgrid-demo -o jsonpath='{.spec.templatePool}' | python3 -c 'import json,sys; print(sorted(json.load(sys.stdin)))') == \"['test1']\" ]]" || fail "unused template not pruned: $(kubectl get dg deploymentgrid-demo -o jsonpath='{.spec.templatePool}' | head -c 300)"
retry 20 bash -c "[[ \$(kubectl get deploy deploymentgrid-demo-zone2 -o jsonpath='{.spec.replicas}') == 1 ]]" || fail "zone2 does not run test1"

# The standby did nothing all along.
expect "standby reconciles" "$(controller_metric $B reconciles_total)" 0
expect "standby writes" "$(controller_metric $B api_writes_total)" 0
# The leader stops: the standby takes over (the lease is released at once) and reconciles.
kill -TERM "$CONTROLLER_PID_ctl_a"
retry 20 pid_gone "$CONTROLLER_PID_ctl_a" || fail "ctl-a did not stop on SIGTERM"
retry 20 bash -c "[[ \$(curl -sf http://127.0.0.1:$B/metrics | awk '\$1 == \"sitegrid_controller_leader\" {print \$2}') == 1 ]]" || fail "ctl-b never took over"
add_node sh-2 zone=zone3
retry 20 exists deploy deploymentgrid-demo-zone3 || fail "the new leader does not reconcile"
kubectl delete node sh-2 >/dev/null

# Deleting a grid removes its children through ownerReferences (the garbage collector).
kubectl delete dg deploymentgrid-demo >/dev/null
retry 30 bash -c "! kubectl get deploy -o name | grep -q deploymentgrid-demo-" || fail "the grid's Deployments outlived it"
kubectl delete ssg statefulsetgrid-demo >/dev/null
retry 30 gone sts statefulsetgrid-demo-beijing || fail "the grid's StatefulSets outlived it"
