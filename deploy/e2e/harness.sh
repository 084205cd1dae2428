# The one harness of the real-cluster suite (run.sh) and its figure scripts
# (controller-figures.sh, latency.sh, dnsd-figures.sh), also used by cluster.sh and sample.sh:
# messages, one bounded retry, process tracking, and the bring-up and cleanup
# of a control plane with the two-site sample. Sourced, never run.
# shellcheck shell=bash

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_ROOT=$(cd "$E2E_DIR/../.." && pwd)

# log MESSAGE: one line on stderr, prefixed with the script's name.
log() { printf '%s: %s\n' "${E2E_NAME:-e2e}" "$*" >&2; }

# fail MESSAGE: stop the script (a scenario: that scenario) with MESSAGE.
fail() { echo "${E2E_NAME:-e2e}: FAIL: $*" >&2; exit 1; }

# retry SECONDS CMD...: run CMD every 0.2 s until it succeeds (status 0) or
# SECONDS have passed (status 1). The only wait loop of the harness: every
# other wait is this with a predicate.
retry() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# prints WANT CMD...: CMD prints exactly WANT. What it printed stays in $PRINTED.
prints() {
    local want=$1
    shift
    PRINTED=$("$@" 2>/dev/null) || PRINTED="(failed: $*)"
    [[ $PRINTED == "$want" ]]
}

# expect_within SECONDS WHAT WANT CMD...: retry until CMD prints WANT; else fail
# with what it printed last.
expect_within() {
    local seconds=$1 what=$2 want=$3
    shift 3
    retry "$seconds" prints "$want" "$@" || fail "$what: got '$PRINTED', want '$want' after ${seconds}s"
}

# expect WHAT ACTUAL EXPECTED: they are equal, else fail.
expect() { [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"; }
# CMD | has [GREP-OPTION...] PATTERN: whether CMD printed a line matching PATTERN. Use it
# instead of `grep -q` after a pipe: grep -q stops reading at the first match, a writer with
# more to write then dies of SIGPIPE, and pipefail makes that the pipeline's failure (a
# flaky one: it depends on how the output was split into writes). has reads it all.
has() { local all; all=$(cat); grep -q "$@" <<<"$all"; }

# --- processes ---------------------------------------------------------------

# pid_running PID: exists and is not a zombie (a child of this shell that
# exited stays one until it is waited for).
pid_running() {
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $state && $state != Z ]]
}

pid_gone() { ! pid_running "$1"; }

