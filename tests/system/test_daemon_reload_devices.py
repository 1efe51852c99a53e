"""The systemd-cgroup daemon-reload hazard and NVIDIA's remedy, on a throwaway Kylin test-world host (issue 46).

On a Docker daemon with the systemd cgroup driver, `systemctl daemon-reload` (our roles run it when a unit changes)
takes the GPUs from other running GPU containers ("Failed to initialize NVML: Unknown Error") unless each NVIDIA
device node has a /dev/char/MAJOR:MINOR link. The host here is the test world's Kylin image under real systemd, its
inner dockerd switched to the systemd cgroup driver, with real character device nodes (mknod 195:0, 195:255). The
device cgroup of a GPU container is modelled by daemon_reload/fake_gpu_cgroup.py (test only), run by real systemd
as a generator on every daemon-reload; the remedy is the nvidia_toolkit role's own tasks (probe.yml, dev_char.yml)
run by ansible-playbook with the world's fake nvidia-ctk. Asserted: without the remedy the neighbour loses its GPUs
through a reload; --check reports the change and makes none; the role then creates the links and NVIDIA's udev rule
(with our marker), a recreated neighbour keeps its GPUs through a reload, and a second run changes nothing. Needs
docker and the test world's airgap-test/kylin:v10sp3 image."""

import os
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CASE = os.path.join(HERE, "daemon_reload")
RULE = "/lib/udev/rules.d/71-nvidia-dev-char.rules"
NVML_LOST = "Failed to initialize NVML: Unknown Error"
sys.path.insert(0, os.path.join(ROOT, "tests"))

from systemd_container import KYLIN_IMAGE as IMAGE, docker, needs_image, play_on_container, systemd_flags  # noqa: E402

pytestmark = [needs_image(IMAGE)]


def sh(name, script):
    return docker("exec", name, "sh", "-c", script)


@pytest.fixture(scope="module")
def host():
    name = "airgap-reload-" + uuid.uuid4().hex[:8]
    r = docker("run", "-d", "--name", name, "--network", "none", *systemd_flags(), IMAGE, "/lib/systemd/systemd")
    assert r.returncode == 0, r.stderr
    try:
        for dummy in range(60):
            state = sh(name, "systemctl is-system-running").stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(1)
        for src, dest in (
            (os.path.join(CASE, "fake_gpu_cgroup.py"), "/usr/local/libexec/fake_gpu_cgroup.py"),
            (os.path.join(ROOT, "tests", "world", "fakes", "toolkit", "nvidia-ctk"), "/usr/bin/nvidia-ctk"),
        ):
            assert sh(name, "mkdir -p %s" % os.path.dirname(dest)).returncode == 0
            r = docker("cp", src, "%s:%s" % (name, dest))
            assert r.returncode == 0, r.stderr
        r = sh(
            name,
            "set -e; chmod 755 /usr/local/libexec/fake_gpu_cgroup.py /usr/bin/nvidia-ctk;"
            " mkdir -p /etc/systemd/system-generators /dev/char /etc/docker;"
            " printf '#!/bin/sh\\nexec python3 /usr/local/libexec/fake_gpu_cgroup.py reload\\n'"
            " > /etc/systemd/system-generators/fake-gpu-cgroup;"
            " chmod 755 /etc/systemd/system-generators/fake-gpu-cgroup;"
            # One GPU and the control device, as the driver makes them (major 195).
            " mknod -m 666 /dev/nvidia0 c 195 0; mknod -m 666 /dev/nvidiactl c 195 255;"
            # Docker with the systemd cgroup driver (vfs: the storage driver docker-in-docker runs here).
            ' echo \'{"exec-opts": ["native.cgroupdriver=systemd"], "storage-driver": "vfs"}\' > /etc/docker/daemon.json;'
            " systemctl restart docker; docker info --format '{{.CgroupDriver}}'",
        )
        assert r.returncode == 0 and r.stdout.strip() == "systemd", r.stdout + r.stderr
        yield {"name": name}
    finally:
        docker("rm", "-f", name)


def neighbour_smi(host, name="neighbour"):
    return docker("exec", host["name"], "python3", "/usr/local/libexec/fake_gpu_cgroup.py", "nvidia-smi", name)


def start_neighbour(host, name="neighbour"):
    r = docker("exec", host["name"], "python3", "/usr/local/libexec/fake_gpu_cgroup.py", "start", name)
    assert r.returncode == 0, r.stderr


def daemon_reload(host):
    r = sh(host["name"], "systemctl daemon-reload")
    assert r.returncode == 0, r.stderr


def play(host, tmp_path, check=False):
    r = play_on_container(host["name"], os.path.join(CASE, "remedy.yml"), tmp_path, check=check)
    assert r["failed"] == 0 and r["rc"] == 0, r["out"][-4000:]
    return r


def test_without_the_remedy_a_reload_takes_the_neighbours_gpus(host):
    start_neighbour(host)
    before = neighbour_smi(host)
    assert before.returncode == 0 and before.stdout.startswith("GPU 0: "), before.stdout
    daemon_reload(host)
    after = neighbour_smi(host)
    assert after.returncode != 0 and after.stdout.strip() == NVML_LOST


def test_with_the_roles_remedy_the_neighbour_keeps_its_gpus(host, tmp_path):
    name = host["name"]
    # --check: says what it would do, does none of it.
    dry = play(host, tmp_path, check=True)
    assert dry["changed"] >= 2, dry["out"][-3000:]
    assert "Would link /dev/nvidia0, /dev/nvidiactl" in dry["out"], dry["out"][-3000:]
    assert sh(name, "ls -A /dev/char").stdout.strip() == ""
    assert sh(name, "test -e " + RULE).returncode != 0
    # The real run: links now, NVIDIA's rule for the next boot.
    real = play(host, tmp_path)
    assert real["changed"] >= 2, real["out"][-3000:]
    links = sh(name, "readlink /dev/char/195:0 /dev/char/195:255").stdout.split()
    assert links == ["../nvidia0", "../nvidiactl"], links
    rule = sh(name, "cat " + RULE).stdout
    assert rule.splitlines()[0].startswith("# airgap.vllm.nvidia_toolkit:")
    assert (
        'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", '
        'RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"'
    ) in rule.splitlines()
    # The affected container must be recreated (NVIDIA's note); then it keeps its GPUs through reloads.
    start_neighbour(host)
    for dummy in range(2):
        daemon_reload(host)
        kept = neighbour_smi(host)
        assert kept.returncode == 0 and kept.stdout.startswith("GPU 0: "), kept.stdout
    # Converged: nothing to change.
    again = play(host, tmp_path)
    assert again["changed"] == 0, again["out"][-3000:]
    # The model can fail: a link removed, the next reload takes the GPUs again.
    sh(name, "rm /dev/char/195:255")
    daemon_reload(host)
    assert neighbour_smi(host).stdout.strip() == NVML_LOST
