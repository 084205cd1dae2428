#!/usr/bin/env bash
# A Kubernetes 1.20 control plane on loopback for the end-to-end suite:
# etcd, kube-apiserver (TLS, RBAC, service-account keys), controller-manager
# and scheduler. No kubelets: sample.sh registers nodes as API objects and
# plays kubelet for pod status.
#
#   cluster.sh up        start everything, wait until it serves (bounded)
#   cluster.sh down      stop what `up` started (by PID) and remove the run folder
#   cluster.sh env       print `export ...` lines for scenarios (eval them)
#   cluster.sh cert NAME SUBJECT [SAN]   mint $RUN/pki/NAME.{crt,key} from the CA
#   cluster.sh kubeconfig NAME [SERVER]  write $RUN/NAME.kubeconfig for that cert
#   cluster.sh stop COMPONENT            stop one of etcd, apiserver, controller-manager, scheduler
#   cluster.sh start COMPONENT           start it again (as `up` did), wait until it serves
#
# Binaries come from install.sh's cache; everything else lives in $RUN.
#
# Several control planes can run at once, each with its own run folder and
# ports (and its own CA): SITEGRID_E2E_RUN=/tmp/other SITEGRID_E2E_PORTS="25301
# 25302 25303 25304 25305" cluster.sh up (etcd client, etcd peer, apiserver,
# controller-manager, scheduler). `up` records the ports in $RUN/ports, and
# every later command on that run folder uses them (SITEGRID_E2E_PORTS is only
# read by `up`, or when the folder has no record). Default: 2379 2380 6443
# 10257 10259, in /tmp/sitegrid-e2e.
set -euo pipefail

RUN=${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}
BIN=${SITEGRID_K8S_CACHE:-$HOME/.cache/sitegrid/k8s-1.20.2}/bin
ETCD=${SITEGRID_ETCD:-etcd}
WAIT=${SITEGRID_E2E_WAIT:-60}      # seconds, for every wait in this script
# Extra feature gates for apiserver and controller-manager, e.g.
# EndpointSliceNodeName=true (alpha in 1.20) to get v1beta1 `nodeName`.
FEATURE_GATES=${SITEGRID_E2E_FEATURE_GATES:-}

DEFAULT_PORTS="2379 2380 6443 10257 10259"
if [[ ${1:-} != up && -f $RUN/ports ]]; then
    read -r -a PORTS <"$RUN/ports"
else
    read -r -a PORTS <<<"${SITEGRID_E2E_PORTS:-$DEFAULT_PORTS}"
fi
if [[ ${#PORTS[@]} -ne 5 || ! ${PORTS[*]} =~ ^[0-9]+( [0-9]+){4}$ ]]; then
    echo "cluster: SITEGRID_E2E_PORTS must be 5 port numbers: etcd-client etcd-peer apiserver controller-manager scheduler (got '${PORTS[*]}')" >&2
    exit 1
fi
ETCD_CLIENT=${PORTS[0]} ETCD_PEER=${PORTS[1]} APISERVER_PORT=${PORTS[2]} CM_PORT=${PORTS[3]} SCHEDULER_PORT=${PORTS[4]}

APISERVER=https://127.0.0.1:$APISERVER_PORT
SERVICE_CIDR=10.96.0.0/16
# The apiserver refuses a loopback address for the `default/kubernetes`
# endpoints; 192.0.2.1 (TEST-NET-1) is never connected to.
ADVERTISE=192.0.2.1

PKI=$RUN/pki
LOGS=$RUN/logs
PIDS=$RUN/pids

E2E_NAME=cluster
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
die() { log "$*"; exit 1; }

# --- certificates -----------------------------------------------------------

make_ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=sitegrid-e2e-ca \
        -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
}

# cert NAME SUBJECT [SAN]: a leaf signed by the CA; with a SAN it is a
# serving certificate (usable as a client too), without one a client one.
cert() {
    local name=$1 subject=$2 san=${3:-} ext
    ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n $san ]]; then
        ext+=$'\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName='"$san"
    else
        ext+=$'\nextendedKeyUsage=clientAuth'
    fi
    openssl req -new -newkey rsa:2048 -nodes -subj "$subject" \
        -keyout "$PKI/$name.key" -out "$PKI/$name.csr" 2>/dev/null
    openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
        -CAcreateserial -days 30 -extfile <(printf '%s\n' "$ext") \
        -out "$PKI/$name.crt" 2>/dev/null
    rm -f "$PKI/$name.csr"
}

