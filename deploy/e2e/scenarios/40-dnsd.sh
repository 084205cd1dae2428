# sitegrid-dnsd against the real kube-apiserver 1.20, with the controller and
# the real StatefulSet controller and scheduler: the seeds' StatefulSetGrid
# and headless ServiceGrid applied verbatim; a dnsd for a beijing node and one
# for a guangzhou node, each read by its own dnsmasq and asked with dig, give
# different answers for the same names, follow pod changes, switch when the
# node moves site, and empty their files when the grid goes.
# Independent of the scenarios before it: sets up its sites and names, and
# puts the sample back at the end.
# shellcheck shell=bash
SEEDS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../controller/tests/fixtures" && pwd)
CTL=18091 BJ_OPS=18093 GZ_OPS=18094 BJ_DNS=15301 GZ_DNS=15302
name() { echo "statefulsetgrid-demo-$1.servicegrid-demo-svc.default.svc.cluster.local"; }
HEADLESS=servicegrid-demo-svc.default.svc.cluster.local
# clear_grid_pods: the seed grid's pods gone. Without a kubelet to confirm, a deleted
# pod stays Terminating for ever: force what the garbage collector or a scenario left.
clear_grid_pods() {
    kubectl get pods -o name | grep '^pod/statefulsetgrid-demo-' | xargs -r kubectl delete --grace-period=0 --force >/dev/null 2>&1 || true
    retry 30 bash -c "! kubectl get pods -o name | grep -q statefulsetgrid-demo-" || fail "the seed grid's pods are still there"
}

# Sites as sample.sh made them (earlier scenarios move nodes).
for n in bj-1 bj-2 bj-3; do kubectl label node $n location=beijing --overwrite >/dev/null; done
for n in gz-1 gz-2 gz-3; do kubectl label node $n location=guangzhou --overwrite >/dev/null; done

install_controller_prereqs
install_dnsd_prereqs
# The seeds' names: free them from the sample's (or an earlier scenario's) grids and
# its ClusterIP servicegrid-demo-svc (a Service cannot become headless in place).
kubectl delete ssg statefulsetgrid-demo --ignore-not-found >/dev/null
kubectl delete sg servicegrid-demo --ignore-not-found >/dev/null
kubectl delete svc servicegrid-demo-svc --ignore-not-found >/dev/null
retry 30 gone svc servicegrid-demo-svc || fail "servicegrid-demo-svc is still there"
retry 30 bash -c "! kubectl get sts -o name | grep -q statefulsetgrid-demo-" || fail "an earlier grid's StatefulSets are still there"
clear_grid_pods
# Its own controller: --leader-elect=false, so an earlier scenario's standby or leader changes nothing here.
start_controller dnsd-ctl $CTL --leader-elect=false --resync-period=10s
# Least privilege: the DaemonSet's ServiceAccount may list and watch what dnsd reads, and nothing more.
SA=system:serviceaccount:kube-system:sitegrid-dnsd
can() { kubectl auth can-i "$1" "$2" -A --as "$SA" 2>/dev/null || true; }
for r in nodes pods statefulsets.apps statefulsetgrids.superedge.io servicegrids.superedge.io; do
    for v in list watch; do expect "$SA may $v $r" "$(can $v $r)" yes; done
    for v in get create update patch delete; do expect "$SA may $v $r" "$(can $v $r)" no; done
done
for r in services endpoints secrets configmaps deployments.apps deploymentgrids.superedge.io; do
    expect "$SA may list $r" "$(can list $r)" no
done
# The DaemonSet and the CoreDNS ConfigMap are valid for this API server, and so is a CoreDNS
# DaemonSet (kubeadm's container, volume and mount) once patched with coredns-patch.yaml:
# its own volume kept, the hosts directory added.
kubectl apply --dry-run=server -f "$SITEGRID_E2E_ROOT/deploy/dnsd/daemonset.yaml" \
    -f "$SITEGRID_E2E_ROOT/deploy/dnsd/coredns.yaml" >/dev/null || fail "deploy/dnsd manifests refused"
