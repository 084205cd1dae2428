#!/usr/bin/env bash
# Install the real peers of the end-to-end suite (see issue 4 and the
# "Real peers" section of the architecture notes):
#   - Debian packages: etcd, Go, iptables/conntrack/iproute2, socat, rsync, dnsmasq, dig (dnsutils);
#     for the real nodes (scenario 80): containerd, runc, the CNI plugins, busybox-static,
#     debootstrap and a static libc (the pause image)
#   - kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and kubelet
#     1.20.2, built from Debian's `kubernetes` source package (the only
#     Kubernetes source reachable: no network beyond the package registries).
#   - SuperEdge's application-grid-wrapper (scenario 91), see install_wrapper.
#
# Idempotent: the five binaries are cached in $SITEGRID_K8S_CACHE/bin and the
# whole build is skipped when they are all there (a cache made before kubelet
# was added is rebuilt). Needs root (apt-get).
set -euo pipefail

K8S_VERSION=1.20.2
CACHE=${SITEGRID_K8S_CACHE:-$HOME/.cache/sitegrid/k8s-$K8S_VERSION}
BIN=$CACHE/bin
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet)

log() { printf 'install: %s\n' "$*" >&2; }

install_packages() {
    export DEBIAN_FRONTEND=noninteractive
    # Package maintainer scripts would start etcd (port 2379, which the
    # harness uses) and dnsmasq (port 53 on every interface). Docker-style
    # images already forbid that with policy-rc.d; make sure of it elsewhere.
    local own_policy=
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        own_policy=1
    fi
    apt-get update -q
    # golang-github-modern-go-reflect2-dev: see replace_reflect2.
    # dpkg-dev: `apt-get source` wants it; rsync: `make gen_openapi` needs it.
    # The real nodes: containerd (its service is not started: each node runs its own),
    # runc, the CNI plugins (/usr/lib/cni), busybox-static (the app and init-container
    # images), debootstrap (kube-proxy's image), gcc and libc6-dev (the static pause binary).
    apt-get install -y -q --no-install-recommends \
        etcd-server etcd-client golang-go iptables conntrack iproute2 socat rsync dnsmasq dnsutils \
        golang-github-modern-go-reflect2-dev dpkg-dev make openssl curl ca-certificates \
        containerd runc containernetworking-plugins busybox-static debootstrap gcc libc6-dev
    if [[ -n $own_policy ]]; then rm -f /usr/sbin/policy-rc.d; fi
}

