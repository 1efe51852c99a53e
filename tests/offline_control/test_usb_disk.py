# -*- coding: utf-8 -*-
"""The USB disk, for real (issue 27): the README's bundle build line, then docs/site-setup.md's steps 1-3 on a FAT32
partition of a real disk image, in the offline control-node image.

1. The README's `ansible-playbook playbooks/bundle_build.yml -e @my-bundle.yml` (the line is taken from README.md's
   text) runs as written in a fresh copy of the working tree (tracked and new files, nothing ignored: its default
   build/bundle is the copy's), after the README's `bash tests/link-collection.sh` (in a clone nothing else makes
   airgap.vllm.bundle_build resolvable). my-bundle.yml has the shape the playbook's header shows and lists the test
   world's small artifacts (the driver .run, the toolkit RPMs, a model tar; not the engine image), the ansible-core
   wheels for the control node's Python taken offline from the cache test_site_over_ssh.py fills
   (bundle_build_wheels_from) and the hash stamps in the temp directory.
2. The disk: a sparse image file with a DOS partition table (sfdisk) and one FAT32 partition (mkfs.vfat -F 32,
   label AIRGAP), attached with `losetup --find --show --partscan`, the bundle copied onto it, fsck.fat clean.
3. The control node (airgap-test/controller:bookworm, --network none, --cap-add SYS_ADMIN, apparmor unconfined, no
   --privileged) gets the partition as /dev/sdb1 and runs the page's steps 1, 2 and 3 as written (site_setup_steps()
   of test_site_over_ssh.py). Proved: lsblk lists the partition with FSTYPE vfat and the label (as loopNp1: lsblk
   names the kernel's device; the same major:minor as /dev/sdb1); the mount is read-only (ro in /proc/self/mounts, a
   write fails with "Read-only file system"); `sha256sum -c --quiet` passed with no output; setup-controller.sh made
   the venv from the disk's wheels; `ansible-config dump --only-changed` from /mnt/airgap reads the bundle's
   ansible.cfg (its collections_path). The page's FAT32 note: the same mount with `,umask=000` makes the mount point
   world-writable and ansible-core warns "Ansible is being run in a world writable directory (/mnt/airgap), ignoring
   it as an ansible.cfg source" (no config file at all); with `,umask=022` the bundle's ansible.cfg is read again.

What this machine's kernel lacks, and what stands in for it (found with /proc/config.gz; a site's kernel has both):
- no DOS partition table parser (CONFIG_MSDOS_PARTITION unset): --partscan finds no partition, so `partx -a` (util-
  linux; the kernel's BLKPG ioctl) adds it from the table sfdisk wrote, as the kernel's own scan would;
- no vfat (CONFIG_VFAT_FS unset, no modules): the FAT32 partition is read through FUSE by Debian's fusefat (the host's
  package: .ci/setup), passed to the control node as /opt/fat-driver with a /sbin/mount.vfat helper, which mount(8)
  calls for a partition blkid says is vfat, with the command's options: `ro` is the mount's own ro flag, `umask=`
  libfuse's, as the kernel's vfat has them. The bundle is written through fusefat too (`-o rw+`): mtools' mcopy
  stores an all-lower-case 8.3 name (ansible.cfg, site.yml) as a short name with the NT case bits, which fusefat
  shows in upper case; the kernel's vfat (shortname=mixed) writes a long name for it, as fusefat does;
- no udevd (on this machine or in the container): lsblk's FSTYPE and LABEL come from the udev database, so the entry
  udev's blkid builtin writes is written from `blkid -p -o udev` of the partition and passed in as /run/udev.
Cost: the bundle build ~40 s, the control node ~15-30 s. Skips without Docker or without the test world's artifacts
(tests/world/build.sh).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_site_over_ssh import (  # noqa: E402
    CACHE,
    ROOT,
    SUITES,
    control_node_images,
    docker,
    run,
    site_setup_steps,
    wheels,
)

sys.path.insert(0, os.path.join(ROOT, "tests"))
from worktree import copy_tree  # noqa: E402

SUITE = "bookworm"
ARTIFACTS = os.path.join(CACHE, "artifacts")
# Small artifacts of the test world (tests/world/build.sh), in the playbook header's shape.
MY_BUNDLE = """---
bundle_build_artifacts:
  - {{kind: driver, name: nvidia-driver, version: 580.65.06, src: {a}/NVIDIA-Linux-x86_64-580.65.06.run}}
  - {{kind: toolkit, name: nvidia-container-toolkit, version: 1.17.8-1, src: {a}/nvidia-container-toolkit}}
  - {{kind: model, name: qwen3.x-27b-fp8, version: "1", src: {a}/qwen3.x-27b-fp8-tiny.tar}}
