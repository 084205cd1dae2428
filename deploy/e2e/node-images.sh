#!/usr/bin/env bash
# The images the real nodes of scenario 80 run, offline, as docker-archive tars
# for `ctr -n k8s.io images import`, written to OUT:
#
#   k8s.gcr.io/pause:3.2            Kubernetes' build/pause/linux/pause.c, static (install.sh builds it)
#   k8s.gcr.io/kube-proxy:v1.20.2   install.sh's kube-proxy on a minimal Debian root (debootstrap
#                                   --variant=minbase, plus iptables and conntrack: what its iptables
#                                   mode runs)
#   busybox:1.36                    Debian's busybox-static (1.35) under the tag the proxy's init
#                                   container names
#   superedge/echoserver:2.2        the walkthrough's app, played by busybox's httpd: every GET gets
#                                   "pod name: $POD_NAME" and "node name: $NODE_NAME" (the env the
#                                   seed's DeploymentGrid and StatefulSetGrid set) on port 8080
#   sitegrid/sitegrid-*:TAG         deploy/images/build.sh's images, from buildah's storage
#
#   deploy/e2e/node-images.sh OUT [TAG]
#
# The first four are made once and cached in $SITEGRID_K8S_CACHE/images (kube-proxy's again
# when install.sh rebuilt the binary; delete the folder to remake them after changing this
# script); debootstrap reads the Debian mirror apt already uses.
# The sitegrid images are exported on every call (build them first; SITEGRID_IMAGES_SKIP_CARGO=1
# deploy/images/build.sh reuses built binaries). Needs root.
set -euo pipefail
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$E2E_DIR/../.." && pwd)
OUT=${1:?usage: node-images.sh OUT [TAG]}
TAG=${2:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)}
CACHE=${SITEGRID_K8S_CACHE:-$HOME/.cache/sitegrid/k8s-1.20.2}
IMAGES=$CACHE/images
buildah=(buildah --storage-driver vfs)

log() { printf 'node-images: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
[[ -x $CACHE/bin/kube-proxy && -x $CACHE/bin/pause ]] || die "$CACHE/bin lacks kube-proxy or pause: run deploy/e2e/install.sh"

# archive ROOTFS NAME OUT.tar JSON_CONFIG: a one-layer docker-archive of the directory ROOTFS,
# tagged NAME, with JSON_CONFIG as the image's config (Entrypoint, Env, ...).
archive() {
    python3 - "$@" <<'PY'
import hashlib, io, json, os, sys, tarfile
root, name, out, config = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
    for entry in sorted(os.listdir(root)):
        t.add(os.path.join(root, entry), arcname=entry)
layer = layer.getvalue()
diff_id = hashlib.sha256(layer).hexdigest()
cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": config,
                  "rootfs": {"type": "layers", "diff_ids": ["sha256:" + diff_id]}}).encode()
cfg_id = hashlib.sha256(cfg).hexdigest()
manifest = json.dumps([{"Config": cfg_id + ".json", "RepoTags": [name], "Layers": [diff_id + "/layer.tar"]}]).encode()
with tarfile.open(out + ".tmp", "w") as t:
    for path, data in ((diff_id + "/layer.tar", layer), (cfg_id + ".json", cfg), ("manifest.json", manifest)):
        info = tarfile.TarInfo(path)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
os.rename(out + ".tmp", out)
PY
}

# busybox_root DIR: Debian's static busybox with a link per applet.
busybox_root() {
    mkdir -p "$1/bin" "$1/tmp" "$1/etc"
    chmod 1777 "$1/tmp"
    cp /bin/busybox "$1/bin/busybox"
    local applet
    for applet in $(/bin/busybox --list); do [[ -e $1/bin/$applet ]] || ln -s busybox "$1/bin/$applet"; done
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$1/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
}

# debian_mirror: the Debian mirror apt uses here.
debian_mirror() {
    local uri
    uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [[ -n $uri ]] || uri=$(awk '$1 == "deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

build_cached() {
    local work
    mkdir -p "$IMAGES"
    work=$(mktemp -d)
    # shellcheck disable=SC2064 # expand now: the trap outlives this function's locals
    trap "rm -rf '$work'" EXIT
    if [[ ! -s $IMAGES/pause.tar || $CACHE/bin/pause -nt $IMAGES/pause.tar ]]; then
        mkdir -p "$work/pause"
        cp "$CACHE/bin/pause" "$work/pause/pause"
        archive "$work/pause" k8s.gcr.io/pause:3.2 "$IMAGES/pause.tar" '{"Entrypoint": ["/pause"], "User": "65535:65535"}'
        log "made k8s.gcr.io/pause:3.2"
    fi
    if [[ ! -s $IMAGES/busybox.tar ]]; then
        busybox_root "$work/busybox"
        archive "$work/busybox" busybox:1.36 "$IMAGES/busybox.tar" '{"Cmd": ["sh"]}'
        log "made busybox:1.36 (Debian's busybox-static $(/bin/busybox | sed -n '1s/^BusyBox \(v[^ ]*\).*/\1/p'))"
    fi
    if [[ ! -s $IMAGES/echoserver.tar ]]; then
        busybox_root "$work/echo"
        cat >"$work/echo/serve" <<'SH'
#!/bin/sh
# superedge/echoserver:2.2 as this suite plays it: which pod answered, on port 8080.
mkdir -p /tmp/www
printf 'pod name: %s\nnode name: %s\n' "$POD_NAME" "$NODE_NAME" >/tmp/www/index.html
# PID 1 ignores a signal it has no handler for: stop on SIGTERM, not after the grace period.
trap 'exit 0' TERM
httpd -f -p 8080 -h /tmp/www &
wait
SH
        chmod 755 "$work/echo/serve"
        archive "$work/echo" superedge/echoserver:2.2 "$IMAGES/echoserver.tar" '{"Entrypoint": ["/serve"]}'
        log "made superedge/echoserver:2.2"
    fi
    if [[ ! -s $IMAGES/kube-proxy.tar || $CACHE/bin/kube-proxy -nt $IMAGES/kube-proxy.tar ]]; then
        local rootfs=$work/kube-proxy mirror start=$SECONDS
        mirror=$(debian_mirror)
        log "debootstrap (minbase, iptables, conntrack) from $mirror"
        debootstrap --variant=minbase --include=iptables,conntrack bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
            { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc "$rootfs"/usr/share/man
        install -m 0755 "$CACHE/bin/kube-proxy" "$rootfs/usr/local/bin/kube-proxy"
        archive "$rootfs" k8s.gcr.io/kube-proxy:v1.20.2 "$IMAGES/kube-proxy.tar" \
            '{"Entrypoint": ["/usr/local/bin/kube-proxy"], "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}'
        log "made k8s.gcr.io/kube-proxy:v1.20.2 in $((SECONDS - start)) s"
    fi
    rm -rf "$work"
    trap - EXIT
}

export_sitegrid() {
    local b image
    for b in proxy controller dnsd; do
        image=sitegrid/sitegrid-$b:$TAG
        "${buildah[@]}" inspect --type image "localhost/$image" >/dev/null 2>&1 ||
            die "$image is not in buildah's storage: run deploy/images/build.sh"
        rm -f "$OUT/sitegrid-$b.tar"
        "${buildah[@]}" push --quiet "localhost/$image" "docker-archive:$OUT/sitegrid-$b.tar:docker.io/$image" >/dev/null
    done
}

mkdir -p "$OUT"
build_cached
cp "$IMAGES"/{pause,busybox,echoserver,kube-proxy}.tar "$OUT/"
export_sitegrid
ls "$OUT"