# kubeconfig NAME [SERVER]: $RUN/NAME.kubeconfig using $PKI/NAME.{crt,key},
# with the data embedded so the file works from anywhere (e.g. a netns).
kubeconfig() {
    local name=$1 server=${2:-$APISERVER}
    cat >"$RUN/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sitegrid-e2e
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: sitegrid-e2e
  context: {cluster: sitegrid-e2e, user: $name}
current-context: sitegrid-e2e
EOF
}

make_pki() {
    mkdir -p "$PKI"
    make_ca
    cert apiserver /CN=kube-apiserver \
        "IP:127.0.0.1,IP:10.96.0.1,IP:$ADVERTISE,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    # The names below are the users the built-in RBAC bindings expect.
    cert admin "/O=system:masters/CN=admin"
    cert kube-proxy /CN=system:kube-proxy
    cert controller-manager /CN=system:kube-controller-manager
    cert scheduler /CN=system:kube-scheduler
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    local k
    for k in admin kube-proxy controller-manager scheduler; do kubeconfig "$k"; done
}

# --- processes --------------------------------------------------------------

# start NAME CMD...: run detached (own session, so the caller's job control
# cannot take it down), log to $LOGS/NAME.log (appended: `start COMPONENT`
# after `stop` keeps what was there), remember the PID.
start() {
    local name=$1
    shift
    setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
    echo $! >"$PIDS/$name.pid"
}

alive() { [[ -f $PIDS/$1.pid ]] && pid_running "$(cat "$PIDS/$1.pid")"; }

# up_or_dead NAME CMD...: CMD succeeds, or the process NAME died (which ends the wait).
up_or_dead() {
    local name=$1
    shift
    ! alive "$name" || "$@"
}

# wait_for WHAT NAME CMD...: retry CMD for $WAIT seconds; fail early if the
# process NAME died.
wait_for() {
    local what=$1 name=$2
    shift 2
    retry "$WAIT" up_or_dead "$name" "$@" || die "timed out after ${WAIT}s waiting for $what"
    alive "$name" || die "$name exited while waiting for $what"
    log "$what: ok"
}

admin_curl() {
    curl -fsS --max-time 5 --cacert "$PKI/ca.crt" \
        --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$APISERVER$1"
}

