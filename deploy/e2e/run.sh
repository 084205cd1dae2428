#!/usr/bin/env bash
# The real-cluster end-to-end suite: install (cached), bring up the Kubernetes
# 1.20 control plane on loopback, load the two-site sample, run every
# scenario in scenarios/ (or the ones named), and always tear down.
#
#   deploy/e2e/run.sh                   # all scenarios
#   deploy/e2e/run.sh 10-proxy-filter   # some, by file name without .sh
#   deploy/e2e/run.sh --build-only      # only the binaries it runs (then SITEGRID_E2E_BUILT=1
#                                       # skips that build, and its wait for the cargo lock)
#
# A scenario is a small bash file sourced with lib.sh's helpers and the
# cluster's environment; it fails by exiting non-zero. Logs of every
# component and of sitegrid stay in $SITEGRID_E2E_LOGS and are printed on
# failure (harness.sh).
set -euo pipefail
E2E_NAME=e2e
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
packages=(sitegrid-proxy sitegrid-controller sitegrid-dnsd sitegrid-certs sitegrid-plugin)
if [[ ${1:-} == --build-only ]]; then
    harness_build "${packages[@]}"
    exit
fi
harness_up "${packages[@]}"

passed=0 failed=0
if (($#)); then names=("$@"); else names=(); for f in "$E2E_DIR"/scenarios/*.sh; do names+=("$(basename "$f" .sh)"); done; fi
for name in "${names[@]}"; do
    started=$SECONDS
    # Its output is kept too: on failure the harness repeats its end after the components'
    # logs, where a CI log's tail shows it. A process substitution, not a pipe: a process a
    # scenario leaves running with its output open must not hold the suite up.
    if (SCENARIO=$name; source "$E2E_DIR/lib.sh"; source "$E2E_DIR/scenarios/$name.sh") \
        > >(tee "$SITEGRID_E2E_LOGS/scenario-$name.out") 2>&1; then
        echo "e2e: $name ... ok ($((SECONDS - started)) s)"; passed=$((passed + 1))
    else
        echo "e2e: $name ... FAILED ($((SECONDS - started)) s)"; failed=$((failed + 1))
        echo "$name" >>"$SITEGRID_E2E_LOGS/failed-scenarios"
    fi
done
echo "e2e: $passed passed, $failed failed"
((failed == 0))