cat >"$SITEGRID_E2E_LOGS/coredns-daemonset.yaml" <<'DS'
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      containers:
      - name: coredns
        image: coredns/coredns:1.7.0
        args: [-conf, /etc/coredns/Corefile]
        volumeMounts: [{name: config-volume, mountPath: /etc/coredns, readOnly: true}]
      volumes:
      - name: config-volume
        configMap: {name: coredns, items: [{key: Corefile, path: Corefile}]}
DS
patched() {
    kubectl patch --local -f "$SITEGRID_E2E_LOGS/coredns-daemonset.yaml" --type strategic \
        --patch-file "$SITEGRID_E2E_ROOT/deploy/dnsd/coredns-patch.yaml" "$@"
}
expect "patched CoreDNS volumes" "$(patched -o jsonpath='{.spec.template.spec.volumes[*].hostPath.path}')" /data/edge
expect "patched CoreDNS mounts" "$(patched -o jsonpath='{.spec.template.spec.containers[0].volumeMounts[*].mountPath}')" \
    "/data/edge /etc/coredns"
patched -o yaml | kubectl apply --dry-run=server -f - >/dev/null || fail "the patched CoreDNS DaemonSet is refused"

kubectl apply -f "$SEEDS/seed000-06-statefulsetgrid.yaml" -f "$SEEDS/seed000-08-servicegrid.yaml" >/dev/null
retry 30 exists svc servicegrid-demo-svc || fail "the headless Service never appeared"
expect "headless" "$(jget svc servicegrid-demo-svc '{.spec.clusterIP}')" None

# OrderedReady: each pod is made once the one before it runs and is ready.
for i in 0 1 2; do
    run_bound_pod statefulsetgrid-demo-beijing-$i 10.0.5.1$i
    run_bound_pod statefulsetgrid-demo-guangzhou-$i 10.0.6.1$i
done

# The site label is on the StatefulSet, not its pods; putting it back on an existing
# StatefulSet (as on a controller upgrade) restarts no pod.
expect "site label" "$(jget sts statefulsetgrid-demo-beijing '{.metadata.labels.sitegrid\.io/node-unit}')" beijing
uid=$(jget pod statefulsetgrid-demo-beijing-0 '{.metadata.uid}')
revision=$(jget sts statefulsetgrid-demo-beijing '{.status.updateRevision}')
kubectl label sts statefulsetgrid-demo-beijing sitegrid.io/node-unit- >/dev/null
expect_within 30 "site label back" beijing jget sts statefulsetgrid-demo-beijing '{.metadata.labels.sitegrid\.io/node-unit}'
expect "pod 0 after the relabel" "$(jget pod statefulsetgrid-demo-beijing-0 '{.metadata.uid}')" "$uid"
expect "revision after the relabel" "$(jget sts statefulsetgrid-demo-beijing '{.status.updateRevision}')" "$revision"
[[ -z $(jget pod statefulsetgrid-demo-beijing-0 '{.metadata.labels.sitegrid\.io/node-unit}') ]] || fail "the site label reached the pods"

start_dnsd bj-1 $BJ_OPS
start_dnsd gz-1 $GZ_OPS
start_dnsmasq "$SITEGRID_E2E_RUN/dnsd-bj-1" $BJ_DNS
start_dnsmasq "$SITEGRID_E2E_RUN/dnsd-gz-1" $GZ_DNS

# The same names, each site's own pods.
for i in 0 1 2; do
    expect_within 10 "bj-1: $(name $i)" 10.0.5.1$i dig_ips $BJ_DNS "$(name $i)"
    expect_within 10 "gz-1: $(name $i)" 10.0.6.1$i dig_ips $GZ_DNS "$(name $i)"
