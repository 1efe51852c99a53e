#!/usr/bin/env bash
# Builds the test-world RPMs with rpmbuild (works on the Debian build host).
# Usage: build-rpms.sh driver VERSION OUTDIR       -> nvidia-driver{,-libs,-cuda}, kmod-nvidia-latest-dkms
#        build-rpms.sh toolkit VERSION-RELEASE OUTDIR -> libnvidia-container1, libnvidia-container-tools,
#                                                      nvidia-container-toolkit-base, nvidia-container-toolkit
#        build-rpms.sh fabricmanager VERSION OUTDIR  -> nvidia-fabric-manager{,-devel}-VERSION-1.x86_64.rpm
#        build-rpms.sh kylin-release KERNEL OUTDIR -> kylin-release (release files + Provides for the image)
set -euo pipefail
KIND=${1:?usage: build-rpms.sh driver|toolkit VERSION OUTDIR}
VERSION=${2:?version}
OUTDIR=${3:?outdir}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FAKES=$(cd "$HERE/.." && pwd)
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
src=$top/SOURCES
mkdir -p "$src" "$OUTDIR"

case $KIND in
driver)
    make -s -C "$FAKES/nvml" VERSION="$VERSION" OUT="$src" >&2
    mkdir -p "$src/kernel"
    cp "$FAKES/driver/kernel-module/nvidia.c" "$FAKES/driver/kernel-module/Makefile" "$src/kernel/"
    echo "$VERSION" >"$src/kernel/version"
    sed "s/@VERSION@/$VERSION/" "$FAKES/driver/kernel-module/dkms.conf.in" >"$src/kernel/dkms.conf"
    printf 'This NVIDIA driver was installed from RPM packages (nvidia-driver %s). Use the package manager\n' \
        "$VERSION" >"$src/alternate-install-present"
    printf 'to update or remove it: dnf remove nvidia-driver\\* kmod-nvidia\\*\n' >>"$src/alternate-install-present"
    printf '#!/bin/sh\necho "nvidia-cuda-mps-control: test-world stand-in" >&2\nexit 1\n' >"$src/nvidia-cuda-mps-control"
    echo "NVIDIA driver $VERSION (test-world stand-in)" >"$src/README.txt"
    rpmbuild -bb --quiet --target x86_64 --define "_topdir $top" --define "drv_version $VERSION" \
        "$HERE/nvidia-driver.spec" >&2
    ;;
toolkit)
    ver=${VERSION%-*} rel=${VERSION##*-}
    [[ $ver != "$VERSION" ]] || { echo "toolkit version must be VERSION-RELEASE" >&2; exit 2; }
    for f in nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook nvidia-container-cli; do
        sed "s/@VERSION@/$ver/" "$FAKES/toolkit/$f" >"$src/$f"
    done
    gcc -shared -fPIC -O2 -DVERSION="\"$ver\"" -Wl,-soname,libnvidia-container.so.1 \
        -o "$src/libnvidia-container.so.$ver" "$FAKES/toolkit/libnvidia-container.c"
    printf '#disable-require = false\n[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n\n[nvidia-container-runtime]\nmode = "auto"\nruntimes = ["runc"]\n' \
        >"$src/config.toml"
    rpmbuild -bb --quiet --target x86_64 --define "_topdir $top" --define "tk_version $ver" \
        --define "tk_release $rel" "$HERE/nvidia-container-toolkit.spec" >&2
    ;;
fabricmanager)
    sed "s/@VERSION@/$VERSION/" "$FAKES/fabricmanager/nv-fabricmanager" >"$src/nv-fabricmanager"
    cp "$FAKES/fabricmanager/nvidia-fabricmanager.service" "$FAKES/fabricmanager/fabricmanager.cfg" "$src/"
    printf '/* Fabric Manager %s API types (test-world stand-in) */
' "$VERSION" >"$src/nv_fm_types.h"
    rpmbuild -bb --quiet --target x86_64 --define "_topdir $top" --define "fm_version $VERSION" \
        "$HERE/nvidia-fabric-manager.spec" >&2
    ;;
kylin-release)
    # VERSION here is the Kylin kernel release the image pretends to run.
    rpmbuild -bb --quiet --define "_topdir $top" --define "kylin_kernel $VERSION" "$HERE/kylin-release.spec" >&2
    ;;
*) echo "unknown kind $KIND" >&2; exit 2 ;;
esac
find "$top/RPMS" -name '*.rpm' -exec cp {} "$OUTDIR/" \;
ls "$OUTDIR"/*.rpm
