# Helpers for scenarios (sourced by run.sh in a subshell, with `set -euo pipefail`)
# and the figure scripts: sitegrid's processes, kube-proxy in network
# namespaces, pods, metrics. Waiting, expecting and process tracking are
# harness.sh's.
# shellcheck shell=bash
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

# start_proxy NODE PORT [FLAGS...]: a sitegrid-proxy for NODE on 127.0.0.1:PORT with
# kube-proxy's credentials ($PROXY_KUBECONFIG instead, when set), its snapshot in
# $SITEGRID_E2E_RUN/proxy-data/NODE-PORT, and FLAGS; waits until it serves every cached
# kind (of Nodes, its own, as kube-proxy lists it).
start_proxy() {
    local node=$1 port=$2
    shift 2
    "$SITEGRID_PROXY_BIN" --kubeconfig "${PROXY_KUBECONFIG:-$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG}" --hostname "$node" \
        --bind-address "127.0.0.1:$port" --data-dir "$SITEGRID_E2E_RUN/proxy-data/$node-$port" \
        --log-level "${PROXY_LOG_LEVEL:-info}" "$@" >>"$SITEGRID_E2E_LOGS/proxy-$node.log" 2>&1 &
    track $!
    proxy_serves "$port" "proxy for $node" "/api/v1/nodes?fieldSelector=metadata.name%3D$node&limit=1"
}

# start_site_proxy SELECTOR PORT [FLAGS...]: a site proxy (--site-selector SELECTOR) on
# 127.0.0.1:PORT with the proxies' credentials, answering its node proxies' passthrough
# without credentials too (loopback only); waits until it serves the endpoint kinds.
start_site_proxy() {
    local selector=$1 port=$2
    shift 2
    "$SITEGRID_PROXY_BIN" --kubeconfig "${PROXY_KUBECONFIG:-$SITEGRID_E2E_KUBE_PROXY_KUBECONFIG}" \
        --site-selector "$selector" --anonymous-passthrough=all \
        --bind-address "127.0.0.1:$port" --data-dir "$SITEGRID_E2E_RUN/proxy-data/site-$port" \
        --log-level "${PROXY_LOG_LEVEL:-info}" "$@" >>"$SITEGRID_E2E_LOGS/proxy-site-$port.log" 2>&1 &
    track $!
    proxy_serves "$port" "site proxy $selector"
}

# proxy_serves PORT WHAT [PATH...]: waits until the proxy at PORT answers Services,
# Endpoints, EndpointSlices and PATHs.
proxy_serves() {
    local port=$1 what=$2 path
    shift 2
    for path in /api/v1/services?limit=1 /api/v1/endpoints?limit=1 /apis/discovery.k8s.io/v1beta1/endpointslices?limit=1 "$@"; do
        retry 30 curl -sf -o /dev/null "http://127.0.0.1:$port$path" || fail "$what does not serve $path"
    done
}

# listener_pid PORT: the PID of the process listening on 127.0.0.1:PORT.
listener_pid() { ss -ltnpH "sport = :$1" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1; }

# slice_ips URL: the sorted endpoint addresses of servicegrid-demo-svc's slices at URL (a proxy or the apiserver).
slice_ips() {
    kubectl --server "$1" get --raw /apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices \
        | python3 -c 'import json,sys
items=json.load(sys.stdin)["items"]
print(" ".join(sorted(a for i in items if i["metadata"]["labels"].get("kubernetes.io/service-name")=="servicegrid-demo-svc"
    for e in i["endpoints"] or [] for a in e["addresses"])))'
}

# endpoints_ips URL SERVICE: the sorted ready addresses of SERVICE's Endpoints at URL.
endpoints_ips() {
    kubectl --server "$1" get --raw "/api/v1/namespaces/default/endpoints/$2" \
        | python3 -c 'import json,sys
o=json.load(sys.stdin)
print(" ".join(sorted(a["ip"] for s in o.get("subsets") or [] for a in s.get("addresses") or [])))'
}

# --- pods: this suite plays kubelet ---------------------------------------------

