# The node cache on real nodes (issue 42): a node whose kubelet reads the API server
# through its sitegrid-proxy (deploy/static/sitegrid-proxy-node-cache.yaml and
# kubelet.kubeconfig) starts every pod again after a reboot with the API server
# unreachable — DaemonSet pods, the grid's, and one with a Secret, a ConfigMap and a
# service-account token mounted — and its site keeps answering the ServiceGrid's ClusterIP.
#
#   - a plain control plane, sitegrid installed as README "Deploy on a cluster" says, two
#     sites: beijing (bj-1) and shanghai (sh-1, a site of one node);
#   - the baseline: sh-1 rebooted *online* with its kubelet reading the API server itself;
#   - sh-1 switched to the node cache as README "Node cache" says; the proxy killed under it
#     (the kubelet restarts it, no pod is touched);
#   - sh-1 rebooted offline (every process killed, /run and iptables gone, the disk kept, the
#     API server unreachable): every pod that ran is Running again, and the ServiceGrid's
#     ClusterIP is answered in the site by its pods at their new addresses (issue 44: the
#     kubelet's word, served by the proxy); kept offline five minutes, meanwhile a pod of it
#     force-deleted and its Secret changed in the cloud;
#   - back online: the deleted pod stops, its replacement runs (no pod twice), the Secret's
#     new value reaches the pod.
#   - the proxy as a host service instead (systemd's unit, emulated by nodes.sh): sh-1 rebooted
#     offline again, every pod Running again, timed beside the static pod.
# shellcheck shell=bash
# shellcheck source-path=SCRIPTDIR source=../nodes.sh
source "$E2E_DIR/nodes.sh"
# shellcheck source-path=SCRIPTDIR source=../real.sh
source "$E2E_DIR/real.sh"
trap real_exit EXIT
# How long sh-1 stays offline (issue 42: at least five minutes without the kubelet exiting).
OFFLINE_FOR=${SITEGRID_E2E_OFFLINE_SECONDS:-300}

# --- a plain cluster, two sites --------------------------------------------------------
real_plane
node_add bj-1 192.0.2.11 10.0.11.0/24
node_add sh-1 192.0.2.31 10.0.31.0/24
node_routes
for n in bj-1 sh-1; do retry 60 exists node "$n" || fail "node $n never registered (kubelet-$n.log)"; done
kubectl wait --for=condition=Ready --timeout=60s node/bj-1 node/sh-1 >/dev/null || fail "nodes not Ready"
real_kube_proxy
kubectl label node bj-1 rack=bj >/dev/null && kubectl label node sh-1 rack=sh >/dev/null || fail "rack labels"
real_sitegrid beijing=bj shanghai=sh

# An app on sh-1 with what the kubelet must read for it: a Secret (volume), a ConfigMap
# (envFrom), a service-account token (projected: a TokenRequest) besides 1.20's Secret-based
# default token. It writes what it sees to the node's /var/lib/sitegrid-e2e every second.
kubectl apply -f - >/dev/null <<'APP' || fail "the app with a Secret, a ConfigMap and a token"
apiVersion: v1
kind: ServiceAccount
metadata: {name: edge-app, namespace: default}
---
apiVersion: v1
kind: Secret
metadata: {name: edge-secret, namespace: default}
stringData: {password: first}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: edge-config, namespace: default}
data: {MODE: edge}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: edge-app, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: edge-app}}
  template:
    metadata: {labels: {app: edge-app}}
    spec:
      nodeSelector: {kubernetes.io/hostname: sh-1}
      serviceAccountName: edge-app
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: busybox:1.36
        imagePullPolicy: Never
        command:
        - sh
        - -c
        - |
          trap 'exit 0' TERM
          while :; do
            echo "$POD_NAME $MODE $(cat /secret/password) token=$(wc -c </token/token)" >>/out/edge-app.log
            sleep 1
          done
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        envFrom: [{configMapRef: {name: edge-config}}]
        volumeMounts:
        - {name: secret, mountPath: /secret}
        - {name: token, mountPath: /token}
        - {name: out, mountPath: /out}
      volumes:
      - {name: secret, secret: {secretName: edge-secret}}
      - name: token
        projected:
          sources: [{serviceAccountToken: {path: token, expirationSeconds: 3600, audience: edge}}]
      - {name: out, hostPath: {path: /var/lib/sitegrid-e2e, type: DirectoryOrCreate}}
