"""The simulated Kylin GPU host is what every scenario builds on: prove each piece of it is real."""
import json

import pytest

testinfra_hosts = ["kylin-target"]


def test_systemd_is_running(host):
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), host.run("systemctl --failed --no-legend").stdout


def test_os_is_kylin_v10_sp3(host):
    os_release = host.file("/etc/os-release").content_string
    assert 'NAME="Kylin Linux Advanced Server"' in os_release
    assert 'VERSION_ID="V10"' in os_release
    assert "Lance" in host.file("/etc/kylin-release").content_string
    assert not host.file("/etc/debian_version").exists


def test_inner_docker_daemon_answers(host):
    out = host.check_output("docker info --format '{{json .}}'")
    info = json.loads(out)
    assert info["ServerVersion"]
    assert info["Driver"] in ("vfs", "overlay2", "fuse-overlayfs")


def test_no_network_reaches_out(host):
    # network_mode none: only loopback exists, name lookups fail.
    links = host.check_output("ip -o link show").splitlines()
    assert all(": lo:" in line or "docker0" in line for line in links), links
    assert host.run("getent hosts pypi.org").rc != 0


def test_fake_nvml_loads_through_ctypes(host):
    script = (
        "import ctypes;"
        "lib = ctypes.CDLL('libnvidia-ml.so.1');"
        "rc = lib.nvmlInit_v2();"
        "buf = ctypes.create_string_buffer(96);"
        "rc2 = lib.nvmlSystemGetDriverVersion(buf, 96);"
        "print(rc, rc2, buf.value.decode())"
    )
    rc, rc2, version = host.check_output("python3 -c \"%s\"" % script).split()
    assert (rc, rc2) == ("0", "0")
    assert version == "560.35.03"


@pytest.mark.parametrize("package", ["nvidia-driver", "nvidia-driver-libs", "kmod-nvidia-latest-dkms", "nvidia-driver-cuda"])
def test_planted_old_rpm_driver_is_installed(host, package):
    out = host.check_output("rpm -q --qf '%%{VERSION}' %s" % package)
    assert out.startswith("560.35.03")


def test_dkms_sees_the_planted_module(host):
    out = host.check_output("dkms status")
    assert "nvidia" in out and "560.35.03" in out and "installed" in out