# add_ready_pod NAME NODE IP [LABELS]: a pod bound to NODE, Running and Ready at IP (as
# sample.sh makes them); LABELS (YAML flow map) default to {appGrid: echo}, the
# servicegrid-demo-svc pods'.
add_ready_pod() {
    local name=$1 node=$2 ip=$3 labels=${4:-"{appGrid: echo}"} now host_ip
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    host_ip=$(kubectl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default, labels: $labels}
spec:
  nodeName: $node
  automountServiceAccountToken: false
  containers: [{name: main, image: "superedge/echoserver:2.2", ports: [{containerPort: 8080}]}]
POD
    kubectl patch pod "$name" --subresource=status --type=merge -p "$(pod_status "$host_ip" "$ip" True "$now")" >/dev/null
}

# set_pod_ready NAME True|False: flip the pod's readiness through the status subresource (what a kubelet's probe does).
set_pod_ready() {
    local ip host_ip
    ip=$(kubectl get pod "$1" -o jsonpath='{.status.podIP}')
    host_ip=$(kubectl get pod "$1" -o jsonpath='{.status.hostIP}')
    kubectl patch pod "$1" --subresource=status --type=merge \
        -p "$(pod_status "$host_ip" "$ip" "$2" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" >/dev/null
}

# pod_status HOST_IP POD_IP READY TIME [IMAGE]: the status a kubelet writes for a running pod.
pod_status() {
    local host_ip=$1 ip=$2 ready=$3 now=$4 image=${5:-superedge/echoserver:2.2} bool=false
    [[ $ready == True ]] && bool=true
    cat <<STATUS
{"status": {"phase": "Running", "hostIP": "$host_ip", "podIP": "$ip", "podIPs": [{"ip": "$ip"}], "startTime": "$now",
  "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": "$now"},
    {"type": "ContainersReady", "status": "$ready", "lastTransitionTime": "$now"},
    {"type": "Ready", "status": "$ready", "lastTransitionTime": "$now"},
    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "$now"}],
  "containerStatuses": [{"name": "main", "ready": $bool, "started": true, "restartCount": 0,
    "image": "$image", "imageID": "", "state": {"running": {"startedAt": "$now"}}}]}}
STATUS
}

# delete_pod NAME: gone at once (no kubelet would confirm a graceful deletion).
delete_pod() { kubectl delete pod "$1" --grace-period=0 --force --ignore-not-found >/dev/null 2>&1; }

# --- kube-proxy in a network namespace per node ---------------------------------
# Namespace sg-NODE has only `lo`, carrying 127.0.0.1 and the node's InternalIP.
# kube-proxy there reaches a listener on the host's 127.0.0.1:PORT through a
# unix-socket bridge (socat on each side), so its traffic stays on loopback.
# The harness's cleanup deletes every sg-* namespace when the script ends.