APP
for site in beijing shanghai; do
    retry 90 bash -c "[[ \$(kubectl get deploy deploymentgrid-demo-$site -o jsonpath='{.status.readyReplicas}') == 2 ]]" ||
        fail "deploymentgrid-demo-$site: not 2 ready pods"
done
kubectl wait --for=condition=Available --timeout=90s deployment/edge-app >/dev/null || fail "edge-app not available"
GRID_IP=$(kubectl get svc servicegrid-demo-svc -o jsonpath='{.spec.clusterIP}')

# running NODE: "namespace/name:containers" of the pods whose containers NODE's container
# runtime runs, sorted: the kubelet's /runningpods/ (from the runtime, not from the API's pod
# objects; the e2e kubelets serve it anonymously).
running() {
    in_node "$1" curl -sfk --max-time 2 "https://$(node_ip "$1"):10250/runningpods/" | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    names = sorted(c["name"] for c in p["spec"].get("containers") or [])
    print(p["metadata"]["namespace"] + "/" + p["metadata"]["name"] + ":" + ",".join(names))' | sort | paste -sd' '
}
# all_back NODE WANT: NODE runs every pod of WANT again.
all_back() { [[ $(running "$1") == "$2" ]]; }
# since_kubelet NODE: seconds (0.1) from NODE's kubelet start to now.
since_kubelet() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$(cat "$NODES_DIR/$1/kubelet-started")"; }
# ask_from NODE: the pod that answers servicegrid-demo-svc's ClusterIP from NODE's own network.
ask_from() { ip netns exec "sg-$1" curl -s --max-time 2 "http://$GRID_IP/" | sed -n 's/^pod name: //p'; }
# start_asker LOG: a client in the site (sh-1's own network) asks the ServiceGrid's ClusterIP
# every 200 ms, writing "<time> <the pod that answered, or ->" lines to LOG; prints its PID.
start_asker() {
    (while :; do
        t=$(date +%s.%N)
        a=$(ip netns exec sg-sh-1 curl -s --max-time 1 "http://$GRID_IP/" 2>/dev/null | sed -n 's/^pod name: //p')
        echo "$t ${a:--}"
        sleep 0.2
    done) >"$1" 2>/dev/null &
    track $!
    echo $!
}
# stale_after PID LOG RUNNING_AT: stops the asker PID and reads its LOG: "<s from RUNNING_AT to
# the first answer by shanghai's pods> <requests> <failed after that> <answers from another site>".
stale_after() {
    kill "$1" 2>/dev/null
    python3 - "$2" "$3" <<'PY'
import sys
lines = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 2]
ready = float(sys.argv[2])
ok = lambda a: a.startswith("deploymentgrid-demo-shanghai-")
first = next((float(t) for t, a in lines if ok(a)), None)
after = [(t, a) for t, a in lines if first is not None and float(t) >= first]
failed = sum(1 for t, a in after if a == "-")
other = sum(1 for t, a in lines if a != "-" and not ok(a))
late = first - ready if first is not None else -1
print(f"{late:.1f} {len(lines)} {failed} {other}")
PY
}
# node_cache_metric SERIES: a value from sh-1's proxy's /metrics.
node_cache_metric() { in_node sh-1 curl -sf http://127.0.0.1:51007/metrics | awk -v m="sitegrid_proxy_$1" '$1 == m {v = $2} END {print v + 0}'; }

# The runtime's view lags the API's by a PLEG period: wait until it has the app's pods.
apps_running() { local r; r=$(running sh-1); [[ $r == *default/edge-app-* && $(grep -o 'deploymentgrid-demo-shanghai-' <<<"$r" | wc -l) == 2 ]]; }
retry 60 apps_running || fail "sh-1's runtime does not run the app's pods: $(running sh-1)"
SH_PODS=$(running sh-1)
n_pods=$(wc -w <<<"$SH_PODS")
((n_pods >= 5)) || fail "sh-1 runs only: $SH_PODS"
log "sh-1 runs $n_pods pods: $SH_PODS"

# --- the baseline: sh-1 rebooted online, its kubelet reading the API server itself ---------
node_power_off sh-1
node_boot sh-1
retry 180 all_back sh-1 "$SH_PODS" || fail "sh-1 rebooted online: pods running '$(running sh-1)', want '$SH_PODS'"
online_reboot=$(since_kubelet sh-1)
log "sh-1 rebooted online without the node cache: every pod Running ${online_reboot} s after the kubelet started"

# --- README "Node cache": sh-1's kubelet reads through its proxy -------------------------
kubectl label node sh-1 sitegrid.io/node-cache=true >/dev/null || fail "label sh-1 for the node cache"
ds_proxy_on_sh1() { kubectl -n kube-system get pods -l app=sitegrid-proxy --field-selector spec.nodeName=sh-1 -o name; }
expect_within 120 "sitegrid-proxy's DaemonSet pod on sh-1 once it is labelled" "" ds_proxy_on_sh1
SH=$NODES_DIR/sh-1
mkdir -p "$SH/etc-sitegrid/tls" "$SH/etc-kubernetes/pki" "$SH/kubelet/pki"
install -m 0440 "$CERTS/server.crt" "$SH/etc-sitegrid/tls/tls.crt"
install -m 0440 "$CERTS/server.key" "$SH/etc-sitegrid/tls/tls.key"
install -m 0440 "$CERTS/ca.crt" "$SH/etc-sitegrid/tls/ca.crt"
# The cluster's CA, and the kubelet's certificate and key where a rotating kubelet keeps them.
install -m 0444 "$SITEGRID_E2E_RUN/pki/ca.crt" "$SH/etc-kubernetes/pki/ca.crt"
(umask 0177; cat "$SITEGRID_E2E_RUN/pki/node-sh-1.crt" "$SITEGRID_E2E_RUN/pki/node-sh-1.key" >"$SH/kubelet/pki/kubelet-client-current.pem")
secret=$(kubectl -n kube-system get sa sitegrid-proxy -o jsonpath='{.secrets[0].name}')
(umask 0177
    cat >"$SH/etc-sitegrid/upstream.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: default, cluster: {server: "https://192.0.2.1:6443", certificate-authority-data: "$(kubectl -n kube-system get secret "$secret" -o jsonpath='{.data.ca\.crt}')"}}]
users: [{name: sitegrid-proxy, user: {token: "$(kubectl -n kube-system get secret "$secret" -o jsonpath='{.data.token}' | base64 -d)"}}]
contexts: [{name: default, context: {cluster: default, user: sitegrid-proxy}}]
current-context: default
KC
)
# As README "Node cache" says, with the node cache's own lines in the log (kept with the suite's logs).
sed 's|    - --data-dir=/var/lib/sitegrid-proxy|&\n    - --log-level=info,sitegrid_nodecache=debug|' \
    "$SITEGRID_E2E_ROOT/deploy/static/sitegrid-proxy-node-cache.yaml" >"$SH/etc-kubernetes/manifests/sitegrid-proxy-node-cache.yaml" ||
    fail "the static pod"
proxy_serving() { in_node sh-1 curl -sf http://127.0.0.1:51007/healthz >/dev/null; }
retry 90 proxy_serving || fail "the node cache's proxy never served on sh-1 (its container's log in sh-1's /var/log/pods)"
cp "$SITEGRID_E2E_ROOT/deploy/static/kubelet.kubeconfig" "$SH/kubelet.kubeconfig"
node_kubelet_restart sh-1
# The same pods, sitegrid-proxy's static one instead of the DaemonSet's.
SH_PODS=$(tr ' ' '\n' <<<"$SH_PODS" | grep -v '^kube-system/sitegrid-proxy-' | { cat; echo kube-system/sitegrid-proxy-sh-1:proxy; } | sort | paste -sd' ')
# Through the proxy: every pod there, and kept (the Secret, the ConfigMap, the token).
retry 120 all_back sh-1 "$SH_PODS" || fail "sh-1 through the node cache: pods running '$(running sh-1)', want '$SH_PODS'"
retry 60 more_than $((n_pods - 1)) node_cache_metric 'node_cache_objects{resource="pods"}' || fail "the node cache keeps no pods"
retry 60 more_than 0 node_cache_metric 'node_cache_tokens' || fail "the node cache keeps no token"
for kind in secrets configmaps; do
    retry 60 more_than 0 node_cache_metric "node_cache_objects{resource=\"$kind\"}" || fail "the node cache keeps no $kind"
done

# The proxy crashes (or is upgraded): the kubelet restarts it from the manifest; no pod is touched.
proxy_pid() { local p; for p in $(node_pids sh-1); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == sitegrid-proxy ]] && echo "$p"; done | head -1; }
tasks_before=$(node_ctr sh-1 tasks ls -q | sort)
pid=$(proxy_pid)
[[ -n $pid ]] || fail "no sitegrid-proxy process on sh-1"
killed_at=$SECONDS
kill -KILL "$pid"
proxy_replaced() { local p; p=$(proxy_pid); [[ -n $p && $p != "$1" ]]; }
retry 120 proxy_replaced "$pid" || fail "the kubelet did not restart the proxy"
retry 60 proxy_serving || fail "the restarted proxy does not serve"
proxy_back=$((SECONDS - killed_at))
# Every container that ran still runs but the proxy's own (replaced).
gone=$(comm -23 <(echo "$tasks_before") <(node_ctr sh-1 tasks ls -q | sort) | grep -c .)
expect "containers gone when the proxy was killed (the proxy's)" "$gone" 1
retry 60 all_back sh-1 "$SH_PODS" || fail "after the proxy crash: pods running '$(running sh-1)'"
echo "figures: node cache, proxy killed on sh-1: back in ${proxy_back} s (restarted by the kubelet from its manifest), $n_pods of $n_pods pods running throughout"

