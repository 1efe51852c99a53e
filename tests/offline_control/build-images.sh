#!/usr/bin/env bash
# Control-node images for the offline-control tests: a bare Debian with python3, its venv module and ssh, one
# per Python version (bookworm: 3.11, trixie: 3.13), debootstrapped from the Debian archive the way
# tests/world/build.sh builds airgap-test/base:bookworm. Keyed by a hash of the inputs (suite, packages,
# mirror, this function's text): an unchanged image is not built again (< 1 s). No Docker Hub needed.
# Usage: bash tests/offline_control/build-images.sh [SUITE...]   (default: bookworm trixie)
# Prints one "SUITE IMAGE" line per image. Env: AIRGAP_TEST_CACHE, AIRGAP_TEST_MIRROR as tests/world/build.sh.
set -euo pipefail

CACHE=${AIRGAP_TEST_CACHE:-/var/cache/airgap-test}
LABEL=org.airgap-test.inputs-hash
# openssh-client: the control node reaches the servers over SSH (a Kylin control node has openssh-clients).
PACKAGES=python3,python3-venv,ca-certificates,openssh-client

log() { printf '[offline-control %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mirror() {
    if [[ -n ${AIRGAP_TEST_MIRROR:-} ]]; then echo "$AIRGAP_TEST_MIRROR"; return; fi
    local m
    m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1 || true)
    [[ -n $m ]] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^http/) {print $i; exit}}' | grep -v security | head -n1 || true)
    echo "${m:-http://deb.debian.org/debian}"
}

image_hash() { docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$1" 2>/dev/null || true; }

build_rootfs() { # SUITE ROOTFS
    local suite=$1 r=$2
    rm -rf "$r" && mkdir -p "$r" "$CACHE/debs-$suite"
    debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$CACHE/debs-$suite" "$suite" "$r" "$(mirror)" >&2
    rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"*
}

# One build at a time on this machine (the offline-control step and molecule serve's side_effect may ask at once).
mkdir -p "$CACHE"
exec 9>"$CACHE/.controller-images.lock"
flock 9

for suite in "${@:-bookworm trixie}"; do
  for s in $suite; do
    image=airgap-test/controller:$s
    hash=$(printf '%s\n' "$s" "$PACKAGES" "$(mirror)" "$(declare -f build_rootfs)" | sha256sum | cut -c1-16)
    if [[ $(image_hash "$image") != "$hash" ]]; then
        r=$CACHE/rootfs/controller-$s
        log "debootstrap $s ($PACKAGES) -> $image"
        build_rootfs "$s" "$r"
        tar --numeric-owner -C "$r" -c . | docker import --change "LABEL $LABEL=$hash" - "$image" >/dev/null
        rm -rf "$r"
    fi
    echo "$s $image"
  done
done
