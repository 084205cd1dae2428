#!/usr/bin/env bash
# deploy/monitoring, proven on a real Prometheus (Debian's `prometheus`
# package: prometheus and promtool):
#
#  1. promtool checks alerts.yaml and runs alerts.test.yaml; every alert has
#     a case that fires and one that stays quiet;
#  2. prometheus-operator/prometheusrule.yaml is alerts.yaml wrapped
#     (`--write` regenerates it);
#  3. kubectl kustomize renders deploy/base with the prometheus-operator
#     component, and each PodMonitor selects one workload's pods, a port they
#     declare, and a port the binary listens on for every address;
#  4. the in-memory API server, a proxy, the controller and dnsd (debug
#     builds) run on 127.0.0.1, scraped every second by a Prometheus that
#     loads alerts.yaml, through a scenario that gives every panel something
#     to show: clients of the proxy (lists, gets, a watch, a passthrough), a
#     StatefulSetGrid (dnsd re-selects its site's StatefulSets; the
#     controller's reconciles of it fail, as the API server takes no
#     server-side apply or is down), and an API server outage of a few
#     seconds (upstream and watch errors). Then every query of
#     grafana-dashboard.json must return data through /api/v1/query (it
#     names the ones that do not), the rules must be loaded and healthy,
#     and every metric they name must have been scraped.
#
#   deploy/monitoring/check.sh                               # builds the four debug binaries first
#   SITEGRID_BIN_DIR=target/debug deploy/monitoring/check.sh # uses those
#   deploy/monitoring/check.sh --write                       # rewrites prometheus-operator/prometheusrule.yaml
#
# Needs prometheus, promtool, kubectl ($KUBECTL), curl and python3 with
# PyYAML. Every wait is bounded by SITEGRID_MON_WAIT seconds (30); what it
# starts it stops by PID on exit, and its files go with it.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")"
here=$PWD
repo=$(cd ../.. && pwd)
started=$SECONDS
wait_limit=${SITEGRID_MON_WAIT:-30}

die() { echo "deploy/monitoring/check.sh: $*" >&2; exit 1; }

# python3 on PATH may be another build than Debian's (pyenv): the first with PyYAML.
python=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import yaml' 2>/dev/null; then python=$p; break; fi
done
[[ -n $python ]] || die "no python3 with PyYAML: install Debian's python3-yaml"

if [[ ${1:-} == --write ]]; then
    "$python" monitoring.py rule-crd >prometheus-operator/prometheusrule.yaml
    echo "wrote prometheus-operator/prometheusrule.yaml"
    exit 0