# Offline: the control node's wheels from a directory of pyX.Y/ (no pip download), and the stamps kept here.
bundle_build_wheels_pythons: ["{py}"]
bundle_build_wheels_from: {wheels}
bundle_build_hash_stamps: {tmp}/bundle-build-stamps.json
"""
NEEDED = ("NVIDIA-Linux-x86_64-580.65.06.run", "nvidia-container-toolkit", "qwen3.x-27b-fp8-tiny.tar")
LINK_LINE = "bash tests/link-collection.sh >/dev/null"
README_LINE = "ansible-playbook playbooks/bundle_build.yml -e @my-bundle.yml"
# mount(8) runs /sbin/mount.vfat SPEC DIR [-sfnv] [-N NS] [-o OPTIONS] for a partition blkid says is vfat.
MOUNT_VFAT = """#!/bin/sh
# This machine's kernel has no vfat: mount(8) hands the partition to fusefat (FUSE), with the command's options.
dev=$1 dir=$2 opts=
shift 2
while [ $# -gt 0 ]; do
    case $1 in -o) opts=$2; shift 2 ;; -o*) opts=${1#-o}; shift ;; -N|-t) shift 2 ;; *) shift ;; esac
done
echo "mount.vfat (fusefat): $dev $dir -o $opts" >&2
exec env LD_LIBRARY_PATH=/opt/fat-driver /opt/fat-driver/fusefat "$dev" "$dir" ${opts:+-o "$opts"} >/dev/null
"""
WORLD_WRITABLE = (
    "Ansible is being run in a world writable directory (/mnt/airgap), ignoring it as an ansible.cfg source."
)


@pytest.fixture(scope="module")
def controller(needs_docker):
    return control_node_images([SUITE])[SUITE]


def readme_lines():
    """The README's ```sh block that builds the bundle: its command lines, comments dropped, as written."""
    with open(os.path.join(ROOT, "README.md")) as f:
        for block in re.findall(r"```sh\n(.*?)```", f.read(), re.S):
            if "playbooks/bundle_build.yml" in block:
                return [ln for ln in (re.sub(r"\s+#\s.*$", "", x).strip() for x in block.splitlines()) if ln]
    raise AssertionError("no bundle_build.yml line in README.md's sh blocks")


def fat_driver(dest):
    """The host's fusefat and the libraries the control-node image may lack (not glibc's), with mount.vfat."""
    fusefat = shutil.which("fusefat")
    assert fusefat and shutil.which("mkfs.vfat") and shutil.which("sfdisk") and shutil.which("fsck.fat"), (
        "needs fusefat, dosfstools and fdisk (sfdisk): bash .ci/setup installs them"
    )
    os.makedirs(dest)
    shutil.copy(fusefat, dest)
    for lib in re.findall(r"=> (/\S+)", run(["ldd", fusefat]).stdout):
        if not re.match(r"lib(c|m|pthread|dl|rt)\.so", os.path.basename(lib)):
            shutil.copy(lib, dest)
    with open(os.path.join(dest, "mount.vfat"), "w") as f:
        f.write(MOUNT_VFAT)
    os.chmod(os.path.join(dest, "mount.vfat"), 0o755)
    return dest


def write_fat32(part, bundle, mnt):
    """mkfs.vfat, the bundle copied onto it through fusefat -o rw+ (foreground: the image is complete when it exits)."""
    p = run(["mkfs.vfat", "-F", "32", "-n", "AIRGAP", part])
    assert p.returncode == 0, p.stdout
    os.makedirs(mnt)
    daemon = subprocess.Popen(
        ["fusefat", "-f", "-o", "rw+", part, mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for dummy in range(100):
            if run(["mountpoint", "-q", mnt]).returncode == 0:
                break
            time.sleep(0.1)
        p = run(["cp", "-r", bundle + "/.", mnt + "/"], timeout=300)
        assert p.returncode == 0, p.stdout[-3000:]
    finally:
        run(["umount", mnt])
        daemon.wait(timeout=60)
    p = run(["fsck.fat", "-n", part])
    assert p.returncode == 0, p.stdout


def udev_db(part, dest):
    """/run/udev/data/b<major>:<minor> as udev's blkid builtin writes it (no udevd here)."""
    rdev = os.stat(part).st_rdev
    p = run(["blkid", "-p", "-o", "udev", part])
    assert p.returncode == 0 and "ID_FS_TYPE=vfat" in p.stdout, p.stdout
    os.makedirs(os.path.join(dest, "data"))
    with open(os.path.join(dest, "data", "b%d:%d" % (os.major(rdev), os.minor(rdev))), "w") as f:
        f.write("".join("E:%s\n" % ln for ln in p.stdout.splitlines() if ln) + "I:%d\n" % int(time.time() * 1e6))
    return dest


def control_node_script(steps):
    """docs/site-setup.md's steps 1, 2 and 3 as written, then the FAT32 note's two mounts (step 1's mount line with
    ,umask=000 and ,umask=022), each followed by `ansible-config dump --only-changed` from the bundle root."""
    mount = [c for c in steps[1] if " mount " in " %s " % c]
    assert len(mount) == 1 and re.search(r" -o \S+ ", mount[0]), steps[1]
    out = (
        ["set -eu", "echo '=== site-setup step 1'"]
        + steps[1]
        + [
            "stat -c '=== /dev/sdb1 %t:%T' /dev/sdb1",
            "grep ' /mnt/airgap ' /proc/self/mounts",
            "touch /mnt/airgap/written-by-the-control-node 2>&1 || true",
            "echo '=== site-setup step 2'",
        ]
        + steps[2]
        + ["echo '=== step 2 passed'", "echo '=== site-setup step 3'"]
        + steps[3]
        + [
            "echo \"=== venv $VIRTUAL_ENV\"",
            "stat -c '=== mode %a' .",
            "echo '=== ansible-config, default umask'",
            "ansible-config dump --only-changed",
        ]
    )
    for umask in ("000", "022"):
        out += [
            "cd / && umount /mnt/airgap",
            re.sub(r" -o (\S+) ", r" -o \1,umask=%s " % umask, mount[0]),
            "cd /mnt/airgap",
            "stat -c '=== mode %a' .",
            "echo '=== ansible-config, umask=%s'" % umask,
            "ansible-config dump --only-changed 2>&1",
        ]
    return "\n".join(out) + "\n"


def section(out, title):
    """The output after the line `=== title`, up to the next `===` line."""
    m = re.search(r"^=== %s\n(.*?)(?=^===|\Z)" % re.escape(title), out, re.M | re.S)
    assert m, "no section %r in:\n%s" % (title, out[-3000:])
    return m.group(1)


def config_file(text):
    m = re.search(r"^CONFIG_FILE\(\) = (.*)$", text, re.M)
    assert m, text[-3000:]
    return m.group(1)


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="airgap-usb-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_usb_disk_from_the_readme_build_to_the_control_node(controller, tmp):
    missing = [n for n in NEEDED if not os.path.exists(os.path.join(ARTIFACTS, n))]
    if missing:
        pytest.skip("no test world artifacts %s in %s: bash tests/world/build.sh" % (missing, ARTIFACTS))
    t0 = time.time()
    # 1. The README's line, from a fresh copy of the working tree (its default bundle dir: the copy's build/bundle).
    lines = readme_lines()
    assert lines == [LINK_LINE, README_LINE], lines
    clone = os.path.join(tmp, "airgap-vllm")
    copy_tree(ROOT, clone)
    assert not os.path.exists(os.path.join(clone, "build"))
    with open(os.path.join(clone, "my-bundle.yml"), "w") as f:
        f.write(MY_BUNDLE.format(a=ARTIFACTS, py=SUITES[SUITE], wheels=wheels(SUITES[SUITE]), tmp=tmp))
    env = dict(
        (k, v)
        for k, v in os.environ.items()
        if not k.startswith("ANSIBLE_") and k not in ("AIRGAP_TEST_BUNDLE", "PYTHONPATH")
    )
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    p = run(["bash", "-euc", "\n".join(lines)], cwd=clone, env=env, timeout=900)
    assert p.returncode == 0, p.stdout[-5000:]
    assert re.search(r"^localhost\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", p.stdout, re.M), p.stdout
    bundle = os.path.join(clone, "build", "bundle")
    for rel in (
        "manifest.yml",
        "SHA256SUMS",
        "ansible.cfg",
        "setup-controller.sh",
        "artifacts/" + NEEDED[0],
        "artifacts/" + NEEDED[2],
        "wheels/py%s" % SUITES[SUITE],
    ):
        assert os.path.exists(os.path.join(bundle, rel)), rel
    built = time.time()
    # 2. The disk image: DOS label, one FAT32 (LBA) partition, the bundle on it.
    image = os.path.join(tmp, "usb.img")
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    p = run(["sfdisk", "-q", image], input="label: dos\n,,c\n")
    assert p.returncode == 0, p.stdout
    name = "airgap-usb-disk-%d" % os.getpid()
    loop = None
    try:
        p = run(["losetup", "--find", "--show", "--partscan", image])
        assert p.returncode == 0, p.stdout
        loop = p.stdout.strip()
        part = loop + "p1"
        if not os.path.exists(part):  # no partition table parser in this kernel: tell it the partition
            p = run(["partx", "-a", loop])
            assert p.returncode == 0, p.stdout
            for dummy in range(50):
                if os.path.exists(part):
                    break
                time.sleep(0.1)
        assert os.path.exists(part), run(["lsblk", loop]).stdout
        rdev = os.stat(part).st_rdev
        write_fat32(part, bundle, os.path.join(tmp, "mnt"))
        driver = fat_driver(os.path.join(tmp, "fat-driver"))
        udev = udev_db(part, os.path.join(tmp, "udev"))
        # 3. The control node, no network, the partition as /dev/sdb1 (and under its own name, for lsblk).
        steps = site_setup_steps()
        docker("rm", "-fv", name)
        p = docker(
            "run",
            "--rm",
            "--name",
            name,
            "--network",
            "none",
            "--cap-add",
            "SYS_ADMIN",
            "--security-opt",
            "apparmor=unconfined",
            "--device",
            "/dev/fuse",
            "--device",
            part,
            "--device",
            "%s:/dev/sdb1" % part,
            "-v",
            "%s:/run/udev:ro" % udev,
            "-v",
            "%s:/opt/fat-driver:ro" % driver,
            "-v",
            "%s/mount.vfat:/usr/sbin/mount.vfat:ro" % driver,
            "-e",
            "ANSIBLE_NOCOLOR=1",
            "-e",
            "ANSIBLE_FORCE_COLOR=0",
            controller,
            "sh",
            "-c",
            control_node_script(steps),
            timeout=900,
        )
    finally:
        docker("rm", "-fv", name)
        if loop:
            run(["losetup", "-d", loop])
    out = p.stdout
    print("bundle build %.0f s, disk and control node %.0f s" % (built - t0, time.time() - built))
    assert p.returncode == 0, out[-6000:]
    # Step 1: lsblk shows the partition (the kernel's name for /dev/sdb1's device) as vfat with the disk's label.
    lsblk = section(out, "site-setup step 1")
    assert lsblk.splitlines()[0].split() == ["NAME", "SIZE", "FSTYPE", "LABEL"], lsblk
    assert re.search(r"%s\s+\S+\s+vfat\s+AIRGAP$" % re.escape(os.path.basename(part)), lsblk, re.M), lsblk
    maj_min = re.search(r"^=== /dev/sdb1 (\w+):(\w+)$", out, re.M)
    assert maj_min, out[:3000]
    assert (int(maj_min.group(1), 16), int(maj_min.group(2), 16)) == (os.major(rdev), os.minor(rdev)), out[:3000]
    # Read-only: the mount's own flag, and a write fails.
    mounts = re.search(r"^\S+ /mnt/airgap (\S+) (\S+) ", out, re.M)
    assert mounts and mounts.group(2).split(",")[0] == "ro", out[:3000]
    assert "touch: cannot touch '/mnt/airgap/written-by-the-control-node': Read-only file system" in out, out[:3000]
    # Step 2: every file as built, no output.
    assert section(out, "site-setup step 2").strip() == "", out[-4000:]
    assert "=== step 2 passed" in out
    # Step 3: the venv from the disk's wheels, activated.
    assert "Control node ready (Python %s" % SUITES[SUITE] in out, out[-4000:]
    assert "=== venv /root/.airgap-vllm/venv" in out, out[-4000:]
    # The bundle's ansible.cfg is read with the default umask (and with umask=022); umask=000 makes Ansible ignore it.
    default, wide, narrow = (section(out, "ansible-config, " + t) for t in ("default umask", "umask=000", "umask=022"))
    for text in (default, narrow):
        assert config_file(text) == "/mnt/airgap/ansible.cfg", text
        assert "COLLECTIONS_PATHS(/mnt/airgap/ansible.cfg) = ['/mnt/airgap/collections']" in text, text
        assert "world writable" not in text
    # The mount point's mode: not world-writable by default (fusefat: 0700, the kernel's vfat: 0755), 0777, 0755.
    modes = [int(m, 8) for m in re.findall(r"^=== mode (\d+)$", out, re.M)]
    assert len(modes) == 3 and not modes[0] & 0o002 and modes[1:] == [0o777, 0o755], [oct(m) for m in modes]
    assert WORLD_WRITABLE in " ".join(wide.split()), wide
    assert config_file(wide) == "None", wide
