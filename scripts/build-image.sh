#!/usr/bin/env bash
# Builds the operator image from Containerfile with buildah: no Docker daemon, no registry.
#
#   scripts/build-image.sh                 # local Debian base (built once, then cached), then the image
#   scripts/build-image.sh --base python:3.11-slim-bookworm   # the normal base, from a registry
#   scripts/build-image.sh --rebuild-base  # rebuild the cached local base
#
# The local base is Debian bookworm (python3 3.11, python3-venv, ca-certificates) made with
# debootstrap from the Debian mirror ($DEBIAN_MIRROR) and imported with `buildah from scratch`,
# so nothing is pulled from an image registry. The image is tagged localhost/kuberay-py:<version>.
# pip in the build stage trusts the host's CA bundle (a TLS-intercepting proxy the host trusts
# keeps working); PyPI (or $PIP_INDEX_URL) must be reachable.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_TAG=localhost/kuberay-base:bookworm
# chroot: RUN steps need no OCI runtime or cgroups (crun refuses a hybrid cgroup hierarchy).
ISOLATION=${BUILDAH_ISOLATION:-chroot}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
IMAGE=${KUBERAY_IMAGE:-localhost/kuberay-py:$VERSION}
base=""
rebuild_base=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --base) base=$2; shift 2 ;;
        --rebuild-base) rebuild_base=1; shift ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
need() {
    command -v "$1" >/dev/null || { echo "$1 is missing: apt-get install -y $1" >&2; exit 1; }
}
need buildah
[[ $(id -u) -eq 0 ]] || { echo "run as root (debootstrap and buildah mount need it)" >&2; exit 1; }

seconds() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(seconds)" 'BEGIN { printf "%.1f", b - a }'; }

build_base() {
    local t0 rootfs ctr mnt
    need debootstrap
    t0=$(seconds)
    rootfs=$(mktemp -d /var/tmp/kuberay-base.XXXXXX)
    trap 'rm -rf "$rootfs"' RETURN
    echo "==> debootstrap bookworm (minbase + python3) from $MIRROR"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 || {
        tail -n 30 "$rootfs.log" >&2
        exit 1
    }
    rm -f "$rootfs.log"
    # What an image does not need: package caches and lists, documentation, locales.
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
    echo "==> importing the root file system as $BASE_TAG"
    ctr=$(buildah from scratch)
    mnt=$(buildah mount "$ctr")
    cp -a "$rootfs"/. "$mnt"/
    buildah umount "$ctr" >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd /bin/bash --os linux --arch amd64 \
        --label org.opencontainers.image.description="Debian bookworm with python3 (local base)" \
        "$ctr"
    buildah commit --rm --quiet "$ctr" "$BASE_TAG" >/dev/null
    echo "base built in $(elapsed "$t0") s"
}

if [[ -z $base ]]; then
    if [[ $rebuild_base -eq 1 ]] || ! buildah inspect --type image "$BASE_TAG" >/dev/null 2>&1; then
        build_base
    else
        echo "==> reusing $BASE_TAG (--rebuild-base to refresh it)"
    fi
    base=$BASE_TAG
fi

pip_args=()
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    pip_args=(--volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro
              --build-arg PIP_CERT=/run/host-ca.crt)
fi
if [[ -n ${PIP_INDEX_URL:-} ]]; then
    pip_args+=(--build-arg PIP_INDEX_URL="$PIP_INDEX_URL")
fi
echo "==> building $IMAGE from $base"
t0=$(seconds)
buildah bud --layers --isolation "$ISOLATION" --network host --build-arg BASE_IMAGE="$base" "${pip_args[@]}" \
    -f Containerfile -t "$IMAGE" .
echo "image built in $(elapsed "$t0") s"
echo "uncompressed: $(buildah images --format '{{.Size}}' "$IMAGE")"
# What a registry would store: the layers as an OCI layout exports them (gzip).
layout=$(mktemp -d /var/tmp/kuberay-oci.XXXXXX)
buildah push --quiet "$IMAGE" "oci:$layout:image" >/dev/null
echo "OCI layout (gzip layers + config): $(du -sh --apparent-size "$layout/blobs" | cut -f1)"
rm -rf "$layout"
