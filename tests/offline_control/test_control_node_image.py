# -*- coding: utf-8 -*-
"""An all-Kylin site: the bundle carries the control node itself (issue 47).

The bundle is built by playbooks/bundle_build.yml with `bundle_build_control_image: true`, the base being the bare
Debian control-node image of build-images.sh (Python 3.11, venv, ssh) and the ansible-core wheels for 3.11
(test_site_over_ssh's cache): the role builds the image offline, saves it by ID in parts (a small split size, so the
FAT32 path is the one taken), lists it in manifest.yml (kind control) and SHA256SUMS; a second build changes nothing.
The image's size and the bundle's growth are printed. The control machine is a fresh host of the test world's Kylin
image (systemd, Docker inside), its Pythons hidden behind a stand-in `python3` that answers as Kylin V10's 3.7 does,
the bundle mounted READ-ONLY at /mnt/airgap as a USB disk is.

1. test_a_kylin_machine_without_python_loads_the_bundled_image (no simulated host needed; a bundle of one small file
   and the image): a part that does not match SHA256SUMS is named and nothing is loaded; `sh setup-controller.sh`
   says no supported Python and loads the image (parts checked); `control-node.sh --exec` runs the image's
   ansible-playbook --version and ansible-inventory --list of the bundle's kylin-prod copied off the disk; the image
   holds no key, known host, API key or TLS key.
2. test_a_kylin_machine_without_python_deploys_from_the_bundled_image: tests/simulate's bundle (a hard-linked copy,
   test_site_over_ssh's `bundle` fixture) built again with the image; the Kylin machine on the site LAN with the
   site's inventory (inventories/simulated, its host renamed, SITE_HOST_VARS), SSH key and known host, and the site CA
   of the machine that converged the simulated host (as run_control_node sets them up); `sh setup-controller.sh`,
   then `sh control-node.sh INVENTORY` deploys the simulated GPU host over SSH + sudo (the first run from this new
   control node changes only its own state directory) and a second run gives changed=0. Needs tests/simulate's
   converged host (skips otherwise, with the command).
"""

import contextlib
import os
import re
import sys
import time

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# test_site_over_ssh's fixtures and helpers (its hosts, its bundle copy, its control-node images and wheels).
from test_site_over_ssh import (  # noqa: E402,F401  pylint: disable=unused-import
    BUNDLE,
    HOST,
    KYLIN_IMAGE,
    NAME,
    NET,
    ROOT,
    SITE_HOST_VARS,
    assert_first_run_changed_only_controller,
    assert_ops_logged_in_from,
    bundle,
    changed_tasks,
    control_node_images,
    docker,
    recaps,
    run,
    sim,
    sim_host,
    site_files,
    wheels,
)
from systemd_container import systemd_flags  # noqa: E402

KYLIN_CONTROL = "airgap-kylin-control"
KYLIN_CONTROL_ADDRESS = "10.231.8.24"
# Small parts, so that a build here takes the FAT32 path a 4 GiB part would (the engine tar is split too).
SPLIT = 100 * 1024 * 1024
# Kylin V10's own Python is 3.7; no registry here serves one: a stand-in answers setup-controller.sh's version question
# as it would, and nothing else runs.
PY37 = """#!/bin/sh
# Stands in for Kylin V10's /usr/bin/python3 (3.7.9): the test world has no 3.7 (tests/offline_control).
case "$*" in
  *version_info*) echo 3.7 ;;
  *) echo "python3 stand-in (3.7): not a usable interpreter" >&2; exit 1 ;;
esac
"""


def bundle_size(path):
    """Bytes of every file under path (the bundle as it goes on the disk)."""
    total = 0
    for d, _dirs, files in os.walk(path):
        total += sum(os.lstat(os.path.join(d, f)).st_size for f in files)
    return total