fi
[[ $# == 0 ]] || die "usage: check.sh [--write]"

kubectl=${KUBECTL:-kubectl}
for tool in prometheus promtool "$kubectl" curl; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install prometheus kubernetes-client curl)"
done

echo "== rules: promtool check and unit tests"
promtool check rules alerts.yaml
promtool test rules alerts.test.yaml
"$python" monitoring.py test-coverage
"$python" monitoring.py rule-crd | diff -u prometheus-operator/prometheusrule.yaml - \
    || die "prometheus-operator/prometheusrule.yaml differs from alerts.yaml: run deploy/monitoring/check.sh --write"
echo "prometheus-operator/prometheusrule.yaml wraps alerts.yaml"

scratch=$(mktemp -d -t sitegrid-monitoring.XXXXXX)
pids=()
# Whether PID runs (a child that exited is a zombie until reaped).
running() { local state; state=$(ps -o stat= -p "$1") && [[ $state != Z* ]]; }
# On exit: SIGTERM to what it started, SIGKILL to what is still there 5 s
# later (all are children not yet reaped, so their PIDs are still theirs).
cleanup() {
    local code=$? pid deadline=$((SECONDS + 5)) left
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    while :; do
        left=()
        for pid in "${pids[@]}"; do
            if running "$pid"; then left+=("$pid"); fi
        done
        ((${#left[@]} && SECONDS < deadline)) || break
        sleep 0.2
    done
    for pid in "${left[@]}"; do
        echo "($(ps -o comm= -p "$pid") did not exit within 5 s of SIGTERM: killed)" >&2
        kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((code != 0)) && [[ -d $scratch/logs ]]; then
        for log in "$scratch"/logs/*.log; do
            echo "--- last lines of $(basename "$log")" >&2
            tail -n 15 "$log" >&2
        done
    fi
    rm -rf "$scratch"
    exit "$code"
}
trap cleanup EXIT

echo "== kustomize: deploy/base with the prometheus-operator component"
# kustomize takes only relative paths to directories.
rel() { "$python" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$1" "$scratch"; }
cat >"$scratch/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [$(rel "$repo/deploy/base")]
components: [$(rel "$here/prometheus-operator")]
EOF
"$kubectl" kustomize "$scratch" >"$scratch/rendered.yaml" \
    || die "kubectl kustomize failed (components need kubectl's kustomize v4 or later: kubectl 1.21+)"
"$python" monitoring.py manifests "$scratch/rendered.yaml"

echo "== the binaries"
if [[ -z ${SITEGRID_BIN_DIR:-} ]]; then
    (cd "$repo" && cargo build --locked -q -p sitegrid-fakeapi -p sitegrid-proxy -p sitegrid-controller -p sitegrid-dnsd --bins)
    SITEGRID_BIN_DIR=${CARGO_TARGET_DIR:-$repo/target}/debug
fi
bin=$(cd "$caller" && cd "$SITEGRID_BIN_DIR" && pwd)
for b in sitegrid-apiserver sitegrid-proxy sitegrid-controller sitegrid-dnsd; do
    [[ -x $bin/$b ]] || die "$bin/$b not found (cargo build -p sitegrid-fakeapi -p sitegrid-proxy -p sitegrid-controller -p sitegrid-dnsd)"
done

# Seven free loopback ports, held together while chosen so that none repeats.
read -r api_port proxy_port proxy_ops ctl_ops dnsd_ops prom_port _ < <("$python" -c '
import socket
held = [socket.socket() for _ in range(7)]
for s in held: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in held))')
api=http://127.0.0.1:$api_port
proxy=http://127.0.0.1:$proxy_port
prom=http://127.0.0.1:$prom_port
mkdir -p "$scratch/logs" "$scratch/proxy-data" "$scratch/tsdb" "$scratch/hosts"

# start NAME COMMAND...: in the background, its output in logs/NAME.log.
start() {
    local name=$1; shift
    "$@" >>"$scratch/logs/$name.log" 2>&1 &
    pids+=($!)
    eval "${name//-/_}_pid=$!"
}

# wait_for WHAT COMMAND...: until COMMAND succeeds, at most $wait_limit seconds.
wait_for() {
    local what=$1 deadline=$((SECONDS + wait_limit)); shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "gave up after ${wait_limit}s waiting for $what"
        sleep 0.2
    done
}
# stop NAME: kills it at once and reaps it, so that its PID is never signalled again.
stop() {
    local var=${1//-/_}_pid
    local pid=${!var}
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    local kept=()
    for p in "${pids[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
    pids=("${kept[@]}")
}
answers() { curl -sf --max-time 2 -o /dev/null "$1"; }
metric_in() { curl -sf --max-time 2 "$1/metrics" | grep -q "^$2"; }

cat >"$scratch/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: '$api'}
users:
- name: check
  user: {token: check}
contexts:
- name: fake
  context: {cluster: fake, user: check}
current-context: fake
EOF

start_api() { start apiserver "$bin/sitegrid-apiserver" --bind-address "127.0.0.1:$api_port" --sample two-sites; }

# A StatefulSetGrid over the sample's `location` sites.
post_grid() {
    curl -sf --max-time 5 -o /dev/null -X POST -H 'content-type: application/json' \
        "$api/apis/superedge.io/v1/namespaces/default/statefulsetgrids" --data @- <<'EOF'
{"apiVersion": "superedge.io/v1", "kind": "StatefulSetGrid",
 "metadata": {"name": "monitoring-check", "namespace": "default"},
 "spec": {"gridUniqKey": "location", "template": {
   "selector": {"matchLabels": {"app": "monitoring-check"}}, "serviceName": "monitoring-check", "replicas": 1,
   "template": {"metadata": {"labels": {"app": "monitoring-check"}},
                "spec": {"containers": [{"name": "echo", "image": "superedge/echoserver:2.2"}]}}}}}
EOF
}

echo "== the in-memory API server, a proxy (node bj-1), the controller and dnsd on 127.0.0.1"
start_api
wait_for "the API server" answers "$api/api/v1/nodes"
export KUBECONFIG=$scratch/kubeconfig
start proxy "$bin/sitegrid-proxy" --hostname bj-1 --bind-address "127.0.0.1:$proxy_port" \
    --metrics-bind-address "127.0.0.1:$proxy_ops" --data-dir "$scratch/proxy-data" --snapshot-interval 1s
# Resynced every 2 s, so the grid is reconciled (and fails) while the API server is down.
start controller "$bin/sitegrid-controller" --bind-address "127.0.0.1:$ctl_ops" \
    --leader-elect=false --resync-period 2s
start dnsd "$bin/sitegrid-dnsd" --hostname bj-1 --hosts-file "$scratch/hosts/hosts" \
    --bind-address "127.0.0.1:$dnsd_ops"
for ops in "$proxy_ops" "$ctl_ops" "$dnsd_ops"; do
    wait_for "/readyz on 127.0.0.1:$ops" answers "http://127.0.0.1:$ops/readyz"
done

echo "== Prometheus on $prom, scraping them every second, with alerts.yaml"
cat >"$scratch/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: ['$here/alerts.yaml']
scrape_configs:
# Named and labelled as the PodMonitors name and label them.
- job_name: sitegrid-proxy
  static_configs: [{targets: ['127.0.0.1:$proxy_ops'], labels: {node: bj-1}}]
- job_name: sitegrid-controller
  static_configs: [{targets: ['127.0.0.1:$ctl_ops']}]
- job_name: sitegrid-dnsd
  static_configs: [{targets: ['127.0.0.1:$dnsd_ops'], labels: {node: bj-1}}]
EOF
start prometheus prometheus --config.file "$scratch/prometheus.yml" --storage.tsdb.path "$scratch/tsdb" \
    --web.listen-address "127.0.0.1:$prom_port" --log.level warn
wait_for "Prometheus" answers "$prom/-/ready"
all_up() {
    curl -sf --max-time 2 --get --data-urlencode 'query=count(up == 1)' "$prom/api/v1/query" | grep -q '"3"\]'
}
wait_for "Prometheus to scrape the three" all_up

echo "== the scenario: clients of the proxy, a StatefulSetGrid, an API server outage"
# What kube-proxy does (a watch, lists, its Node) and a passthrough, every
# 0.3 s until the check ends, so the request rates and latencies are live.
start watch curl -sN --max-time 600 -o /dev/null "$proxy/apis/discovery.k8s.io/v1/endpointslices?watch=1&allowWatchBookmarks=true"
clients() {
    while :; do
        for path in /apis/discovery.k8s.io/v1/endpointslices /api/v1/services /api/v1/nodes/bj-1 /version; do
            curl -s --max-time 5 -o /dev/null "$proxy$path" || true
        done
        sleep 0.3
    done
}
start clients clients
post_grid
wait_for "dnsd to re-select its site's StatefulSets" metric_in "http://127.0.0.1:$dnsd_ops" sitegrid_dnsd_selector_changes_total
stop apiserver
wait_for "the proxy's upstream connect errors" metric_in "http://127.0.0.1:$proxy_ops" 'sitegrid_proxy_upstream_errors_total{resource="[a-z]*",reason="connect"} [1-9]'
# Both counters are exported at 0 from the start: wait for a counted error.
wait_for "dnsd's watch errors" metric_in "http://127.0.0.1:$dnsd_ops" 'sitegrid_dnsd_watch_errors_total{resource="[a-z]*"} [1-9]'
wait_for "the controller's reconcile errors" metric_in "http://127.0.0.1:$ctl_ops" 'sitegrid_controller_reconcile_errors_total{kind="StatefulSetGrid"} [1-9]'
start_api
wait_for "the API server, back" answers "$api/api/v1/nodes"
post_grid
echo "API server down for a few seconds and back; the grid posted again"

echo "== every query of grafana-dashboard.json, through $prom/api/v1/query"
"$python" monitoring.py evaluate "$prom" "$wait_limit"
echo "deploy/monitoring/check.sh: all good in $((SECONDS - started)) s"
