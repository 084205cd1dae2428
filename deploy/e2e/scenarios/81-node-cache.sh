# The node cache on real nodes (issue 42): a node whose kubelet reads the API server
# through its sitegrid-proxy (deploy/static/sitegrid-proxy-node-cache.yaml and
# kubelet.kubeconfig) starts every pod again after a reboot with the API server
# unreachable — DaemonSet pods, the grid's, and one with a Secret, a ConfigMap and a
# service-account token mounted — and its site keeps answering the ServiceGrid's ClusterIP.
#
#   - a plain control plane, sitegrid installed as README "Deploy on a cluster" says, two
#     sites: beijing (bj-1, bj-2: a site of two nodes, its grid's pods on bj-1) and shanghai
#     (sh-1, a site of one node);
#   - the baseline: sh-1 rebooted *online* with its kubelet reading the API server itself;
#   - sh-1 switched to the node cache as README "Node cache" says; the proxy killed under it
#     (the kubelet restarts it, no pod is touched);
#   - sh-1 rebooted offline (every process killed, /run and iptables gone, the disk kept, the
#     API server unreachable): every pod that ran is Running again, and the ServiceGrid's
#     ClusterIP is answered in the site by its pods at their new addresses (issue 44: the
#     kubelet's word, served by the proxy); kept offline five minutes, meanwhile a pod of it
#     force-deleted and its Secret changed in the cloud;
#   - meanwhile beijing, behind a site proxy at the site (docs/placements.md, placement 2: a
#     site proxy on bj-2, both nodes' proxies with the node cache reading it): the site cut
#     from the cloud, bj-1 rebooted offline; the ClusterIP answered on both of its nodes by
#     bj-1's restarted pods at their new addresses (bj-2's kube-proxy too: bj-1's proxy passes
#     the kubelet's word to the site proxy, issue 44), kube-proxy's old rules gone;
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
node_add bj-2 192.0.2.12 10.0.12.0/24
node_add sh-1 192.0.2.31 10.0.31.0/24
node_routes
for n in bj-1 bj-2 sh-1; do retry 60 exists node "$n" || fail "node $n never registered (kubelet-$n.log)"; done
kubectl wait --for=condition=Ready --timeout=60s node/bj-1 node/bj-2 node/sh-1 >/dev/null || fail "nodes not Ready"
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
# bj-2 joins beijing now: the site's grid pods stay on bj-1, so what bj-2's kube-proxy sends
# to bj-1 after bj-1's offline reboot reaches them only at the addresses bj-1's kubelet gave.
kubectl label node bj-2 rack=bj >/dev/null || fail "rack label of bj-2"
retry 60 bash -c '[[ $(kubectl get node bj-2 -o jsonpath="{.metadata.labels.location}") == beijing ]]' ||
    fail "bj-2 never joined beijing (NodeUnit beijing)"

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
# in_site NODE SITE: a pod of SITE's grid answers the ClusterIP from NODE.
in_site() { [[ $(ask_from "$1") == "deploymentgrid-demo-$2-"* ]]; }
# no_old OLD NEW: none of the addresses OLD (kube-proxy's DNAT targets before) is in NEW.
no_old() { local a; for a in $1; do [[ " $2 " != *" $a "* ]] || return 1; done; }
# no_old_since_boot TARGETS RULES: no DNAT targets start_asker's RULES file recorded (from a
# node's power-off on) name an address of TARGETS (its kube-proxy's before): the node's proxy
# serves its pods not ready from its start after the reboot until the kubelet reports each at its
# new address (docs/edge-autonomy.md), so its kube-proxy never sends to an old one.
# It fails too when the file records no target at all (kube-proxy's rules never read).
no_old_since_boot() {
    local _t targets seen=
    while read -r _t targets; do
        no_old "$1" "$targets" || return 1
        [[ $targets == - ]] || seen=1
    done <"$2"
    [[ -n $seen ]]
}
# start_asker NODE LOG: a client in NODE's site (NODE's own network) asks the ServiceGrid's
# ClusterIP every 200 ms, writing "<time> <the pod that answered, or -CODE> <connect s> <total s>"
# lines to LOG (curl's times to the connection and to the whole answer); prints its PIDs (its
# own and its watchers', below).
# CODE is curl's exit code for a request without an answer (28: none within ASK_WAIT, 7:
# refused or unreachable). A request sent to an address no pod holds any more fails either way
# (refused once ARP gives up on it after 3 s, or unanswered), while a live pod on a busy machine
# may answer later than a second, as TCP retransmits a lost SYN after one: such answers count as
# answers and are reported as slow. Each request runs on its own, so one that waits does not
# delay the next (the figures' 200 ms resolution); lines are written as requests end.
# Each request has a source port of its own (20000-29999, where nothing in a node listens, below
# the kernel's ephemeral range; the next one each time, starting from the number of 200 ms since
# the epoch, so that a later asker in the same node starts past an earlier one's last port, as
# none sends more than one request in 200 ms): the requests sent before kube-proxy's
# rules existed leave un-NATed SYN_SENT entries in the node's conntrack table for 120 s, and a
# later connection the kernel gave the same port would follow such an entry past kube-proxy's
# DNAT, towards the ClusterIP itself, and fail, whatever kube-proxy's rules say (kube-proxy 1.20
# clears no TCP entries: a real node's own clients can meet this too, outside what sitegrid
# serves).
ASK_WAIT=5
start_asker() {
    local watchers
    # Beside it, for a failure message: where each of NODE's connections to the ClusterIP went
    # (conntrack's NEW events: kube-proxy's DNAT target is the reply's source; DESTROY events:
    # entries removed) and kube-proxy's DNAT targets for the ServiceGrid whenever they change.
    ip netns exec "sg-$1" conntrack -E -e NEW,DESTROY -p tcp -d "$GRID_IP" --dport 80 -o timestamp \
        >"${2%.log}.conntrack" 2>&1 &
    track $!
    watchers=$!
    (last=
        while :; do
            r=$(dnat_targets "sg-$1" servicegrid-demo-svc)
            [[ $r == "$last" ]] || echo "$(date +%s.%N) ${r:--}"
            last=$r
            sleep 0.2
        done) >"${2%.log}.rules" 2>/dev/null &
    track $!
    watchers+=" $!"
    (port=$(($(date +%s%N) / 200000000))
        while :; do
            port=$((port + 1))
            (
                t=$(date +%s.%N)
                out=$(ip netns exec "sg-$1" curl -s --local-port "$((20000 + port % 10000))" --max-time "$ASK_WAIT" \
                    -w '\n%{exitcode} %{time_connect} %{time_total}' "http://$GRID_IP/" 2>/dev/null)
                a=$(sed -n 's/^pod name: //p' <<<"$out")
                read -r code connect total <<<"${out##*$'\n'}"
                echo "$t ${a:--$code} $connect $total"
            ) &
            sleep 0.2
        done) >"$2" 2>/dev/null &
    track $!
    echo "$! $watchers"
}
# ready_at SITE SINCE LOG...: when (epoch seconds) the first of SITE's grid pods was Ready after
# SINCE, by its kubelet's word: the line a node cache logs when it takes a pod's status from
# the kubelet offline, in the proxy's LOGs (its own, or the container's CRI log).
ready_at() {
    local site=$1 since=$2
    shift 2
    cat "$@" 2>/dev/null | python3 -c '
import datetime, re, sys
site, since = sys.argv[1], float(sys.argv[2])
stamp = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z")
when = []
for line in sys.stdin:
    if "status taken from the kubelet offline" not in line or "ready=true" not in line:
        continue
    if f"pod=default/deploymentgrid-demo-{site}-" not in line:
        continue
    m = stamp.search(line)
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
    t += float(m.group(2) or 0)
    if t >= since:
        when.append(t)
print(f"{min(when):.3f}" if when else "")' "$site" "$since"
}
# static_proxy_logs NODE: the CRI logs of NODE's static sitegrid-proxy pods.
static_proxy_logs() { compgen -G "$NODES_DIR/$1/log-pods/kube-system_sitegrid-proxy-$1_*/proxy/*.log"; }
# stale_after PID LOG SITE READY_AT: stops the asker PID, lets the requests it has sent end, and
# reads its LOG: "<s from READY_AT to the first answer by SITE's pods> <requests> <failed after
# that> <answers from another site> <answered after that but later than a second> <the slowest
# of those: connect/total s>".
stale_after() {
    # shellcheck disable=SC2086 # the asker's PIDs
    kill $1 2>/dev/null
    sleep "$ASK_WAIT"
    python3 - "$2" "$3" "$4" <<'PY'
import sys
lines = sorted((l.split() for l in open(sys.argv[1]) if len(l.split()) >= 2), key=lambda l: float(l[0]))
site, ready = sys.argv[2], float(sys.argv[3])
ok = lambda a: a.startswith(f"deploymentgrid-demo-{site}-")
first = next((float(l[0]) for l in lines if ok(l[1])), None)
after = [l for l in lines if first is not None and float(l[0]) >= first]
failed = sum(1 for l in after if l[1].startswith("-"))
other = sum(1 for l in lines if not l[1].startswith("-") and not ok(l[1]))
slow = [l for l in after if not l[1].startswith("-") and len(l) >= 4 and float(l[3]) > 1]
slowest = max(slow, key=lambda l: float(l[3]), default=None)
late = first - ready if first is not None else -1
print(f"{late:.1f} {len(lines)} {failed} {other} {len(slow)} {slowest[2] + '/' + slowest[3] if slowest else '-'}")
PY
}
# stale_figures: what stale_after gave (read into late sent failed other slow slowest), said.
stale_figures() {
    echo "the ClusterIP answered by the restarted pods ${late} s after they were Ready; $sent requests sent, $failed failed after that ($slow answered later than a second, the slowest connected/answered in $slowest s), $other from another site"
}
# unanswered LOG SITE: for a failure message, each request of start_asker's LOG that got no
# answer after the first one SITE's pods answered (those stale_after counts): when it was sent,
# curl's code, its connect time and where its connection went (kube-proxy's DNAT target, the
# source the reply should come from, in conntrack's NEW event for its SYN); then kube-proxy's
# DNAT targets for the ServiceGrid as they changed from a second before the first failure, and
# conntrack's DESTROY events of connections that never had an answer.
unanswered() {
    python3 - "$1" "${1%.log}.conntrack" "${1%.log}.rules" "$2" <<'PY'
import re, sys, time
hms = lambda t: time.strftime("%T", time.gmtime(t)) + f".{int(t * 10) % 10}"
lines = sorted((l.split() for l in open(sys.argv[1]) if len(l.split()) >= 2), key=lambda l: float(l[0]))
site = f"deploymentgrid-demo-{sys.argv[4]}-"
first = next((float(l[0]) for l in lines if l[1].startswith(site)), None)
failed = [l for l in lines if first is not None and float(l[0]) >= first and l[1].startswith("-")]
events = []
try:
    for e in open(sys.argv[2]):
        m = re.match(r"\[(\d+\.\d+)\]\s+\[(\w+)\]", e)
        if m:
            events.append((float(m.group(1)), m.group(2), re.findall(r"src=(\S+)", e), "UNREPLIED" in e))
except OSError:
    pass
def target(t):
    new = [e for e in events if e[1] == "NEW" and t <= e[0] < t + 0.2 and len(e[2]) > 1]
    return new[0][2][1] if new else "? (no conntrack entry of its own)"
out = ["failed at: " + ", ".join(f"{hms(float(l[0]))} ({l[1]}, connected in {l[2] if len(l) > 2 else '?'} s, to {target(float(l[0]))})" for l in failed)]
since = float(failed[0][0]) - 1 if failed else 0
try:
    rules = [l.split(None, 1) for l in open(sys.argv[3]) if l.strip()]
    # From the targets in force a second before the first failure on.
    shown = rules[max((i for i, r in enumerate(rules) if float(r[0]) < since), default=0):]
    out.append("kube-proxy's DNAT targets: " + "; ".join(f"from {hms(float(r[0]))} {r[1].strip() if len(r) > 1 else '-'}" for r in shown))
except OSError:
    pass
gone = [e for e in events if e[1] == "DESTROY" and e[3]]
out.append(f"unanswered connections destroyed: {len(gone)}" + (f" (the last at {hms(gone[-1][0])}, to {gone[-1][2][1] if len(gone[-1][2]) > 1 else '?'})" if gone else ""))
print("; ".join(out))
PY
}
# node_cache_metric SERIES: a value from sh-1's proxy's /metrics.
node_cache_metric() { in_node sh-1 curl -sf http://127.0.0.1:51007/metrics | awk -v m="sitegrid_proxy_$1" '$1 == m {v = $2} END {print v + 0}'; }

# The runtime's view lags the API's by a PLEG period: wait until it has the app's pods.
# (A pod whose sandbox the runtime lists before its containers shows as "ns/name:": wait for them.)
settled() { [[ ! $1 =~ :( |$) ]]; }
apps_running() { local r; r=$(running sh-1); settled "$r" && [[ $r == *default/edge-app-* && $(grep -o 'deploymentgrid-demo-shanghai-' <<<"$r" | wc -l) == 2 ]]; }
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
# A kubeconfig of ServiceAccount kube-system/sitegrid-proxy (its token), as README "Node
# cache" says for /etc/sitegrid/upstream.kubeconfig.
sa_secret=$(kubectl -n kube-system get sa sitegrid-proxy -o jsonpath='{.secrets[0].name}')
SA_TOKEN=$(kubectl -n kube-system get secret "$sa_secret" -o jsonpath='{.data.token}' | base64 -d)
CLUSTER_CA=$(kubectl -n kube-system get secret "$sa_secret" -o jsonpath='{.data.ca\.crt}')
# token_kubeconfig SERVER CA [CLIENT_CERT CLIENT_KEY]: reaches SERVER trusting CA (base64) with
# the ServiceAccount's token (and a client certificate, which a site proxy's TLS asks for).
token_kubeconfig() {
    local client=
    [[ -z ${3:-} ]] || client="client-certificate-data: \"$(base64 -w0 "$3")\", client-key-data: \"$(base64 -w0 "$4")\", "
    cat <<KC
apiVersion: v1
kind: Config
clusters: [{name: default, cluster: {server: "$1", certificate-authority-data: "$2"}}]
users: [{name: sitegrid-proxy, user: {${client}token: "$SA_TOKEN"}}]
contexts: [{name: default, context: {cluster: default, user: sitegrid-proxy}}]
current-context: default
KC
}
ds_proxy_on() { kubectl -n kube-system get pods -l app=sitegrid-proxy --field-selector "spec.nodeName=$1" -o name; }
proxy_serving() { in_node "$1" curl -sf http://127.0.0.1:51007/healthz >/dev/null; }
# node_cache NODE [SITE_PROXY]: README "Node cache" on NODE: the label (the DaemonSet's pod
# leaves), the static pod's files and manifest, the kubelet restarted reading through it. With
# SITE_PROXY (an address), README's "site proxy at the site": the proxy's upstream is the site
# proxy (with NODE's client certificate of $SITE_PKI) and --kubelet-kubeconfig the API server.
node_cache() {
    local node=$1 site=${2:-} dir=$NODES_DIR/$1 upstream=upstream.kubeconfig
    kubectl label --overwrite node "$node" sitegrid.io/node-cache=true >/dev/null || fail "label $node for the node cache"
    expect_within 120 "sitegrid-proxy's DaemonSet pod on $node once it is labelled" "" ds_proxy_on "$node"
    mkdir -p "$dir/etc-sitegrid/tls" "$dir/etc-kubernetes/pki" "$dir/kubelet/pki"
    install -m 0440 "$CERTS/server.crt" "$dir/etc-sitegrid/tls/tls.crt"
    install -m 0440 "$CERTS/server.key" "$dir/etc-sitegrid/tls/tls.key"
    install -m 0440 "$CERTS/ca.crt" "$dir/etc-sitegrid/tls/ca.crt"
    # The cluster's CA, and the kubelet's certificate and key where a rotating kubelet keeps them.
    install -m 0444 "$SITEGRID_E2E_RUN/pki/ca.crt" "$dir/etc-kubernetes/pki/ca.crt"
    (umask 0177; cat "$SITEGRID_E2E_RUN/pki/node-$node.crt" "$SITEGRID_E2E_RUN/pki/node-$node.key" >"$dir/kubelet/pki/kubelet-client-current.pem")
    [[ -z $site ]] || upstream=kubelet-upstream.kubeconfig
    (umask 0177
        token_kubeconfig https://192.0.2.1:6443 "$CLUSTER_CA" >"$dir/etc-sitegrid/$upstream"
        [[ -z $site ]] || token_kubeconfig "https://$site:51006" "$(base64 -w0 "$SITE_PKI/ca.crt")" \
            "$SITE_PKI/$node.crt" "$SITE_PKI/$node.key" >"$dir/etc-sitegrid/upstream.kubeconfig")
    # As README "Node cache" says, with the node cache's own lines in the log (kept with the
    # suite's logs); behind a site proxy with the flag and the file the manifest's comment adds.
    local manifest=$dir/etc-kubernetes/manifests/sitegrid-proxy-node-cache.yaml
    # The node's boot id, which the nodes' shared kernel does not change: node_boot's (nodes.sh).
    sed 's|    - --data-dir=/var/lib/sitegrid-proxy|&\n    - --log-level=info,sitegrid_nodecache=debug\n    - --boot-id-file=/var/lib/sitegrid-proxy/boot_id|' \
        "$SITEGRID_E2E_ROOT/deploy/static/sitegrid-proxy-node-cache.yaml" >"$manifest.tmp" || fail "the static pod"
    if [[ -n $site ]]; then
        sed -i -e 's|^    - --kubeconfig=/etc/sitegrid/upstream.kubeconfig$|&\n    - --kubelet-kubeconfig=/etc/sitegrid/kubelet-upstream.kubeconfig|' \
            -e 's|^    - {name: upstream, mountPath: /etc/sitegrid/upstream.kubeconfig, readOnly: true}$|&\n    - {name: kubelet-upstream, mountPath: /etc/sitegrid/kubelet-upstream.kubeconfig, readOnly: true}|' \
            -e 's|^  - {name: upstream, hostPath: {path: /etc/sitegrid/upstream.kubeconfig, type: File}}$|&\n  - {name: kubelet-upstream, hostPath: {path: /etc/sitegrid/kubelet-upstream.kubeconfig, type: File}}|' \
            "$manifest.tmp"
        [[ $(grep -v "^#" "$manifest.tmp" | grep -c kubelet-upstream) == 3 ]] || fail "the static pod behind a site proxy: the manifest changed shape"
    fi
    mv "$manifest.tmp" "$manifest"
    retry 90 proxy_serving "$node" || fail "the node cache's proxy never served on $node (its container's log in $node's /var/log/pods)"
    cp "$SITEGRID_E2E_ROOT/deploy/static/kubelet.kubeconfig" "$dir/kubelet.kubeconfig"
    node_kubelet_restart "$node"
}
node_cache sh-1
SH=$NODES_DIR/sh-1
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
retry 60 proxy_serving sh-1 || fail "the restarted proxy does not serve"
proxy_back=$((SECONDS - killed_at))
# Every container that ran still runs but the proxy's own (replaced).
gone=$(comm -23 <(echo "$tasks_before") <(node_ctr sh-1 tasks ls -q | sort) | grep -c .)
expect "containers gone when the proxy was killed (the proxy's)" "$gone" 1
retry 60 all_back sh-1 "$SH_PODS" || fail "after the proxy crash: pods running '$(running sh-1)'"
echo "figures: node cache, proxy killed on sh-1: back in ${proxy_back} s (restarted by the kubelet from its manifest), $n_pods of $n_pods pods running throughout"

# --- beijing: a site proxy at the site (docs/placements.md, placement 2) -----------------
# On bj-2, as a host process (proxy/README.md, "Thousands of nodes: site proxies": a fixed node
# of the site, an address that does not depend on kube-proxy), serving the site's union; both
# nodes' proxies with the node cache read it (README "Node cache", with a site proxy).
SITE_PKI=$WORK/beijing-pki
mkdir -p "$SITE_PKI" && cp "$CERTS/ca.crt" "$CERTS/ca.key" "$SITE_PKI/"
"$SITEGRID_CERTS_BIN" --out "$SITE_PKI" server --ip 192.0.2.12 >/dev/null || fail "the site proxy's serving certificate"
for n in bj-1 bj-2; do
    "$SITEGRID_CERTS_BIN" --out "$SITE_PKI" client "$n" --user "sitegrid:node-proxy:$n" --group sitegrid:site:beijing >/dev/null ||
        fail "$n's certificate for the site proxy"
done
BJ2=$NODES_DIR/bj-2
mkdir -p "$BJ2/site-proxy/data" "$BJ2/host-bin"
real_image_file sitegrid-proxy /usr/local/bin/sitegrid-proxy "$BJ2/host-bin/sitegrid-proxy"
# Its clients: the node proxies (the site's certificates) and, with their offline reports, the
# site's kubelets (the cluster's CA).
cat "$SITE_PKI/ca.crt" "$SITEGRID_E2E_RUN/pki/ca.crt" >"$BJ2/site-proxy/clients-ca.crt"
(umask 0177; token_kubeconfig https://192.0.2.1:6443 "$CLUSTER_CA" >"$BJ2/site-proxy/upstream.kubeconfig")
node_spawn bj-2 beijing-site-proxy "$BJ2/host-bin/sitegrid-proxy" --site-selector location=beijing \
    --kubeconfig "$BJ2/site-proxy/upstream.kubeconfig" --bind-address 192.0.2.12:51006 \
    --cert-file "$SITE_PKI/server.crt" --key-file "$SITE_PKI/server.key" --ca-file "$BJ2/site-proxy/clients-ca.crt" \
    --metrics-bind-address 192.0.2.12:51007 --data-dir "$BJ2/site-proxy/data"
site_proxy_ready() { in_node bj-2 curl -sf http://192.0.2.12:51007/readyz >/dev/null; }
retry 60 site_proxy_ready || fail "beijing's site proxy never ready (beijing-site-proxy-bj-2.log)"
# Both labelled at once: their DaemonSet pods leave together.
kubectl label node bj-1 bj-2 sitegrid.io/node-cache=true >/dev/null || fail "label beijing's nodes for the node cache"
for n in bj-1 bj-2; do node_cache "$n" 192.0.2.12; done
# static_proxy NODE: NODE runs its static sitegrid-proxy pod and no other.
static_proxy() { local r; r=$(running "$1"); settled "$r" && [[ $r == *"kube-system/sitegrid-proxy-$1:proxy"* && $(grep -o 'kube-system/sitegrid-proxy-' <<<"$r" | wc -l) == 1 ]]; }
retry 120 static_proxy bj-1 || fail "bj-1 through the node cache: pods running '$(running bj-1)'"
retry 120 in_site bj-2 beijing || fail "bj-2 behind the site proxy: the ClusterIP answered '$(ask_from bj-2)', not by a pod of beijing"
BJ_PODS=$(running bj-1)

# --- sh-1 rebooted offline with the node cache -------------------------------------------
sh_rules=$(dnat_targets sg-sh-1 servicegrid-demo-svc)
[[ -n $sh_rules ]] || fail "sh-1's kube-proxy has no DNAT rule for servicegrid-demo-svc"
node_power_off sh-1
node_cut sh-1
off_at=$(date +%s.%N)
asker=$(start_asker sh-1 "$SITEGRID_E2E_LOGS/asks-sh-1.log")
node_boot sh-1
retry 180 all_back sh-1 "$SH_PODS" || fail "sh-1 rebooted offline: pods running '$(running sh-1)', want '$SH_PODS'"
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
retry 60 in_site sh-1 shanghai || fail "sh-1 offline: the ClusterIP answered '$(ask_from sh-1)', not by a pod of shanghai"
answered=$(since_kubelet sh-1)
echo "figures: offline reboot with the node cache: the ClusterIP answered in the site ${answered} s after the kubelet started, by the restarted pods at their new addresses"
sleep 20
ready=$(ready_at shanghai "$off_at" $(static_proxy_logs sh-1))
[[ -n $ready ]] || fail "sh-1's proxy took no Ready status of shanghai's pods from the kubelet offline"
read -r late sent failed other slow slowest <<<"$(stale_after "$asker" "$SITEGRID_E2E_LOGS/asks-sh-1.log" shanghai "$ready")"
echo "figures: offline reboot, stale endpoints: $(stale_figures)"
expect "answers from another site" "$other" 0
((failed == 0)) || fail "requests failed once the restarted pods answered: $failed ($(unanswered "$SITEGRID_E2E_LOGS/asks-sh-1.log" shanghai))"
sh_after=$(dnat_targets sg-sh-1 servicegrid-demo-svc)
no_old "$sh_rules" "$sh_after" || fail "sh-1's kube-proxy still sends to an old address: before '$sh_rules', after '$sh_after'"
no_old_since_boot "$sh_rules" "$SITEGRID_E2E_LOGS/asks-sh-1.rules" || fail "sh-1's kube-proxy sent to an old address after the reboot: before '$sh_rules', since: $(paste -sd';' "$SITEGRID_E2E_LOGS/asks-sh-1.rules")"
echo "figures: offline reboot, stale endpoints: sh-1's kube-proxy DNAT rules for the ServiceGrid before: $sh_rules; after: $sh_after"
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
# --- meanwhile beijing: the site cut from the cloud, bj-1 rebooted offline ------------------
# Each of its nodes asks the ClusterIP throughout; only bj-1's kubelet knows its pods' new
# addresses, and bj-2's kube-proxy learns them from the site proxy, which bj-1's proxy told.
bj_rules=$(dnat_targets sg-bj-2 servicegrid-demo-svc)
[[ -n $bj_rules ]] || fail "bj-2's kube-proxy has no DNAT rule for servicegrid-demo-svc"
node_cut bj-2
node_power_off bj-1
node_cut bj-1
off_at=$(date +%s.%N)
bj1_asker=$(start_asker bj-1 "$SITEGRID_E2E_LOGS/asks-bj-1.log")
bj2_asker=$(start_asker bj-2 "$SITEGRID_E2E_LOGS/asks-bj-2.log")
node_boot bj-1
retry 180 all_back bj-1 "$BJ_PODS" || fail "bj-1 rebooted offline: pods running '$(running bj-1)', want '$BJ_PODS'"
for n in bj-1 bj-2; do
    retry 60 in_site "$n" beijing || fail "$n, bj-1 rebooted offline: the ClusterIP answered '$(ask_from "$n")', not by a pod of beijing"
done
sleep 20
ready=$(ready_at beijing "$off_at" $(static_proxy_logs bj-1))
[[ -n $ready ]] || fail "bj-1's proxy took no Ready status of beijing's pods from the kubelet offline"
for n in bj-1 bj-2; do
    asker=$bj1_asker
    [[ $n == bj-1 ]] || asker=$bj2_asker
    read -r late sent failed other slow slowest <<<"$(stale_after "$asker" "$SITEGRID_E2E_LOGS/asks-$n.log" beijing "$ready")"
    echo "figures: offline reboot of bj-1 behind beijing's site proxy, stale endpoints on $n: $(stale_figures)"
    expect "answers from another site on $n" "$other" 0
    ((failed == 0)) || fail "requests failed on $n once bj-1's restarted pods answered: $failed ($(unanswered "$SITEGRID_E2E_LOGS/asks-$n.log" beijing))"
done
bj_after=$(dnat_targets sg-bj-2 servicegrid-demo-svc)
[[ -n $bj_after ]] && no_old "$bj_rules" "$bj_after" ||
    fail "bj-2's kube-proxy after bj-1's offline reboot: before '$bj_rules', after '$bj_after'"
echo "figures: offline reboot of bj-1, stale endpoints: bj-2's kube-proxy DNAT rules for the ServiceGrid before: $bj_rules; after: $bj_after"
readyz=$(in_node bj-2 curl -s http://192.0.2.12:51007/readyz)
[[ $readyz == *"offline reports of their pods are served"* ]] || fail "beijing's site proxy offline: /readyz '$readyz'"
node_uncut bj-1
node_uncut bj-2

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
service_rules=$(dnat_targets sg-sh-1 servicegrid-demo-svc)
[[ -n $service_rules ]] || fail "sh-1's kube-proxy has no DNAT rule for servicegrid-demo-svc (host service)"
n_service=$(wc -w <<<"$SERVICE_PODS")
node_power_off sh-1
rm "$SH/etc-kubernetes/manifests/sitegrid-proxy-node-cache.yaml"
mkdir -p "$SH/host-bin" && real_image_file sitegrid-proxy /usr/local/bin/sitegrid-proxy "$SH/host-bin/sitegrid-proxy"
cp "$SITEGRID_E2E_ROOT/deploy/static/sitegrid-proxy.service" "$SH/sitegrid-proxy.service"
printf 'NODE_NAME=sh-1\nSITEGRID_BOOT_ID_FILE=/var/lib/sitegrid-proxy/boot_id\n' >"$SH/etc-sitegrid/proxy.env"
node_cut sh-1
off_at=$(date +%s.%N)
asker=$(start_asker sh-1 "$SITEGRID_E2E_LOGS/asks-sh-1-service.log")
node_boot sh-1
retry 180 all_back sh-1 "$SERVICE_PODS" || fail "sh-1 rebooted offline, the proxy a host service: pods running '$(running sh-1)', want '$SERVICE_PODS'"
service_reboot=$(since_services sh-1)
echo "figures: offline reboot with the node cache as a host service: $n_service of $n_service pods Running ${service_reboot} s after the proxy and the kubelet were started (as a static pod: ${offline_reboot} s; online reboot without it: ${online_reboot} s)"
retry 60 in_site sh-1 shanghai || fail "sh-1 offline, the proxy a host service: the ClusterIP answered '$(ask_from sh-1)', not by a pod of shanghai"
sleep 20
ready=$(ready_at shanghai "$off_at" "$SITEGRID_E2E_LOGS/sitegrid-proxy-sh-1.log")
[[ -n $ready ]] || fail "sh-1's host service took no Ready status of shanghai's pods from the kubelet offline"
read -r late sent failed other slow slowest <<<"$(stale_after "$asker" "$SITEGRID_E2E_LOGS/asks-sh-1-service.log" shanghai "$ready")"
echo "figures: offline reboot as a host service, stale endpoints: $(stale_figures)"
expect "answers from another site (host service)" "$other" 0
((failed == 0)) || fail "requests failed once the restarted pods answered (host service): $failed ($(unanswered "$SITEGRID_E2E_LOGS/asks-sh-1-service.log" shanghai))"
no_old_since_boot "$service_rules" "$SITEGRID_E2E_LOGS/asks-sh-1-service.rules" ||
    fail "sh-1's kube-proxy sent to an old address after the reboot (host service): before '$service_rules', since: $(paste -sd';' "$SITEGRID_E2E_LOGS/asks-sh-1-service.rules")"
node_uncut sh-1

echo "figures: node cache on disk: $(du -sb "$SH/sitegrid-proxy/node-cache" | cut -f1) bytes for $n_pods pods; the proxy's RSS $(awk '/^VmRSS/ {printf "%.1f MiB", $2 / 1024}' "/proc/$(proxy_pid)/status")"

real_back
