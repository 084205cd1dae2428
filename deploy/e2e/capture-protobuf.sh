#!/usr/bin/env bash
# Capture kube-apiserver 1.20's own answers, in protobuf and in JSON, for the
# proxy's byte-level protobuf tests (apimachinery/tests/golden/). Not part of CI:
# run it again only to refresh the captures.
#
#   deploy/e2e/capture-protobuf.sh [OUT_DIR]   # default apimachinery/tests/golden
#
# Brings up the control plane with the two-site sample (harness.sh), then
# fetches each request once with `Accept: application/vnd.kubernetes.protobuf`
# and once with JSON, back to back, so both describe the same objects.
set -euo pipefail
E2E_NAME=capture
# shellcheck source-path=SCRIPTDIR source=harness.sh
source "$(dirname "$0")/harness.sh"
OUT=$(cd "${1:-$E2E_ROOT/apimachinery/tests/golden}" && pwd)
harness_up
PKI=$SITEGRID_E2E_RUN/pki
PB='application/vnd.kubernetes.protobuf'

# fetch NAME PATH: NAME.pb and NAME.json, each with its HTTP code on stderr.
fetch() {
    local name=$1 path=$2 accept ext code
    for accept in "$PB" application/json; do
        ext=json
        [[ $accept == "$PB" ]] && ext=pb
        code=$(curl -sS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
            -H "Accept: $accept" -o "$OUT/$name.$ext" -w '%{http_code}' "$SITEGRID_E2E_APISERVER$path")
        log "$name.$ext: $code, $(wc -c <"$OUT/$name.$ext") bytes"
    done
}

fetch endpoints-list /api/v1/namespaces/default/endpoints
fetch endpoints-get /api/v1/namespaces/default/endpoints/servicegrid-demo-svc
fetch endpointslices-list /apis/discovery.k8s.io/v1beta1/namespaces/default/endpointslices
fetch services-list /api/v1/namespaces/default/services
fetch nodes-list /api/v1/nodes
fetch notfound /api/v1/namespaces/default/services/nope
# Watch frames: the initial ADDED events of a namespace, then every event since version 1.
fetch endpoints-watch "/api/v1/namespaces/default/endpoints?watch=1&resourceVersion=0&timeoutSeconds=1"
fetch endpoints-watch-history "/api/v1/namespaces/default/endpoints?watch=1&resourceVersion=1&timeoutSeconds=1"
log "captured into $OUT"
