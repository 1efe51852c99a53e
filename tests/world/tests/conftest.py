"""Fixtures for the tests of the test world's fakes.

Tests marked `world` run inside throwaway containers of airgap-test/kylin:v10sp3 (no network) against fakes built
fresh from this work tree; they are skipped only when docker is absent. A missing image is an error: build it
with `bash tests/world/build.sh`.
"""

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from worldlib import FAKES, KYLIN_IMAGE, NEW_DRIVER, OLD_DRIVER, TOOLKIT, Container, sh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from systemd_container import systemd_flags  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "world: needs docker and the airgap-test/kylin:v10sp3 image")


def docker_available():
    if not shutil.which("docker"):
        return False
    return (
        subprocess.run(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
        == 0
    )


def pytest_collection_modifyitems(config, items):
    if docker_available():
        return
    skip = pytest.mark.skip(reason="docker is not available")
    for item in items:
        if "world" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The .run and the RPMs built from the current sources (not the cached artifacts)."""
    out = tmp_path_factory.mktemp("fakes-built")
    for cmd in (
        ["bash", os.path.join(FAKES, "driver", "make-run.sh"), NEW_DRIVER, str(out)],
        ["bash", os.path.join(FAKES, "rpm", "build-rpms.sh"), "driver", OLD_DRIVER, str(out / "driver")],
        ["bash", os.path.join(FAKES, "rpm", "build-rpms.sh"), "toolkit", TOOLKIT, str(out / "toolkit")],
        ["bash", os.path.join(FAKES, "rpm", "build-rpms.sh"), "fabricmanager", NEW_DRIVER, str(out / "fabricmanager")],
    ):
        p = sh(cmd)
        assert p.returncode == 0, p.stderr
    for fake in ("fake-reboot", "fake-kmod"):
        shutil.copy(os.path.join(FAKES, "driver", fake), str(out / fake))
    p = sh(["createrepo_c", "-q", str(out / "toolkit")])
    assert p.returncode == 0, p.stderr
    os.chmod(str(out), 0o755)
    return out


# What a systemd + docker-in-docker container needs here (tests/systemd_container.py), every capability but one.
SYSTEMD_FLAGS = systemd_flags(["ALL"]) + ["--cap-drop", "SYS_RESOURCE"]


def container(built, extra, command):
    if sh(["docker", "image", "inspect", KYLIN_IMAGE]).returncode != 0:
        pytest.fail("image %s missing: run bash tests/world/build.sh" % KYLIN_IMAGE)
    name = "fakes-test-%s" % uuid.uuid4().hex[:10]
    p = sh(
        ["docker", "run", "-d", "--rm", "--network", "none", "--name", name, "-v", "%s:/opt/fakes:ro" % built]
        + extra
        + [KYLIN_IMAGE]
        + command
    )
    assert p.returncode == 0, p.stderr
    return Container(name)


@pytest.fixture
def kylin(built):
    """A throwaway Kylin-shaped container, no network, with the fresh fakes under /opt/fakes."""
    c = container(built, [], ["sleep", "infinity"])
    try:
        yield c
    finally:
        sh(["docker", "rm", "-f", c.name])


@pytest.fixture
def kylin_systemd(built):
    """The same, booted with systemd (inner dockerd running), as molecule runs it."""
    c = container(built, SYSTEMD_FLAGS, ["/lib/systemd/systemd"])
    try:
        p = c.run(
            "for i in $(seq 120); do s=$(systemctl is-system-running 2>/dev/null); "
            "case $s in running|degraded) break;; esac; sleep 0.5; done; echo $s"
        )
        assert p.stdout.strip() == "running", p.stdout + c.run("systemctl --failed").stdout
        yield c
    finally:
        sh(["docker", "rm", "-f", c.name])