# --- sh-1 rebooted offline with the node cache -------------------------------------------
node_power_off sh-1
node_cut sh-1
asker=$(start_asker "$SITEGRID_E2E_LOGS/asks-sh-1.log")
node_boot sh-1
retry 180 all_back sh-1 "$SH_PODS" || fail "sh-1 rebooted offline: pods running '$(running sh-1)', want '$SH_PODS'"
running_at=$(date +%s.%N)
offline_reboot=$(since_kubelet sh-1)
booted=$SECONDS
# What the kubelet logs from here on: before every pod was back it retried what failed
# while its static proxy was not up yet, as it does online when the API server takes more
# than its one second.
log_from=$(wc -l <"$SITEGRID_E2E_LOGS/kubelet-sh-1.log")
kubelet_pid=$(node_kubelet_pid sh-1)
echo "figures: offline reboot with the node cache: $n_pods of $n_pods pods Running ${offline_reboot} s after the kubelet started (online reboot without it: ${online_reboot} s)"
# The ServiceGrid's ClusterIP in the site: its pods came back at new addresses, which
# only the kubelet knows offline; the proxy serves them (docs/edge-autonomy.md, "New
# addresses after an offline reboot").
in_site() { [[ $(ask_from sh-1) == deploymentgrid-demo-shanghai-* ]]; }
retry 60 in_site || fail "sh-1 offline: the ClusterIP answered '$(ask_from sh-1)', not by a pod of shanghai"
answered=$(since_kubelet sh-1)
echo "figures: offline reboot with the node cache: the ClusterIP answered in the site ${answered} s after the kubelet started, by the restarted pods at their new addresses"
sleep 20
read -r late sent failed other <<<"$(stale_after "$asker" "$SITEGRID_E2E_LOGS/asks-sh-1.log" "$running_at")"
echo "figures: offline reboot, stale endpoints: the ClusterIP answered by the restarted pods ${late} s after they were all Running; $sent requests sent, $failed failed after that, $other from another site"
expect "answers from another site" "$other" 0
readyz=$(in_node sh-1 curl -s http://127.0.0.1:51007/readyz)
[[ $readyz == *"answered from the node cache"* ]] || fail "sh-1's proxy offline: /readyz '$readyz'"
app_log=$SH/e2e/edge-app.log
app_pod=$(kubectl get pods -l app=edge-app -o jsonpath='{.items[0].metadata.name}')
retry 30 bash -c "tail -n 1 '$app_log' | grep -q '^$app_pod edge first token='" || fail "edge-app offline: $(tail -n 1 "$app_log")"

# While offline: the app's pod force-deleted in the cloud (its ReplicaSet makes another, for
# sh-1), its Secret changed.
kubectl delete pod "$app_pod" --force --grace-period=0 >/dev/null 2>&1 || fail "force-delete $app_pod"
kubectl create secret generic edge-secret --from-literal=password=second --dry-run=client -o yaml | kubectl apply -f - >/dev/null ||
    fail "change the Secret"
remaining=$((OFFLINE_FOR - (SECONDS - booted)))
((remaining > 0)) && sleep "$remaining"
expect "sh-1's kubelet after $OFFLINE_FOR s offline (the same process)" "$(node_kubelet_pid sh-1)" "$kubelet_pid"
# (Not the Events the kubelet sends again and again offline: they quote what failed at its start.)
bad=$(tail -n +"$((log_from + 1))" "$SITEGRID_E2E_LOGS/kubelet-sh-1.log" | grep -v ' event.go:' |
    grep -E 'failed to sync (secret|configmap) cache|services have not yet been read|Failed to initialize CSINode' | tail -3)
[[ -z $bad ]] || fail "sh-1's kubelet offline: $bad"
all_back sh-1 "$SH_PODS" || fail "sh-1 after $OFFLINE_FOR s offline: pods running '$(running sh-1)'"
echo "figures: sh-1 offline ${OFFLINE_FOR} s: the kubelet ran throughout (pid $kubelet_pid), every pod Running, no secret/configmap/service/CSINode error in its log"

# --- back online ---------------------------------------------------------------------------
node_uncut sh-1
uncut=$SECONDS
app_pods_on_sh1() { running sh-1 | tr ' ' '\n' | grep -c '^default/edge-app-'; }
old_gone() { ! running sh-1 | grep -q "default/$app_pod:"; }
retry 180 old_gone || fail "the pod deleted in the cloud still runs on sh-1 after reconnecting"
gone_after=$((SECONDS - uncut))
one_app_pod() { [[ $(app_pods_on_sh1) == 1 ]]; }
retry 180 one_app_pod || fail "edge-app on sh-1 after reconnecting: $(running sh-1)"
kubectl wait --for=condition=Available --timeout=120s deployment/edge-app >/dev/null || fail "edge-app not available after reconnecting"
retry 180 bash -c "tail -n 1 '$app_log' | grep -q ' edge second token='" || fail "the Secret's new value never reached edge-app: $(tail -n 1 "$app_log")"
secret_after=$((SECONDS - uncut))
echo "figures: back online: the pod deleted in the cloud stopped ${gone_after} s after reconnecting, one edge-app pod runs, the Secret's new value reached it ${secret_after} s after"
# --- the node cache as a host service (README "Node cache", deploy/static/sitegrid-proxy.service) --
# systemd starts the proxy before the kubelet, and the kubelet once the proxy said it is ready: the
# kubelet's first lists are answered (from the node cache, offline) instead of refused while its
# static pod starts and retried after client-go's backoff. Same flags, files and data directory.
since_services() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$(cat "$NODES_DIR/$1/services-started")"; }
SERVICE_PODS=$(running sh-1 | tr ' ' '\n' | grep -v '^kube-system/sitegrid-proxy-' | paste -sd' ')
n_service=$(wc -w <<<"$SERVICE_PODS")
node_power_off sh-1
rm "$SH/etc-kubernetes/manifests/sitegrid-proxy-node-cache.yaml"
mkdir -p "$SH/host-bin" && real_image_file sitegrid-proxy /usr/local/bin/sitegrid-proxy "$SH/host-bin/sitegrid-proxy"
cp "$SITEGRID_E2E_ROOT/deploy/static/sitegrid-proxy.service" "$SH/sitegrid-proxy.service"
echo NODE_NAME=sh-1 >"$SH/etc-sitegrid/proxy.env"
node_cut sh-1
asker=$(start_asker "$SITEGRID_E2E_LOGS/asks-sh-1-service.log")
node_boot sh-1
retry 180 all_back sh-1 "$SERVICE_PODS" || fail "sh-1 rebooted offline, the proxy a host service: pods running '$(running sh-1)', want '$SERVICE_PODS'"
running_at=$(date +%s.%N)
service_reboot=$(since_services sh-1)
echo "figures: offline reboot with the node cache as a host service: $n_service of $n_service pods Running ${service_reboot} s after the proxy and the kubelet were started (as a static pod: ${offline_reboot} s; online reboot without it: ${online_reboot} s)"
retry 60 in_site || fail "sh-1 offline, the proxy a host service: the ClusterIP answered '$(ask_from sh-1)', not by a pod of shanghai"
sleep 20
read -r late sent failed other <<<"$(stale_after "$asker" "$SITEGRID_E2E_LOGS/asks-sh-1-service.log" "$running_at")"
echo "figures: offline reboot as a host service, stale endpoints: the ClusterIP answered by the restarted pods ${late} s after they were all Running; $sent requests sent, $failed failed after that, $other from another site"
expect "answers from another site (host service)" "$other" 0
node_uncut sh-1

echo "figures: node cache on disk: $(du -sb "$SH/sitegrid-proxy/node-cache" | cut -f1) bytes for $n_pods pods; the proxy's RSS $(awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/$(proxy_pid)/status")"

real_back