# check_ports_free [PORT...]: the given ports (default: all of this cluster's) are free.
check_ports_free() {
    local port
    (($#)) || set -- "${PORTS[@]}"
    for port in "$@"; do
        if ss -Hltn "sport = :$port" | grep -q .; then
            die "port $port is already in use (another cluster? try: $0 down)"
        fi
    done
}

# stop_components NAME...: stop the processes these pid files name: TERM to
# all at once (each takes ~2 s to exit), then KILL what is left after 10 s.
# The command line must mention $RUN/ (every component's names a file in
# it), so a recycled PID, or another cluster's process, is never signalled.
stop_components() {
    [[ -d $PIDS ]] || return 0
    local f pid name pids=()
    for name in "$@"; do
        f=$PIDS/$name.pid
        [[ -f $f ]] || continue
        pid=$(cat "$f")
        if pid_running "$pid" && grep -qa -- "$RUN/" "/proc/$pid/cmdline"; then
            kill -TERM "$pid"
            pids+=("$pid")
            log "stopping $name ($pid)"
        fi
        rm -f "$f"
    done
    for pid in "${pids[@]}"; do
        retry 10 pid_gone "$pid" || kill -KILL "$pid"
    done
}

# Stop every process of this cluster.
stop_all() { stop_components scheduler controller-manager apiserver etcd; }

print_logs() {
    local f
    for f in "$LOGS"/*.log; do
        [[ -f $f ]] || continue
        printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
        tail -n 30 "$f" >&2
    done
}

on_up_failure() {
    local rc=$?
    ((rc == 0)) && return 0
    log "up failed; logs follow, processes stopped, $RUN kept for inspection"
    print_logs
    stop_all
    exit "$rc"
}

# --- components (up starts them in this order; `start COMPONENT` one again) ---

GATES=()
if [[ -n $FEATURE_GATES ]]; then GATES=(--feature-gates="$FEATURE_GATES"); fi

start_etcd() {
    start etcd "$ETCD" --name e2e --data-dir "$RUN/etcd" \
        --listen-client-urls http://127.0.0.1:$ETCD_CLIENT --advertise-client-urls http://127.0.0.1:$ETCD_CLIENT \
        --listen-peer-urls http://127.0.0.1:$ETCD_PEER --initial-advertise-peer-urls http://127.0.0.1:$ETCD_PEER \
        --initial-cluster e2e=http://127.0.0.1:$ETCD_PEER
    wait_for etcd etcd curl -fsS --max-time 2 http://127.0.0.1:$ETCD_CLIENT/health
}

# Admission: the defaults minus TaintNodesByCondition, whose not-ready
# taint no kubelet would ever lift here. Privileged containers allowed, as
# kubeadm's API server does: its kube-proxy DaemonSet is privileged (the real
# nodes of scenario 80 run it).
start_apiserver() {
    start apiserver "$BIN/kube-apiserver" \
        --bind-address=127.0.0.1 --secure-port=$APISERVER_PORT --insecure-port=0 \
        --advertise-address="$ADVERTISE" \
        --etcd-servers=http://127.0.0.1:$ETCD_CLIENT \
        --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
        --client-ca-file="$PKI/ca.crt" \
        --service-account-key-file="$PKI/sa.pub" \
        --service-account-signing-key-file="$PKI/sa.key" \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --api-audiences=https://kubernetes.default.svc.cluster.local \
        --service-cluster-ip-range="$SERVICE_CIDR" \
        --authorization-mode=Node,RBAC --allow-privileged=true \
        --disable-admission-plugins=TaintNodesByCondition \
        "${GATES[@]}"
    wait_for "apiserver /readyz" apiserver admin_curl /readyz
}

# Their own HTTPS ports only serve /healthz here, so no delegated
# authentication/authorization (it would need a front-proxy CA).
# No kubelets report node health, so the node lifecycle controller would
# mark every node unreachable and evict its pods: leave it out.
start_controller_manager() {
    start controller-manager "$BIN/kube-controller-manager" \
        --kubeconfig="$RUN/controller-manager.kubeconfig" \
        --bind-address=127.0.0.1 --secure-port=$CM_PORT --port=0 \
        --leader-elect=false \
        --controllers='*,-nodelifecycle' --use-service-account-credentials=true \
        --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
        --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
        "${GATES[@]}"
}

start_scheduler() {
    start scheduler "$BIN/kube-scheduler" \
        --kubeconfig="$RUN/scheduler.kubeconfig" \
        --bind-address=127.0.0.1 --secure-port=$SCHEDULER_PORT --port=0 \
        --leader-elect=false
}

# start_component NAME: start NAME of a cluster that is up (after `stop NAME`), on its port.
start_component() {
    [[ -d $PIDS ]] || die "not up ($RUN)"
    ! alive "$1" || die "$1 is already running ($RUN)"
    case $1 in
    etcd) check_ports_free "$ETCD_CLIENT" "$ETCD_PEER"; start_etcd ;;
    apiserver) check_ports_free "$APISERVER_PORT"; start_apiserver ;;
    controller-manager)
        check_ports_free "$CM_PORT"; start_controller_manager
        wait_for "controller-manager /healthz" controller-manager curl -fsSk --max-time 2 https://127.0.0.1:$CM_PORT/healthz
        ;;
    scheduler)
        check_ports_free "$SCHEDULER_PORT"; start_scheduler
        wait_for "scheduler /healthz" scheduler curl -fsSk --max-time 2 https://127.0.0.1:$SCHEDULER_PORT/healthz
        ;;
    *) die "unknown component $1 (etcd, apiserver, controller-manager, scheduler)" ;;
    esac
}

up() {
    local c
    for c in kube-apiserver kube-controller-manager kube-scheduler; do
        [[ -x $BIN/$c ]] || die "$BIN/$c missing: run deploy/e2e/install.sh first"
    done
    command -v "$ETCD" >/dev/null || die "etcd missing: run deploy/e2e/install.sh first"
    if [[ -d $RUN ]]; then
        local f
        for f in "$PIDS"/*.pid; do
            [[ -f $f ]] && pid_running "$(cat "$f")" &&
                die "already up ($RUN); run: $0 down"
        done
        rm -rf "$RUN" # leftovers of a failed run
    fi
    check_ports_free
    local start_time=$SECONDS
    mkdir -p "$LOGS" "$PIDS"
    echo "${PORTS[*]}" >"$RUN/ports"
    trap on_up_failure EXIT
    make_pki
    start_etcd
    start_apiserver
    start_controller_manager
    start_scheduler
    wait_for "controller-manager /healthz" controller-manager \
        curl -fsSk --max-time 2 https://127.0.0.1:$CM_PORT/healthz
    wait_for "scheduler /healthz" scheduler curl -fsSk --max-time 2 https://127.0.0.1:$SCHEDULER_PORT/healthz
    # The controllers really work once the default ServiceAccount exists.
    wait_for "default ServiceAccount" controller-manager \
        admin_curl /api/v1/namespaces/default/serviceaccounts/default

    trap - EXIT
    log "up in $((SECONDS - start_time)) s; logs in $LOGS"
    env_lines
}

down() {
    stop_all
    rm -rf "$RUN"
    log "down"
}

env_lines() {
    cat <<EOF
export SITEGRID_E2E_RUN=$RUN
export SITEGRID_K8S_BIN=$BIN
export KUBECONFIG=$RUN/admin.kubeconfig
export SITEGRID_E2E_APISERVER=$APISERVER
export SITEGRID_E2E_CA=$PKI/ca.crt
export SITEGRID_E2E_KUBE_PROXY_KUBECONFIG=$RUN/kube-proxy.kubeconfig
EOF
    if [[ ${PORTS[*]} != "$DEFAULT_PORTS" ]]; then echo "export SITEGRID_E2E_PORTS=\"${PORTS[*]}\""; fi
}

case ${1:-} in
up) up ;;
down) down ;;
env) env_lines ;;
cert)
    [[ $# -ge 3 ]] || die "usage: $0 cert NAME SUBJECT [SAN]"
    cert "$2" "$3" "${4:-}"
    ;;
kubeconfig)
    [[ $# -ge 2 ]] || die "usage: $0 kubeconfig NAME [SERVER]"
    kubeconfig "$2" "${3:-}"
    ;;
stop)
    [[ $# -ge 2 ]] || die "usage: $0 stop COMPONENT"
    case $2 in etcd | apiserver | controller-manager | scheduler) ;; *) die "unknown component $2" ;; esac
    stop_components "$2"
    ;;
start)
    [[ $# -ge 2 ]] || die "usage: $0 start COMPONENT"
    start_component "$2"
    ;;
*) die "usage: $0 up|down|env|cert NAME SUBJECT [SAN]|kubeconfig NAME [SERVER]|stop COMPONENT|start COMPONENT" ;;
esac