# stop_pid PID [GRACE]: TERM, then KILL after GRACE seconds (default 5).
stop_pid() {
    kill "$1" 2>/dev/null || return 0
    retry "${2:-5}" pid_gone "$1" || kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# track PID [GROUP]: PID is stopped by stop_group GROUP, and in any case by
# the cleanup when the script ends.
track() {
    echo "$1" >>"$SITEGRID_E2E_LOGS/pids"
    if [[ -n ${2:-} ]]; then
        mkdir -p "$SITEGRID_E2E_LOGS/groups"
        echo "$1" >>"$SITEGRID_E2E_LOGS/groups/$2"
    fi
}

# stop_group GROUP: stop what was tracked in GROUP, newest first.
stop_group() {
    local file=$SITEGRID_E2E_LOGS/groups/$1 pid
    [[ -f $file ]] || return 0
    for pid in $(tac "$file"); do
        stop_pid "$pid"
        sed -i "/^$pid\$/d" "$SITEGRID_E2E_LOGS/pids"
    done
    rm -f "$file"
}

# --- bring-up and cleanup ----------------------------------------------------

# harness_up [--release] [--no-sample] PACKAGE...: the Kubernetes binaries
# (install.sh, cached after the first build), the sitegrid PACKAGEs built, a
# fresh control plane on loopback (cluster.sh) with the two-site sample
# (sample.sh), its environment exported, and everything stopped and removed
# when the calling script exits (logs kept in $SITEGRID_E2E_LOGS, printed on
# failure). Another run on this machine waits for this one to end (they
# share ports), and builds wait for any other cargo build holding
# /tmp/sitegrid-cargo.lock.
# harness_build [CARGO_FLAG...] PACKAGE...: the sitegrid PACKAGEs built, waiting for any other
# cargo build on this machine (2 cores; see the README) to end first.
harness_build() {
    local build=(--locked) a
    for a in "$@"; do
        if [[ $a == --* ]]; then build+=("$a"); else build+=(-p "$a"); fi
    done
    (cd "$E2E_ROOT" && flock /tmp/sitegrid-cargo.lock cargo build "${build[@]}")
}

harness_up() {
    local profile=debug sample=1 build=()
    while [[ ${1:-} == --* ]]; do
        case $1 in
        --release) profile=release build+=(--release) ;;
        --no-sample) sample= ;;
        *) fail "harness_up: unknown option $1" ;;
        esac
        shift
    done
    # One cluster at a time on this machine (fixed ports): wait for any other run to end.
    exec {E2E_LOCK_FD}>/tmp/sitegrid-e2e.lock
    flock "$E2E_LOCK_FD"
    export SITEGRID_E2E_LOGS=${SITEGRID_E2E_LOGS:-/tmp/sitegrid-${E2E_NAME:-e2e}-logs}
    rm -rf "$SITEGRID_E2E_LOGS" && mkdir -p "$SITEGRID_E2E_LOGS"
    "$E2E_DIR/install.sh"
    # SITEGRID_E2E_BUILT=1: the caller built them already (run.sh --build-only), and another
    # build may hold the lock meanwhile (.ci/run's fuzz stage, beside the suite).
    [[ ${SITEGRID_E2E_BUILT:-} == 1 ]] || harness_build "${build[@]}" "$@"
    export SITEGRID_E2E_ROOT=$E2E_ROOT
    local target=${CARGO_TARGET_DIR:-$E2E_ROOT/target}/$profile
    export SITEGRID_PROXY_BIN=$target/sitegrid-proxy
    export SITEGRID_CONTROLLER_BIN=$target/sitegrid-controller
    export SITEGRID_DNSD_BIN=$target/sitegrid-dnsd
    export SITEGRID_CERTS_BIN=$target/sitegrid-certs
    export SITEGRID_PLUGIN_BIN=$target/kubectl-sitegrid
    # What a run killed before its EXIT trap (a machine restarted under it) left behind: its
    # real nodes and namespaces. A leftover namespace keeps its rules (an API server cut
    # included), and a new node of the same name would silently reuse it.
    harness_leftovers
    "$E2E_DIR/cluster.sh" down >/dev/null 2>&1 || true
    trap harness_cleanup EXIT
    "$E2E_DIR/cluster.sh" up >/dev/null
    [[ -n $sample ]] && "$E2E_DIR/sample.sh" >/dev/null
    eval "$("$E2E_DIR/cluster.sh" env)"
}

# harness_leftovers: real nodes (nodes.sh) a scenario left, every process, cgroup and mount of
# them; then the network namespaces the scenarios made (lib.sh, nodes.sh: sg-*), their rules
# kept with the logs.
harness_leftovers() {
    local ns
    if [[ -d ${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}/nodes ]]; then
        # shellcheck source-path=SCRIPTDIR source=nodes.sh
        (SITEGRID_E2E_RUN=${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}; source "$E2E_DIR/nodes.sh"; nodes_cleanup)
    fi
    for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^sg-/ {print $1}'); do
        ip netns exec "$ns" iptables-save >"$SITEGRID_E2E_LOGS/iptables-$ns.txt" 2>&1
        ip netns delete "$ns" 2>/dev/null
    done
    return 0
}

# harness_cleanup: the EXIT trap of harness_up.
harness_cleanup() {
    local rc=$? ns f pid
    set +e
    if [[ -f $SITEGRID_E2E_LOGS/pids ]]; then
        for pid in $(tac "$SITEGRID_E2E_LOGS/pids"); do kill "$pid" 2>/dev/null; done
    fi
    harness_leftovers
    if ((rc != 0)); then
        for f in "$SITEGRID_E2E_LOGS"/*.log "${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}"/logs/*.log; do
            [[ -f $f ]] || continue
            echo "---- $f (last 30 lines)"
            tail -n 30 "$f"
        done
        # run.sh's failed scenarios, last, so a log cut to its end still says what failed.
        local failed=
        if [[ -f $SITEGRID_E2E_LOGS/failed-scenarios ]]; then
            for f in $(cat "$SITEGRID_E2E_LOGS/failed-scenarios"); do
                echo "---- scenario $f: the end of its output"
                tail -n 40 "$SITEGRID_E2E_LOGS/scenario-$f.out"
            done
            failed=" ($(paste -sd' ' "$SITEGRID_E2E_LOGS/failed-scenarios"))"
        fi
        echo "${E2E_NAME:-e2e}: failed$failed; logs in $SITEGRID_E2E_LOGS" >&2
    fi
    cp -r "${SITEGRID_E2E_RUN:-/tmp/sitegrid-e2e}/logs" "$SITEGRID_E2E_LOGS/cluster" 2>/dev/null
    "$E2E_DIR/cluster.sh" down >/dev/null 2>&1
    exit "$rc"
}