def build_bundle(dest, save_dir, base, extra_vars=None):
    """playbooks/bundle_build.yml over dest with the control-node image from base; the run's output. extra_vars come
    first: the image's settings given here win over theirs (tests/world/bundle-vars.yml turns the wheels off)."""
    cmd = ["ansible-playbook", "playbooks/bundle_build.yml"]
    for extra in extra_vars or ():
        cmd += ["-e", extra]
    cmd += [
        "-e",
        "bundle_build_dir=" + dest,
        "-e",
        '{"bundle_build_control_image": true, "bundle_build_wheels": true, "bundle_build_wheels_pythons": ["3.11"]}',
        "-e",
        "bundle_build_control_image_base=" + base,
        "-e",
        "bundle_build_wheels_from=" + wheels("3.11"),
        "-e",
        "bundle_build_image_save_dir=" + save_dir,
        "-e",
        "bundle_build_split_size=%d" % SPLIT,
    ]
    p = run(cmd, cwd=ROOT, timeout=1800, env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert p.returncode == 0, p.stdout[-6000:]
    return p.stdout


def with_control_image(dest, save_dir, extra_vars):
    """dest built (again) with the control-node image; checked: a second build changes nothing, the image's tar is
    listed in manifest.yml as kind control, in parts each in SHA256SUMS. Returns its manifest entry."""
    base = control_node_images(["bookworm"])["bookworm"]
    before = bundle_size(dest) if os.path.isdir(dest) else 0
    out = build_bundle(dest, save_dir, base, extra_vars)
    assert "Build the control-node image" in out and "Check the built image will do as the control node" in out
    grown = bundle_size(dest) - before
    again = build_bundle(dest, save_dir, base, extra_vars)
    recap = recaps(again, "localhost")
    assert recap and recap[-1]["changed"] == 0, (changed_tasks(again), again[-3000:])
    with open(os.path.join(dest, "manifest.yml")) as f:
        entries = [a for a in yaml.safe_load(f)["artifacts"] if a["kind"] == "control"]
    assert len(entries) == 1, entries
    entry = entries[0]
    with open(os.path.join(dest, "SHA256SUMS")) as f:
        sums = f.read()
    parts = entry.get("parts") or [entry]
    assert len(parts) == -(-entry["size"] // SPLIT) > 1, entry
    for part in parts:
        assert "%s  %s\n" % (part["sha256"], part["path"]) in sums, part
        assert os.path.getsize(os.path.join(dest, part["path"])) == part["size"]
    tag = "airgap-vllm-control:" + entry["version"]
    size = int(docker("image", "inspect", "-f", "{{.Size}}", tag).stdout.strip())
    grew = (
        "the bundle grew by %.0f MB (that tar, the 3.11 wheels, control-node.sh)" % (grown / 1e6)
        if before
        else "the whole bundle is %.0f MB" % (grown / 1e6)
    )
    print(
        "control-node image %s: %.0f MB (docker image size), its saved tar %.0f MB in %d parts; %s"
        % (tag, size / 1e6, entry["size"] / 1e6, len(parts), grew)
    )
    return entry


@pytest.fixture(scope="module")
def small_bundle(needs_docker, tmp_path_factory):
    """A bundle of one small file and the control-node image (no simulated host needed): (path, control entry)."""
    top = tmp_path_factory.mktemp("control-bundle")
    small = top / "small.bin"
    small.write_bytes(os.urandom(1 << 20))
    listed = top / "artifacts.yml"
    listed.write_text("bundle_build_artifacts:\n  - {kind: file, name: small, version: '1', src: %s}\n" % small)
    dest = str(top / "bundle")
    entry = with_control_image(
        dest, str(top / "images"), ["@" + str(listed), "bundle_build_hash_stamps=%s" % (top / "stamps.json")]
    )
    return dest, entry


@pytest.fixture
def control_bundle(bundle, tmp_path):  # noqa: F811 (test_site_over_ssh's fixture)
    """The copy of the simulated bundle, built again with the control-node image: (path, control entry)."""
    entry = with_control_image(bundle, str(tmp_path / "images"), ["@tests/world/bundle-vars.yml"])
    return bundle, entry


@contextlib.contextmanager
def kylin_machine(bundle_path, network, address=None):
    """A fresh Kylin-shaped machine (systemd, Docker inside) with no usable Python and the bundle read-only at
    /mnt/airgap; its name."""
    if docker("image", "inspect", KYLIN_IMAGE).returncode != 0:
        pytest.skip("no %s: bash tests/world/build.sh kylin" % KYLIN_IMAGE)
    docker("rm", "-fv", KYLIN_CONTROL)
    p = docker(
        *(
            ["run", "-d", "--name", KYLIN_CONTROL, "--hostname", KYLIN_CONTROL, "--network", network]
            + (["--ip", address] if address else [])
            + ["-v", "%s:/mnt/airgap:ro" % bundle_path]
            # Docker's data on a volume, not the container's overlay: the inner Docker then runs overlay2, not vfs
            # (vfs copied the whole image at each `docker run`: 2.5 min each); `docker rm -fv` removes it.
            + ["-v", "/var/lib/docker"]
            + systemd_flags()
            + [KYLIN_IMAGE, "/lib/systemd/systemd"]
        )
    )
    assert p.returncode == 0, p.stdout
    try:
        for dummy in range(120):
            if docker("exec", KYLIN_CONTROL, "docker", "info").returncode == 0:
                break
            time.sleep(1)
        assert docker("exec", KYLIN_CONTROL, "docker", "info").returncode == 0, "no Docker in %s" % KYLIN_CONTROL
        # No usable Python: Debian's interpreters moved away, Kylin's 3.7 stood in for.
        hide = (
            'mkdir -p /root/.hidden-python && for p in /usr/bin/python3*; do mv "$p" /root/.hidden-python/; done && '
            "cat >/usr/bin/python3 && chmod 0755 /usr/bin/python3"
        )
        p = docker("exec", "-i", KYLIN_CONTROL, "sh", "-euc", hide, input=PY37)
        assert p.returncode == 0, p.stdout
        p = docker(
            "exec", KYLIN_CONTROL, "sh", "-c", "command -v python3.10 python3.11 python3.12 python3.13; python3 -V"
        )
        assert p.returncode != 0 and "python3.1" not in p.stdout, p.stdout
        yield KYLIN_CONTROL
    finally:
        docker("rm", "-fv", KYLIN_CONTROL)


def on_control(*script, **kw):
    """script (shell lines) on the Kylin control machine as root, in the bundle, with the site's environment."""
    env = [
        "AIRGAP_SIM_NAME=" + NAME,
        "AIRGAP_SIM_SSH_DIR=/root/site-ssh",
        "AIRGAP_VLLM_SSH_DIR=/root/site-ssh",
        "AIRGAP_TEST_BUNDLE=/mnt/airgap",
        "ANSIBLE_NOCOLOR=1",
        "ANSIBLE_FORCE_COLOR=0",
    ] + (["AIRGAP_SIM_ADDRESS=" + kw["address"]] if kw.get("address") else [])
    args = ["exec", "-w", "/mnt/airgap"] + [x for e in env for x in ("-e", e)]
    return docker(*(args + [KYLIN_CONTROL, "sh", "-c", "\n".join(script)]), timeout=kw.get("timeout", 2400))


def setup_controller_loads_the_image(entry):
    """setup-controller.sh on the machine: no supported Python, so the image (parts checked, loaded), said so."""
    p = on_control("sh setup-controller.sh", timeout=900)
    assert p.returncode == 0, p.stdout[-4000:]
    assert "python3 is Python 3.7; the bundle has wheels for Python 3.11" in p.stdout, p.stdout
    assert "using the bundle's control-node image instead" in p.stdout, p.stdout
    n = len(entry.get("parts") or [entry])
    assert "checking %d file(s) of %s against SHA256SUMS" % (n, entry["path"]) in p.stdout, p.stdout
    assert re.search(r"image airgap-vllm-control:\S+ loaded \(sha256:[0-9a-f]{64}\)", p.stdout), p.stdout
    assert "Control node ready (the bundle's control-node image" in p.stdout, p.stdout
    # What the operator reads (the evidence issue 47 asks for): no supported Python, the parts checked, loaded.
    for ln in p.stdout.splitlines():
        if ln.startswith(("setup-controller.sh:", "control-node.sh:", "Control node ready")):
            print(ln)
    return p.stdout


def test_a_kylin_machine_without_python_loads_the_bundled_image(small_bundle, tmp_path):
    """No simulated host needed: a bad part refused; setup-controller.sh loads the image; its ansible-playbook and
    ansible-inventory run with the inventory mounted; nothing secret is in the image."""
    path, entry = small_bundle
    with kylin_machine(path, "bridge"):
        # A part that does not match SHA256SUMS (a copy of the image's files, one byte changed): named, nothing loaded.
        part = (entry.get("parts") or [entry])[-1]["path"]
        p = on_control(
            "mkdir -p /root/bad/artifacts && cp -a /mnt/airgap/control-node.sh /mnt/airgap/SHA256SUMS /root/bad/",
            "cp /mnt/airgap/%s* /root/bad/artifacts/" % entry["path"],
            "printf X | dd of=/root/bad/%s bs=1 seek=100 conv=notrunc 2>/dev/null" % part,
            "cd /root/bad && sh control-node.sh --load; echo rc=$?; echo images=$(docker images -q | wc -l)",
            "rm -rf /root/bad",
            timeout=900,
        )
        assert "%s: FAILED" % part in p.stdout, p.stdout[-3000:]
        assert "%s does not match SHA256SUMS: copy the bundle again" % entry["path"] in p.stdout, p.stdout[-3000:]
        assert "rc=1\nimages=0\n" in p.stdout, p.stdout[-3000:]
        setup_controller_loads_the_image(entry)
        # A second setup finds it loaded.
        p = on_control("sh control-node.sh --load")
        assert p.returncode == 0 and "is loaded (sha256:" in p.stdout, p.stdout
        # The image's own tools, with the bundle's inventory copied off the disk as the README says.
        inv = "/root/airgap-site/kylin-prod"
        p = on_control(
            "mkdir -p /root/airgap-site /root/site-ssh && cp -r /mnt/airgap/kylin-prod /root/airgap-site/",
            "sh control-node.sh --exec %s ansible-playbook --version" % inv,
            "sh control-node.sh --exec %s ansible-inventory -i %s --list" % (inv, inv),
        )
        assert p.returncode == 0, p.stdout[-4000:]
        print(p.stdout[:1500])
        assert re.search(r"^ansible-playbook \[core 2\.17\.\d+\]$", p.stdout, re.M), p.stdout[:2000]
        assert "config file = /mnt/airgap/ansible.cfg" in p.stdout, p.stdout[:2000]
        assert "ansible collection location = /mnt/airgap/collections" in p.stdout, p.stdout[:2000]
        inventory = yaml.safe_load(p.stdout[p.stdout.index("\n{") :])
        assert "vllm_servers" in inventory and inventory["_meta"]["hostvars"], p.stdout[-3000:]
        # Nothing secret in the image: no key, known host, API key or TLS key anywhere in it.
        p = on_control(
            "docker run --rm --network none --entrypoint /bin/sh airgap-vllm-control:%s -c "
            "\"find / -xdev \\( -name 'id_rsa*' -o -name 'id_ed25519*' -o -name 'id_ecdsa*' -o -name known_hosts -o -name vllm-api-key -o -name '*.key' \\) "
            "-not -path '/proc/*' -print; ansible-galaxy collection list airgap.vllm\"" % entry["version"]
        )
        assert p.returncode == 0, p.stdout
        assert [ln for ln in p.stdout.splitlines() if ln.startswith("/") and not ln.startswith("# ")] == [], p.stdout
        assert re.search(r"^airgap\.vllm\s+%s\s*$" % re.escape(entry["version"]), p.stdout, re.M), p.stdout


def test_a_kylin_machine_without_python_deploys_from_the_bundled_image(sim, control_bundle, tmp_path):  # noqa: F811
    """The simulated GPU host deployed over SSH + sudo from the image on a Kylin machine of the site LAN, twice."""
    path, entry = control_bundle
    address = sim["address"]
    # The site's files, as run_control_node's: inventory, key and known host, the converging machine's CA.
    site = tmp_path / "site"
    site.mkdir()
    inventory, ssh, state = site_files(site, sim)
    with kylin_machine(path, NET, KYLIN_CONTROL_ADDRESS):
        # /root, not a tmpfs (docker cp into one lands under it).
        assert docker("exec", KYLIN_CONTROL, "mkdir", "-p", "/root/airgap-site").returncode == 0
        for src, dst in (
            (inventory, "/root/airgap-site/kylin-prod"),
            (ssh, "/root/site-ssh"),
            (state, "/root/.airgap-vllm"),
        ):
            p = docker("cp", str(src), "%s:%s" % (KYLIN_CONTROL, dst))
            assert p.returncode == 0, p.stdout
        p = docker("exec", KYLIN_CONTROL, "sh", "-c", "chown -R root:root /root && chmod 0700 /root/site-ssh")
        assert p.returncode == 0, p.stdout
        setup_controller_loads_the_image(entry)
        # site.yml from the image, twice: the new control node's first run changes only its own state directory.
        inv = "/root/airgap-site/kylin-prod"
        t0 = time.time()
        runs = []
        for dummy in range(2):
            t = time.time()
            p = on_control("sh control-node.sh %s" % inv, address=address)
            assert p.returncode == 0, p.stdout[-6000:]
            recap = recaps(p.stdout, HOST)
            assert recap and recap[-1]["failed"] == 0 and recap[-1]["unreachable"] == 0, p.stdout[-6000:]
            runs.append(p.stdout)
            print("site.yml run %d from the image: %.0f s" % (len(runs), time.time() - t))
            print("\n".join(ln for ln in p.stdout.splitlines() if re.match(r"^%s\s+:\s+ok=" % re.escape(HOST), ln)))
        assert_first_run_changed_only_controller(runs[0])
        assert recaps(runs[1], HOST)[-1]["changed"] == 0, runs[1][-5000:]
        # Over SSH from the Kylin machine's address, as ops with root through sudo: the host's journal says so.
        assert_ops_logged_in_from(KYLIN_CONTROL_ADDRESS, t0)
        # The reports landed in the Kylin machine's ~/.airgap-vllm, mounted into the image.
        p = docker("exec", KYLIN_CONTROL, "test", "-f", "/root/.airgap-vllm/reports/%s/vllm/report.json" % HOST)
        assert p.returncode == 0, "no report fetched into the Kylin machine's ~/.airgap-vllm"
