#!/usr/bin/env bash
# Builds the images sitegrid/sitegrid-{proxy,controller,dnsd}:TAG offline, with
# Debian's buildah (no Docker engine, no registry, no base image to pull):
# the static binaries with cargo, then deploy/images/Dockerfile's target of
# each (FROM scratch, the binary and the CA bundle) from a context holding
# only those (`--build-arg BINARIES=context`); each image then runs its
# binary's --version inside (buildah run, chroot).
#
#   deploy/images/build.sh [TAG]          # TAG defaults to the workspace version
#   buildah --storage-driver vfs push sitegrid/sitegrid-proxy:0.1.0 docker://registry.example/sitegrid-proxy:0.1.0
#
# As root (vfs storage, chroot isolation: no overlay mounts, no user
# namespaces, no runtime daemon). $CARGO_TARGET_DIR is honoured;
# SITEGRID_IMAGES_SKIP_CARGO=1 uses binaries already built. After cargo's
# build the proxy is relinked with the code a node's proxy runs first laid
# out together (deploy/images/link-order.sh; needs valgrind, else says so
# and skips).
# With Docker, the Dockerfile builds the binaries itself in a Rust image
# instead (`docker build -f deploy/images/Dockerfile --target proxy .`),
# without that order.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TAG=${1:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)}
TRIPLE=x86_64-unknown-linux-gnu
# The cargo profile of the shipped binaries (Cargo.toml: `dist`).
PROFILE=${SITEGRID_IMAGES_PROFILE:-dist}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BINS=(proxy controller dnsd)
buildah=(buildah --storage-driver vfs)

die() { echo "build.sh: $*" >&2; exit 1; }
command -v buildah >/dev/null || die "buildah not found (Debian: apt-get install buildah)"
# The system roots the images carry, for kubeconfigs without a certificate-authority.
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
[[ -s $CA_BUNDLE ]] || die "$CA_BUNDLE missing (Debian: apt-get install ca-certificates)"

if [[ -z ${SITEGRID_IMAGES_SKIP_CARGO:-} ]]; then
    packages=()
    for b in "${BINS[@]}"; do packages+=(-p "sitegrid-$b"); done
    build() {
        # One cargo build at a time on the shared machines (see README, Development).
        (cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" flock /tmp/sitegrid-cargo.lock \
            cargo build --profile "$PROFILE" --locked --target "$TRIPLE" "${packages[@]}")
    }
    # SITEGRID_LINK_ORDER from the environment would order a build the run
    # below did not make the order for.
    SITEGRID_LINK_ORDER= build
    # The proxy linked again with the code a node's proxy runs first laid out
    # together: an idle proxy maps about 5 MiB less of it (docs/decisions/0012). The
    # same command: the same features, so the same symbol names as the order's.
    order=$("$ROOT/deploy/images/link-order.sh" "$PROFILE")
    if [[ -n $order ]]; then
        SITEGRID_LINK_ORDER=$order build
        first=$(head -1 "$order")
        starts=$(nm -n --defined-only "$TARGET_DIR/$TRIPLE/$PROFILE/sitegrid-proxy" |
            awk '$2 ~ /^[tTwW]$/ && n++ < 20 {print $3}')
        grep -qxF -- "$first" <<<"$starts" ||
            die "sitegrid-proxy: $first, the order's first function, is not at the start of its code"
        echo "sitegrid-proxy: linked with $(wc -l <"$order") functions first ($order)"
    fi
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
for b in "${BINS[@]}"; do
    bin=$TARGET_DIR/$TRIPLE/$PROFILE/sitegrid-$b
    [[ -x $bin ]] || die "$bin: not built"
    # FROM scratch has no loader and no libc: a dynamic binary would not start.
    file -L "$bin" | grep -q 'static' || die "$bin is not statically linked: $(file -L "$bin")"
    # Without the debug line tables (symbols stay): about 110 -> 20 MB.
    objcopy --strip-debug "$bin" "$ctx/sitegrid-$b"
done
for b in "${BINS[@]}"; do
    image=sitegrid/sitegrid-$b:$TAG
    # The previous build of this tag goes (vfs keeps every layer as a full copy).
    "${buildah[@]}" rmi -f "$image" >/dev/null 2>&1 || true
    "${buildah[@]}" bud --quiet --isolation chroot --build-arg BINARIES=context --target "$b" \
        -f "$ROOT/deploy/images/Dockerfile" -t "$image" "$ctx" >/dev/null
    container=$("${buildah[@]}" from "$image")
    version=$("${buildah[@]}" run --isolation chroot "$container" -- "/usr/local/bin/sitegrid-$b" --version) ||
        { "${buildah[@]}" rm "$container" >/dev/null; die "$image: the binary does not run in the image"; }
    "${buildah[@]}" rm "$container" >/dev/null
    echo "$image: $version, $("${buildah[@]}" inspect --format '{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}' "$image")"
done