# Add a deb-src entry for the mirror the machine already uses, in a file of
# its own so the existing debian.sources stays untouched.
add_deb_src() {
    local list=/etc/apt/sources.list.d/sitegrid-deb-src.sources
    if grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 0
    fi
    local uri
    uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    uri=${uri:-http://deb.debian.org/debian}
    log "adding deb-src for $uri"
    cat >"$list" <<SRC
Types: deb-src
URIs: $uri
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -q
}

# Download (once) the source package; only the orig tarball is used: it
# carries vendor/, which Debian's own patches would partly unbundle.
fetch_source() {
    mkdir -p "$CACHE/src"
    # Debian's version is "1.20.5+really1.20.2": the upstream 1.20.2 tree.
    local pattern="$CACHE/src/kubernetes_*really$K8S_VERSION.orig.tar.*"
    if ! compgen -G "$pattern" >/dev/null; then
        (cd "$CACHE/src" && apt-get source --download-only kubernetes >&2)
    fi
    compgen -G "$pattern" | head -n1
}

# The vendored reflect2 1.0.1 makes kube-apiserver SIGSEGV on its first
# JSON/YAML response under Go >= 1.18; Debian ships the fixed 1.0.2.
replace_reflect2() {
    local vendor=$1/vendor/github.com/modern-go/reflect2
    rm -rf "$vendor"
    cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$vendor"
}

build() {
    local tarball=$1 start=$SECONDS
    local scratch=$CACHE/build
    export GOPATH=$scratch/gopath GOCACHE=$scratch/go-cache GO111MODULE=off GOFLAGS=
    local src=$GOPATH/src/k8s.io/kubernetes
    rm -rf "$scratch"
    mkdir -p "$src"
    log "extracting $(basename "$tarball")"
    tar -xf "$tarball" -C "$src" --strip-components=1
    replace_reflect2 "$src"

    # `go build -mod=vendor` refuses ("updates to go.mod needed"), so build in
    # GOPATH mode like Kubernetes 1.20's own hack/ scripts.
    log "generating the OpenAPI definitions kube-apiserver needs"
    make -C "$src" gen_openapi

    # Stamp the version so clients see v1.20.2 instead of v0.0.0.
    local ldflags="-s -w" pkg
    for pkg in k8s.io/kubernetes/pkg/version \
        k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version \
        k8s.io/kubernetes/vendor/k8s.io/component-base/version; do
        ldflags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
        ldflags+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    done
    log "building ${COMPONENTS[*]}"
    mkdir -p "$scratch/out"
    (cd "$src" && go build -ldflags "$ldflags" -o "$scratch/out/" \
        "${COMPONENTS[@]/#/k8s.io/kubernetes/cmd/}")

    # The pause image's binary (scenario 80): Kubernetes' own pause.c, static, so
    # its image needs nothing else.
    gcc -Os -Wall -static -DVERSION=v$K8S_VERSION-sitegrid -o "$scratch/out/pause" "$src/build/pause/linux/pause.c"

    mkdir -p "$BIN"
    local c
    for c in "${COMPONENTS[@]}" pause; do install -m 0755 "$scratch/out/$c" "$BIN/$c"; done
    # The scratch tree (source with vendor/ plus the Go build cache) is over a
    # GB; the binaries and the source tarball are all later runs need.
    rm -rf "$scratch"
    log "cold build time: $((SECONDS - start)) s"
}

# SuperEdge's application-grid-wrapper (scenario 91 swaps it for sitegrid-proxy
# under a running kube-proxy), built once into $BIN by the workplace's build
# script (SuperEdge's source stays outside this repository; the script pins
# its commit and lists its edits): $SITEGRID_SUPEREDGE_WRAPPER_BUILD, or
# shared/tools/superedge-wrapper/build.sh in the checkout's parent folder (the
# workplace's ../shared) or in one of its ancestors, or in those of the checkout
# it was cloned from.
# Without it the scenario fails saying so; everything else runs.
install_wrapper() {
    local out=$BIN/application-grid-wrapper script candidate
    [[ -x $out ]] && return 0
    local root origin dirs=()
    root=$(cd "$(dirname "$0")/../.." && pwd)
    dirs+=("$root")
    # A fresh clone made elsewhere (CI's, a /tmp checkout) has the workplace's checkout as
    # its origin: that one's ancestors hold ../shared.
    origin=$(git -C "$root" remote get-url origin 2>/dev/null || true)
    [[ -n $origin && -d $origin ]] && dirs+=("$(cd "$origin" && pwd)")
    for candidate in "${SITEGRID_SUPEREDGE_WRAPPER_BUILD:-}" $(for up in "${dirs[@]}"; do while [[ $up != / ]]; do up=$(dirname "$up"); echo "$up/shared/tools/superedge-wrapper/build.sh"; done; done); do
        if [[ -n $candidate && -x $candidate ]]; then script=$candidate; break; fi
    done
    if [[ -z ${script:-} ]]; then
        log "no SuperEdge wrapper build script (set SITEGRID_SUPEREDGE_WRAPPER_BUILD): scenario 91 will fail"
        return 0
    fi
    local scratch
    scratch=$(mktemp -d)
    log "building application-grid-wrapper with $script"
    SITEGRID_K8S_CACHE=$CACHE SCRATCH=$scratch OUT=$out "$script" >&2
    rm -rf "$scratch"
}

cached() {
    local c
    for c in "${COMPONENTS[@]}" pause; do [[ -x $BIN/$c ]] || return 1; done
}

main() {
    [[ $(id -u) -eq 0 ]] || { log "must run as root (apt-get)"; exit 1; }
    install_packages
    if cached; then
        log "cached: $BIN"
    else
        add_deb_src
        build "$(fetch_source)"
        "$BIN/kube-apiserver" --version
    fi
    install_wrapper
}

main "$@"
