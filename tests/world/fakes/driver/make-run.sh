#!/usr/bin/env bash
# Builds a test-world NVIDIA-Linux-x86_64-VERSION.run in OUTDIR: the same makeself self-extracting format as
# NVIDIA's, running the stand-in nvidia-installer with the fake NVML library/nvidia-smi and module source.
# Usage: make-run.sh VERSION OUTDIR   (env FAKE_RUN_MODULE_VERSION: see below)
set -euo pipefail
VERSION=${1:?usage: make-run.sh VERSION OUTDIR}
OUTDIR=${2:?usage: make-run.sh VERSION OUTDIR}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=NVIDIA-Linux-x86_64-$VERSION
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pkg=$work/$NAME
mkdir -p "$pkg/kernel" "$OUTDIR"
make -s -C "$HERE/../nvml" VERSION="$VERSION" OUT="$pkg" >&2
install -m 0755 "$HERE/nvidia-installer" "$pkg/nvidia-installer"
sed "s/@VERSION@/$VERSION/" "$HERE/nvidia-persistenced" >"$pkg/nvidia-persistenced" && chmod 0755 "$pkg/nvidia-persistenced"
# The sample init files the real .run leaves in /usr/share/doc/NVIDIA_GLX-1.0/samples (it installs no unit).
init=$work/nvidia-persistenced-init
mkdir -p "$init/systemd"
cat >"$init/systemd/nvidia-persistenced.service.template" <<'UNIT'
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user __USER__
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
UNIT
tar -C "$work" -cjf "$pkg/nvidia-persistenced-init.tar.bz2" --owner=0 --group=0 --mtime=@0 nvidia-persistenced-init
printf 'NVIDIA Accelerated Graphics Driver for Linux-x86_64\n%s\n' "$VERSION" >"$pkg/.manifest"
cp "$HERE/kernel-module/nvidia.c" "$HERE/kernel-module/Makefile" "$pkg/kernel/"
# FAKE_RUN_MODULE_VERSION: a broken package whose kernel module is not its userland's version (NVML then says
# "Driver/library version mismatch" once that module is loaded) - the rollback tests' bad driver.
echo "${FAKE_RUN_MODULE_VERSION:-$VERSION}" >"$pkg/kernel/version"
sed "s/@VERSION@/$VERSION/" "$HERE/kernel-module/dkms.conf.in" >"$pkg/kernel/dkms.conf"

# NVIDIA's makeself passes options it does not know on to nvidia-installer (which then rejects unknown ones)
# and knows -x/--extract-only; stock makeself rejects them itself, so patch its header the same way.
header=$work/makeself-header.sh
sed -e 's/^    -\*)$/    -x | --extract-only)\n\tscript=""\n\tcleanup_script=""\n\tkeep=y\n\tshift\n\t;;\n    -*)\n\tbreak ;;\n    -__unused__)/' \
    /usr/share/makeself/makeself-header.sh >"$header"
grep -q -- '-x | --extract-only)' "$header" || { echo "make-run.sh: makeself header layout changed" >&2; exit 1; }
makeself --quiet --noprogress --nox11 --gzip --complevel 6 --header "$header" \
    --tar-extra "--owner=0 --group=0 --numeric-owner" \
    "$pkg" "$OUTDIR/$NAME.run" "NVIDIA Accelerated Graphics Driver for Linux-x86_64 $VERSION" ./nvidia-installer >&2
chmod 0755 "$OUTDIR/$NAME.run"
echo "$OUTDIR/$NAME.run"