done
expect_within 10 "bj-1: $HEADLESS" "10.0.5.10 10.0.5.11 10.0.5.12" dig_ips $BJ_DNS $HEADLESS
expect_within 10 "gz-1: $HEADLESS" "10.0.6.10 10.0.6.11 10.0.6.12" dig_ips $GZ_DNS $HEADLESS

# A pod turns unready: out of the Service's name, still under its own.
set_pod_ready statefulsetgrid-demo-beijing-1 False
expect_within 10 "bj-1: $HEADLESS with pod 1 unready" "10.0.5.10 10.0.5.12" dig_ips $BJ_DNS $HEADLESS
expect "bj-1: $(name 1) while unready" "$(dig_ips $BJ_DNS "$(name 1)")" 10.0.5.11
set_pod_ready statefulsetgrid-demo-beijing-1 True
# A pod comes back at another address (deleted; the StatefulSet makes it again).
delete_pod statefulsetgrid-demo-beijing-0
retry 30 bash -c "[[ \$(kubectl get pod statefulsetgrid-demo-beijing-0 -o jsonpath='{.metadata.uid}' 2>/dev/null) != '' && \$(kubectl get pod statefulsetgrid-demo-beijing-0 -o jsonpath='{.metadata.uid}') != $uid ]]" || fail "pod 0 not made again"
run_bound_pod statefulsetgrid-demo-beijing-0 10.0.5.20
expect_within 10 "bj-1: $(name 0) after the new pod" 10.0.5.20 dig_ips $BJ_DNS "$(name 0)"
expect "gz-1: $(name 0) meanwhile" "$(dig_ips $GZ_DNS "$(name 0)")" 10.0.6.10

# bj-1 moves to guangzhou: it answers as guangzhou does; and back.
kubectl label node bj-1 location=guangzhou --overwrite >/dev/null
expect_within 10 "bj-1 in guangzhou: $(name 0)" 10.0.6.10 dig_ips $BJ_DNS "$(name 0)"
expect_within 10 "bj-1 in guangzhou: $HEADLESS" "10.0.6.10 10.0.6.11 10.0.6.12" dig_ips $BJ_DNS $HEADLESS
kubectl label node bj-1 location=beijing --overwrite >/dev/null
expect_within 10 "bj-1 back in beijing: $(name 0)" 10.0.5.20 dig_ips $BJ_DNS "$(name 0)"

# The grid goes: both files lose every record, and the names no longer resolve.
kubectl delete ssg statefulsetgrid-demo >/dev/null
expect_within 10 "bj-1 records after the grid" 0 hosts_records "$SITEGRID_E2E_RUN/dnsd-bj-1/hosts"
expect_within 10 "gz-1 records after the grid" 0 hosts_records "$SITEGRID_E2E_RUN/dnsd-gz-1/hosts"
expect "bj-1: $(name 0) after the grid" "$(dig_ips $BJ_DNS "$(name 0)")" ""
[[ $(curl -sf "http://127.0.0.1:$BJ_OPS/metrics" | awk '$1 == "sitegrid_dnsd_write_errors_total" {print $2}') == 0 ]] || fail "dnsd counted write errors"

# Put the sample back: stop what this scenario started, drop the headless Service and the
# grid's pods, reload the sample.
stop_group dnsd
stop_pid "$CONTROLLER_PID_dnsd_ctl"
sed -i "/^$CONTROLLER_PID_dnsd_ctl\$/d" "$SITEGRID_E2E_LOGS/pids"
kubectl delete sg servicegrid-demo >/dev/null
retry 30 gone svc servicegrid-demo-svc || fail "the headless Service outlived its grid"
retry 30 bash -c "! kubectl get sts -o name | grep -q statefulsetgrid-demo-" || fail "the grid's StatefulSets outlived it"
clear_grid_pods
"$SITEGRID_E2E_ROOT/deploy/e2e/sample.sh" >/dev/null || fail "sample.sh could not restore the sample"