# node_netns NODE: (re)create sg-NODE with lo up and NODE's InternalIP on it; prints the namespace.
node_netns() {
    local ns=sg-$1 ip
    ip=$(kubectl get node "$1" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    [[ -n $ip ]] || fail "node $1 has no InternalIP"
    ip netns delete "$ns" 2>/dev/null || true
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$ip/32" dev lo
    mkdir -p "$SITEGRID_E2E_RUN/netns"
    echo "$ns"
}

# netns_bridge NS PORT: 127.0.0.1:PORT inside NS forwards to 127.0.0.1:PORT on the host.
netns_bridge() {
    local ns=$1 port=$2 sock=$SITEGRID_E2E_RUN/netns/$1-$2.sock
    socat "UNIX-LISTEN:$sock,fork,unlink-early" "TCP:127.0.0.1:$port" 2>>"$SITEGRID_E2E_LOGS/socat-$ns.log" &
    track $! "$ns"
    retry 5 test -S "$sock" || fail "bridge socket $sock"
    ip netns exec "$ns" socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$sock" \
        2>>"$SITEGRID_E2E_LOGS/socat-$ns.log" &
    track $! "$ns"
    retry 5 ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" || fail "bridge $ns:$port"
}

# start_kube_proxy NODE PORT GATES [KUBECONFIG]: kube-proxy 1.20 in iptables mode for NODE in a fresh sg-NODE,
# with --feature-gates=GATES, talking to the host's 127.0.0.1:PORT: by default a sitegrid-proxy in plain
# HTTP (no credentials: the proxy authenticates upstream itself); KUBECONFIG must then name 127.0.0.1:PORT.
# Returns once kube-proxy has written its first rules.
start_kube_proxy() {
    local node=$1 port=$2 gates=$3 kubeconfig=${4:-} ns
    ns=$(node_netns "$node")
    netns_bridge "$ns" "$port"
    if [[ -z $kubeconfig ]]; then
        kubeconfig=$SITEGRID_E2E_RUN/netns/$ns.kubeconfig
        plain_kubeconfig "$port" >"$kubeconfig"
    fi
    run_kube_proxy "$node" "$gates" "$kubeconfig"
}

# plain_kubeconfig PORT: a kubeconfig for http://127.0.0.1:PORT without credentials.
plain_kubeconfig() {
    cat <<KC
apiVersion: v1
kind: Config
clusters: [{name: sitegrid-proxy, cluster: {server: "http://127.0.0.1:$1"}}]
users: [{name: kube-proxy, user: {}}]
contexts: [{name: sitegrid-proxy, context: {cluster: sitegrid-proxy, user: kube-proxy}}]
current-context: sitegrid-proxy
KC
}

# run_kube_proxy NODE GATES KUBECONFIG: kube-proxy 1.20 in iptables mode for NODE in the existing
# sg-NODE, with --feature-gates=GATES and KUBECONFIG as it is; sets KUBE_PROXY_PID and returns
# once kube-proxy has written its first rules.
run_kube_proxy() {
    local node=$1 gates=$2 kubeconfig=$3 ns=sg-$1 log=$SITEGRID_E2E_LOGS/kube-proxy-$1.log
    echo "==== $(date -u +%T) kube-proxy $node --feature-gates=$gates with $kubeconfig" >>"$log"
    # No kubelet and no conntrack tuning: leave the namespace's conntrack limits and timeouts
    # as they are; health and metrics only on the namespace's loopback.
    ip netns exec "$ns" "$SITEGRID_K8S_BIN/kube-proxy" --kubeconfig="$kubeconfig" \
        --hostname-override="$node" --proxy-mode=iptables --cluster-cidr=10.0.0.0/16 \
        --feature-gates="$gates" --oom-score-adj=0 \
        --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
        --healthz-bind-address=127.0.0.1:10256 --metrics-bind-address=127.0.0.1:10249 \
        >>"$log" 2>&1 &
    # shellcheck disable=SC2034 # for the calling scenario
    KUBE_PROXY_PID=$!
    track $! "$ns"
    # The first sync writes the rules of default/kubernetes.
    retry 30 dnat_synced "$ns" || fail "kube-proxy for $node wrote no rules (see $log)"
}

dnat_synced() { ip netns exec "$1" iptables-save -t nat | has -- '-A KUBE-SERVICES .*default/kubernetes'; }

# dnat_targets NS SERVICE: the sorted `--to-destination`s of the DNAT rules kube-proxy wrote in NS for
# default/SERVICE (any port), space-separated.
dnat_targets() {
    ip netns exec "$1" iptables-save -t nat \
        | awk -v svc="default/$2" '/ -j DNAT / {
            c = ""; d = ""
            for (i = 1; i < NF; i++) {
                if ($i == "--comment") c = $(i + 1)
                if ($i == "--to-destination") d = $(i + 1)
            }
            gsub(/"/, "", c); sub(/:[^:]*$/, "", c) # "default/svc:port-name" when the port is named
            if (c == svc) print d
          }' \
        | sort -u | paste -sd' '
}

# stop_node NODE: stop what start_kube_proxy started for NODE (kube-proxy first) and delete sg-NODE.
stop_node() {
    stop_group "sg-$1"
    ip netns delete "sg-$1" 2>/dev/null || true
}

# proxy_metric PORT SERIES: the value of sitegrid_proxy_SERIES on the proxy at PORT (0 if absent),
# e.g. proxy_metric 25211 'watchers_open{resource="endpoints"}'.
proxy_metric() {
    curl -sf "http://127.0.0.1:$1/metrics" | awk -v m="sitegrid_proxy_$2" '$1 == m {v = $2} END {print v + 0}'
}

# more_than N CMD...: CMD prints a number above N.
more_than() {
    local n=$1 got
    shift
    got=$("$@") && [[ $got =~ ^[0-9]+$ ]] && ((got > n))
}

# start_controller NAME PORT [FLAGS...]: a sitegrid-controller replica with the
# permissions of deploy/controller/rbac.yaml (user sitegrid-controller), its
# /healthz, /readyz and /metrics on 127.0.0.1:PORT; waits until it answers.
start_controller() {
    local name=$1 port=$2
    shift 2
    "$SITEGRID_CONTROLLER_BIN" --kubeconfig "$SITEGRID_E2E_RUN/sitegrid-controller.kubeconfig" \
        --bind-address "127.0.0.1:$port" --leader-elect-identity "$name" "$@" \
        >"$SITEGRID_E2E_LOGS/controller-$name.log" 2>&1 &
    track $!
    eval "CONTROLLER_PID_${name//-/_}=$!"
    retry 30 curl -sf "http://127.0.0.1:$port/healthz" || fail "controller $name does not answer /healthz"
}

# controller_metric PORT SERIES: the value of sitegrid_controller_SERIES at PORT (0 if absent);
# a series without labels sums over all of them, e.g. controller_metric 18081 api_writes_total.
controller_metric() {
    curl -sf "http://127.0.0.1:$1/metrics" |
        awk -v m="sitegrid_controller_$2" '$1 == m || index($1, m "{") == 1 {v += $2} END {print v + 0}'
}

# controller_writes PORT: the API writes the controller at PORT made so far.
controller_writes() { controller_metric "$1" api_writes_total; }

# quiet_for_30s PORT: no write by the controller at PORT during the next 30 s.
quiet_for_30s() { local w; w=$(controller_writes "$1"); sleep 30; [[ $(controller_writes "$1") == "$w" ]]; }

# settle_writes PORT: wait (up to 600 s) for such a quiet 30 s; prints how long that took.
settle_writes() {
    local start=$SECONDS
    retry 600 quiet_for_30s "$1" || fail "writes never settled"
    echo "figures: settled after $((SECONDS - start)) s"
}

# add_node NAME LABEL=VALUE...: a Ready node (API object only, as sample.sh makes them).
add_node() {
    local name=$1 now
    shift
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    kubectl create -f - >/dev/null <<EON
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {kubernetes.io/hostname: $name}
EON
    kubectl label node "$name" "$@" >/dev/null
    kubectl patch node "$name" --subresource=status --type=merge -p "{\"status\": {
      \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"KubeletReady\",
                      \"lastHeartbeatTime\": \"$now\", \"lastTransitionTime\": \"$now\"}],
      \"capacity\": {\"cpu\": \"4\", \"memory\": \"8Gi\", \"pods\": \"110\"},
      \"allocatable\": {\"cpu\": \"4\", \"memory\": \"8Gi\", \"pods\": \"110\"}}}" >/dev/null
}

# jget KIND NAME JSONPATH: one field of an object in namespace default ('' if absent).
jget() { kubectl get "$1" "$2" -o "jsonpath=$3" 2>/dev/null || true; }

# exists KIND NAME: the object exists.
exists() { kubectl get "$1" "$2" -o name >/dev/null 2>&1; }

# gone KIND NAME: the object does not exist.
gone() { ! exists "$1" "$2"; }

# crds_established CRD...: every CRD named (crd/NAME) is Established, within 30 s. kubectl wait
# alone fails at once, without waiting, on a CRD the API server has not given a condition yet
# (".status.conditions accessor error: <nil>", as right after the apply; it failed scenario 81
# so in a full run), so it is asked again until it can wait.
crds_established() { retry 30 kubectl wait --for condition=established --timeout=5s "$@"; }

# install_controller_prereqs: the grid CRDs (from the binary), deploy/controller/rbac.yaml,
# also bound to user sitegrid-controller, and that user's certificate and kubeconfig
# (what start_controller runs with).
install_controller_prereqs() {
    local rbac=$SITEGRID_E2E_ROOT/deploy/controller/rbac.yaml subject
    "$SITEGRID_CONTROLLER_BIN" crds | kubectl apply -f - >/dev/null
    crds_established crd/deploymentgrids.superedge.io crd/statefulsetgrids.superedge.io \
        crd/servicegrids.superedge.io || fail "the grid CRDs not established"
    kubectl apply -f "$rbac" >/dev/null
    subject='[{"op":"add","path":"/subjects/-","value":{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"sitegrid-controller"}}]'
    kubectl patch clusterrolebinding sitegrid-controller --type=json -p "$subject" >/dev/null
    kubectl -n kube-system patch rolebinding sitegrid-controller-leader-election --type=json -p "$subject" >/dev/null
    "$SITEGRID_E2E_ROOT/deploy/e2e/cluster.sh" cert sitegrid-controller /CN=sitegrid-controller
    "$SITEGRID_E2E_ROOT/deploy/e2e/cluster.sh" kubeconfig sitegrid-controller
}

# --- sitegrid-dnsd -----------------------------------------------------------------

# install_dnsd_prereqs: deploy/dnsd/rbac.yaml, also bound to user sitegrid-dnsd, and
# that user's certificate and kubeconfig (what start_dnsd runs with).
install_dnsd_prereqs() {
    local subject='[{"op":"add","path":"/subjects/-","value":{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"sitegrid-dnsd"}}]'
    kubectl apply -f "$SITEGRID_E2E_ROOT/deploy/dnsd/rbac.yaml" >/dev/null
    kubectl patch clusterrolebinding sitegrid-dnsd --type=json -p "$subject" >/dev/null
    "$SITEGRID_E2E_ROOT/deploy/e2e/cluster.sh" cert sitegrid-dnsd /CN=sitegrid-dnsd
    "$SITEGRID_E2E_ROOT/deploy/e2e/cluster.sh" kubeconfig sitegrid-dnsd
}

# start_dnsd NODE PORT [FLAGS...]: a sitegrid-dnsd for NODE with exactly the permissions of
# deploy/dnsd/rbac.yaml (user sitegrid-dnsd), writing $SITEGRID_E2E_RUN/dnsd-NODE/hosts, with
# /readyz etc. on 127.0.0.1:PORT; returns once it is ready (its first file written).
# Tracked in group `dnsd`; its PID in $DNSD_PID_<NODE>.
start_dnsd() {
    local node=$1 port=$2 dir=$SITEGRID_E2E_RUN/dnsd-$1
    shift 2
    mkdir -p "$dir" && chmod 755 "$dir"
    "$SITEGRID_DNSD_BIN" --kubeconfig "$SITEGRID_E2E_RUN/sitegrid-dnsd.kubeconfig" --hostname "$node" \
        --hosts-file "$dir/hosts" --bind-address "127.0.0.1:$port" "$@" >"$SITEGRID_E2E_LOGS/dnsd-$node.log" 2>&1 &
    track $! dnsd
    eval "DNSD_PID_${node//-/_}=$!"
    retry 30 curl -sf "http://127.0.0.1:$port/readyz" || fail "dnsd for $node is not ready (see $SITEGRID_E2E_LOGS/dnsd-$node.log)"
}

# start_dnsmasq DIR PORT: Debian's dnsmasq answering from the hosts files in DIR (re-read on
# change, through inotify) on 127.0.0.1:PORT only: no upstream, no /etc/hosts, no DHCP, no
# configuration file. Tracked in group `dnsd`.
start_dnsmasq() {
    dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --pid-file \
        --hostsdir="$1" --listen-address=127.0.0.1 --bind-interfaces --port="$2" \
        --log-facility=- >>"$SITEGRID_E2E_LOGS/dnsmasq-$2.log" 2>&1 &
    track $! dnsd
    retry 10 dig +time=1 +tries=1 @127.0.0.1 -p "$2" probe.invalid || fail "dnsmasq on port $2 does not answer"
}

# run_bound_pod POD IP: play kubelet for POD (made by a controller, e.g. a StatefulSet's) once the
# scheduler has bound it: Running and Ready at IP.
run_bound_pod() {
    local pod=$1 node host_ip
    retry 60 bash -c "[[ -n \$(kubectl get pod $pod -o jsonpath='{.spec.nodeName}' 2>/dev/null) ]]" || fail "$pod never bound"
    node=$(kubectl get pod "$pod" -o jsonpath='{.spec.nodeName}')
    host_ip=$(kubectl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    kubectl patch pod "$pod" --subresource=status --type=merge \
        -p "$(pod_status "$host_ip" "$2" True "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" >/dev/null
}

# dig_ips PORT NAME: the sorted A answers for NAME from the DNS server on 127.0.0.1:PORT, space-separated.
dig_ips() { dig +short +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" A | sort -V | paste -sd' '; }

# hosts_records FILE: how many records (non-comment lines) a hosts file has.
hosts_records() { awk '!/^#/ {n++} END {print n + 0}' "$1"; }

# apiserver_writes RESOURCES: the API server's write requests so far (POST, PUT,
# PATCH, APPLY, DELETE) for the resources matching the regex RESOURCES, one
# "resource verb count" line each.
apiserver_writes() {
    kubectl get --raw /metrics | awk -v want="^($1)\$" '
        /^apiserver_request_total\{/ && /verb="(PATCH|DELETE|POST|PUT|APPLY)"/ {
            match($0, /resource="[^"]*"/); r = substr($0, RSTART + 10, RLENGTH - 11)
            if (r !~ want) next
            match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
            n[r " " v] += $2
        }
        END { for (k in n) print k, n[k] }' | sort
}

# writes_between BEFORE AFTER: "  resource/verb count" for each line of two
# apiserver_writes files whose count grew.
writes_between() {
    join -a2 -e0 -o '0,1.2,2.2' <(awk '{print $1"/"$2, $3}' "$1") <(awk '{print $1"/"$2, $3}' "$2") |
        awk '{d = $3 - $2; if (d > 0) printf "  %s %d\n", $1, d}'
}

# --- more control planes at once (scenario 70) ---------------------------------------
# An extra cluster NAME is cluster.sh in its own run folder, $SITEGRID_E2E_RUN-NAME,
# on its own ports; its processes are tracked in group cluster-NAME, so the
# harness stops them whatever happens.

# in_cluster KUBECONFIG CMD...: CMD (kubectl, or a helper of this file) against that cluster.
in_cluster() {
    local kc=$1
    shift
    KUBECONFIG=$kc "$@"
}

# extra_cluster_run NAME: the run folder of the extra cluster NAME (its admin kubeconfig is admin.kubeconfig there).
extra_cluster_run() { echo "$SITEGRID_E2E_RUN-$1"; }

# track_extra_cluster NAME: track the processes the pid files of NAME's run folder name (once each).
track_extra_cluster() {
    local group=$SITEGRID_E2E_LOGS/groups/cluster-$1 f pid
    for f in "$(extra_cluster_run "$1")"/pids/*.pid; do
        [[ -f $f ]] || continue
        pid=$(cat "$f")
        grep -qx "$pid" "$group" 2>/dev/null || track "$pid" "cluster-$1"
    done
}

# start_extra_cluster NAME "ETCD_CLIENT ETCD_PEER APISERVER CONTROLLER_MANAGER SCHEDULER": another
# control plane (cluster.sh up, with its own CA) on those loopback ports, after stopping what an
# earlier run left in its folder; cluster.sh's output in $SITEGRID_E2E_LOGS/cluster-NAME.log.
start_extra_cluster() {
    local name=$1 run rc=0
    run=$(extra_cluster_run "$name")
    SITEGRID_E2E_RUN=$run "$E2E_DIR/cluster.sh" down >/dev/null 2>&1 || true
    SITEGRID_E2E_RUN=$run SITEGRID_E2E_PORTS=$2 "$E2E_DIR/cluster.sh" up >"$SITEGRID_E2E_LOGS/cluster-$name.log" 2>&1 || rc=$?
    track_extra_cluster "$name"
    return "$rc"
}

# extra_cluster NAME ARGS...: cluster.sh ARGS on the extra cluster NAME (e.g. `stop apiserver`,
# `start apiserver`); what it starts is tracked too.
extra_cluster() {
    local name=$1
    shift
    SITEGRID_E2E_RUN=$(extra_cluster_run "$name") "$E2E_DIR/cluster.sh" "$@" >>"$SITEGRID_E2E_LOGS/cluster-$name.log" 2>&1 || return
    track_extra_cluster "$name"
}

# stop_extra_cluster NAME: its logs kept in $SITEGRID_E2E_LOGS/cluster-NAME/, then cluster.sh down
# (its run folder removed) and anything of it still tracked stopped.
stop_extra_cluster() {
    local run
    run=$(extra_cluster_run "$1")
    if [[ -d $run/logs ]]; then
        rm -rf "$SITEGRID_E2E_LOGS/cluster-$1" && cp -r "$run/logs" "$SITEGRID_E2E_LOGS/cluster-$1"
    fi
    SITEGRID_E2E_RUN=$run "$E2E_DIR/cluster.sh" down >>"$SITEGRID_E2E_LOGS/cluster-$1.log" 2>&1 || true
    stop_group "cluster-$1"
}

# start_controller_in KUBECONFIG NAME PORT [FLAGS...]: a sitegrid-controller with that kubeconfig
# (e.g. another cluster's admin), /healthz etc. on 127.0.0.1:PORT, log controller-NAME.log; tracked
# in group `controllers`, its PID in $CONTROLLER_PID_<NAME>; waits until it answers.
start_controller_in() {
    local kc=$1 name=$2 port=$3
    shift 3
    "$SITEGRID_CONTROLLER_BIN" --kubeconfig "$kc" --bind-address "127.0.0.1:$port" --leader-elect-identity "$name" "$@" \
        >"$SITEGRID_E2E_LOGS/controller-$name.log" 2>&1 &
    local pid=$!
    track $pid controllers
    eval "CONTROLLER_PID_${name//-/_}=$pid"
    retry 30 answers_or_exited "$pid" "http://127.0.0.1:$port/healthz"
    pid_running "$pid" || fail "controller $name exited: $(tail -n 3 "$SITEGRID_E2E_LOGS/controller-$name.log")"
    curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" || fail "controller $name does not answer /healthz (see $SITEGRID_E2E_LOGS/controller-$name.log)"
}

# answers_or_exited PID URL: URL answers, or process PID is gone (which ends a wait early).
answers_or_exited() { pid_gone "$1" || curl -sf -o /dev/null "$2"; }

# stop_tracked_controllers: stop, by PID, every sitegrid-controller an earlier scenario started and left running.
stop_tracked_controllers() {
    local pid
    [[ -f $SITEGRID_E2E_LOGS/pids ]] || return 0
    for pid in $(cat "$SITEGRID_E2E_LOGS/pids"); do
        pid_running "$pid" || continue
        [[ $(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1) == "$SITEGRID_CONTROLLER_BIN" ]] || continue
        stop_pid "$pid"
        sed -i "/^$pid\$/d" "$SITEGRID_E2E_LOGS/pids"
    done
}

# RUN_BOUND_PODS_SEQ: the last address run_bound_pods gave out.
RUN_BOUND_PODS_SEQ=0

# run_bound_pods PREFIX NET: play kubelet (Running and Ready, as run_bound_pod does) for every pod
# in namespace $PODS_NAMESPACE (default: default) named PREFIX* that the scheduler bound and that
# is neither Ready nor terminating, at addresses NET.1, NET.2, ... in turn (NET e.g. 10.1.0).
run_bound_pods() {
    local prefix=$1 net=$2 name node ready deleting host_ip ns=${PODS_NAMESPACE:-default}
    while IFS='|' read -r name node ready deleting; do
        [[ $name == "$prefix"* && -n $node && -z $deleting && $ready != True ]] || continue
        RUN_BOUND_PODS_SEQ=$((RUN_BOUND_PODS_SEQ + 1))
        host_ip=$(kubectl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
        kubectl -n "$ns" patch pod "$name" --subresource=status --type=merge \
            -p "$(pod_status "$host_ip" "$net.$RUN_BOUND_PODS_SEQ" True "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" >/dev/null || return 1
    done < <(kubectl -n "$ns" get pods -o jsonpath='{range .items[*]}{.metadata.name}|{.spec.nodeName}|{.status.conditions[?(@.type=="Ready")].status}|{.metadata.deletionTimestamp}{"\n"}{end}')
}

# deploy_ready DEPLOYMENT N NET: play kubelet for DEPLOYMENT's bound pods (run_bound_pods DEPLOYMENT- NET);
# true once it reports N ready replicas and N replicas in all (for retry).
deploy_ready() {
    run_bound_pods "$1-" "$3" || return 1
    [[ $(jget deploy "$1" '{.status.readyReplicas}/{.status.replicas}') == "$2/$2" ]]
}
