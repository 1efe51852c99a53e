"""host_info as Ansible runs it: os-release and productinfo files, a stand-in docker CLI and lspci on the PATH."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json
import stat
import sys
import time

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.host import _hostinfo as H
from ansible_collections.airgap.vllm.plugins.modules import host_info as M

OS_RELEASE = 'NAME="Kylin Linux Advanced Server"\nVERSION="V10 (Lance)"\nID="kylin"\nVERSION_ID="V10"\n'
PRODUCTINFO = "Kylin Linux Advanced Server\nrelease V10 (SP3) /(Lance)-x86_64-Build20/20221125\n"
LSPCI = (
    '0000:3b:00.0 "VGA compatible controller [0300]" "NVIDIA Corporation [10de]" '
    '"AD102GL [RTX 6000 Ada Generation] [26b1]" -ra1 "NVIDIA Corporation [10de]" "Device [16a1]"\n'
    '0000:3b:00.1 "Audio device [0403]" "NVIDIA Corporation [10de]" "AD102 HD Audio [22ba]" -ra1 '
    '"NVIDIA Corporation [10de]" "Device [16a1]"\n'
)
INFO = {
    "ServerVersion": "20.10.24",
    "Runtimes": {"runc": {}, "nvidia": {}},
    "DefaultRuntime": "runc",
    "CgroupDriver": "cgroupfs",
    "ServerErrors": None,
}


def script(path, body):
    path.write_text("#!%s\nimport sys\n%s" % (sys.executable, body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def host(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(
        bin_dir / "lspci",
        "assert sys.argv[1:] == ['-D', '-mm', '-nn', '-d', '10de:'], sys.argv\nsys.stdout.write(%r)\n" % LSPCI,
    )
    docker = script(tmp_path / "docker", "assert sys.argv[1:3] == ['info', '--format']\nprint(%r)\n" % json.dumps(INFO))
    down = script(tmp_path / "docker-down", "sys.stderr.write('Cannot connect to the Docker daemon\\n')\nsys.exit(1)\n")
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bin_dir)
    (tmp_path / "os-release").write_text(OS_RELEASE)
    (tmp_path / "productinfo").write_text(PRODUCTINFO)
    return dict(
        os_release_path=str(tmp_path / "os-release"),
        productinfo_path=str(tmp_path / "productinfo"),
        docker=docker,
        down=down,
    )


@pytest.fixture
def probe(run_module):
    """host_info only reads the host: run as in a --check run (tests/unit/conftest.py runs it)."""
    return functools.partial(run_module, M, check_mode=True)


def test_kylin_docker_and_pci(probe, host):
    r = probe(
        os_release_path=host["os_release_path"],
        productinfo_path=host["productinfo_path"],
        kernel_release="4.19.90-52.22.v2207.ky10.x86_64",
        docker_bin=host["docker"],
        pci=True,
    )
    assert not r["changed"] and r["kylin"] and r["kylin_sp"] == "SP3" and r["distribution_release"] == "Lance"
    assert r["kernel_release"] == "4.19.90-52.22.v2207.ky10.x86_64"
    assert r["docker"]["running"] and r["docker"]["runtimes"] == ["nvidia", "runc"]
    assert r["pci"]["error"] is None and [g["slot"] for g in r["pci"]["gpus"]] == ["0000:3b:00.0"]
    assert r["pci"]["summary"] == ["0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]"]


def test_docker_down_missing_and_not_asked(probe, host, tmp_path):
    base = dict(os_release_path=host["os_release_path"], productinfo_path=host["productinfo_path"])
    r = probe(docker_bin=host["down"], **base)
    assert r["docker"] == {"installed": True, "running": False, "error": "Cannot connect to the Docker daemon"}
    assert "pci" not in r
    r = probe(docker_bin=str(tmp_path / "nope"), **base)
    assert r["docker"]["installed"] is False and "not found" in r["docker"]["error"]
    r = probe(docker=False, **base)
    assert r["docker"] == {"installed": None, "running": None}


def test_missing_files_and_no_lspci(probe, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    r = probe(os_release_path=str(tmp_path / "none"), productinfo_path=str(tmp_path / "none"), docker=False, pci=True)
    assert r["distribution"] is None and r["kylin"] is False
    if r["pci"]["lspci"] is None:  # an sbin directory of this machine may hold a real lspci
        assert r["pci"]["error"] == "lspci not found (install pciutils)" and r["pci"]["gpus"] == []


NVML_OK = {
    "nvml_state": "ok",
    "driver_version": "580.65.06",
    "library_version": "580.65.06",
    "kernel_module_version": "580.65.06",
    "gpu_count": 1,
}
RPM_QA = (
    "bash\t0:5.0-1.ky10.x86_64\nnvidia-container-toolkit\t0:1.17.8-1.x86_64\nlibnvidia-container1\t0:1.17.8-1.x86_64\n"
)
BLACKLIST = "# Ansible managed\nblacklist nouveau\noptions nouveau modeset=0\n"


@pytest.fixture
def driver_host(tmp_path, monkeypatch, host):
    """The stand-ins a converged driver answers with; each test spoils one of them."""
    bin_dir = tmp_path / "bin"

    def tools(rpm_qa=RPM_QA, dkms="nvidia/580.65.06, 4.19.90, x86_64: installed\n", smi_rc=0, installer=True):
        script(bin_dir / "rpm", "assert sys.argv[1] == '-qa', sys.argv\nsys.stdout.write(%r)\n" % rpm_qa)
        script(bin_dir / "dkms", "sys.stdout.write(%r)\n" % dkms)
        script(bin_dir / "nvidia-smi", "print('NVIDIA-SMI 580.65.06')\nsys.exit(%d)\n" % smi_rc)
        if installer:
            script(
                bin_dir / "nvidia-installer",
                "print('\\nnvidia-installer:  version 580.65.06\\n  The NVIDIA Software Installer for Unix/Linux.')\n",
            )
        elif (bin_dir / "nvidia-installer").exists():
            (bin_dir / "nvidia-installer").unlink()

    tools()
    monkeypatch.setattr(H, "collect", lambda driver_version_file: dict(NVML_OK))
    (tmp_path / "blacklist.conf").write_text(BLACKLIST)
    spec = dict(
        version="580.65.06",
        blacklist_file=str(tmp_path / "blacklist.conf"),
        blacklist_content=BLACKLIST,
        dnf_module_file=str(tmp_path / "nvidia-driver.module"),
    )
    return dict(host, tools=tools, spec=spec, tmp=tmp_path)


def driver_run(probe, h, **spec):
    return probe(
        os_release_path=h["os_release_path"],
        productinfo_path=h["productinfo_path"],
        docker=False,
        nvidia_driver=dict(h["spec"], **spec),
    )["nvidia_driver"]


def test_driver_converged_in_one_pass(probe, driver_host):
    d = driver_run(probe, driver_host)
    assert d["pending"] == [] and d["converged"] is True
    assert d["rpms"] == [] and d["installed_version"] == "580.65.06" and d["dkms_versions"] == ["580.65.06"]
    assert d["smi_rc"] == 0 and d["dnf_module_reset"] is True and d["nvml"]["nvml_state"] == "ok"


def test_driver_each_leftover_is_pending(probe, driver_host):
    h = driver_host
    h["tools"](
        rpm_qa=RPM_QA + "nvidia-driver-cuda\t3:560.35.03-1.el8.x86_64\n",
        dkms="nvidia, 560.35.03, 4.19.90, x86_64: installed\nnvidia/580.65.06: added\n",
        smi_rc=9,
    )
    (h["tmp"] / "blacklist.conf").write_text("blacklist nouveau\n")
    module_text = "[nvidia-driver]\nname=nvidia-driver\nstream=latest-dkms\nprofiles=\nstate=enabled\n"
    (h["tmp"] / "nvidia-driver.module").write_text(module_text)
    d = driver_run(probe, h)
    assert d["converged"] is False and d["rpms"] == ["nvidia-driver-cuda"]
    assert d["dkms_versions"] == ["560.35.03", "580.65.06"] and d["dnf_module_reset"] is False
    joined = " | ".join(d["pending"])
    for words in ("nvidia-driver-cuda", "dkms: 560.35.03", "blacklist", "module stream", "nvidia-smi"):
        assert words in joined, joined
    # The blacklist is the operator's when the role does not manage it.
    d = driver_run(probe, h, blacklist_file="")
    assert "blacklist" not in " | ".join(d["pending"]) and d["blacklist_text"] is None


def test_driver_not_installed_and_rpms_asked(probe, monkeypatch, driver_host):
    h = driver_host
    h["tools"](installer=False)
    monkeypatch.setattr(
        H,
        "collect",
        lambda driver_version_file: {"nvml_state": "absent", "driver_version": None, "library_version": None},
    )
    r = probe(
        os_release_path=h["os_release_path"],
        productinfo_path=h["productinfo_path"],
        docker=False,
        nvidia_driver=h["spec"],
        rpms=["nvidia-container-toolkit", "libnvidia-container-tools"],
        files=[str(h["tmp"] / "blacklist.conf"), str(h["tmp"] / "absent.json")],
    )
    assert r["nvidia_driver"]["installed_version"] == "" and not r["nvidia_driver"]["converged"]
    assert any(p.startswith(".run driver installed: none") for p in r["nvidia_driver"]["pending"])
    assert any(p.startswith("NVML absent") for p in r["nvidia_driver"]["pending"])
    assert r["rpms"] == {"nvidia-container-toolkit": ["1.17.8-1"]} and r["rpm_error"] is None
    assert r["files"] == {str(h["tmp"] / "blacklist.conf"): BLACKLIST, str(h["tmp"] / "absent.json"): None}


def test_paths_say_which_files_a_write_would_change_without_their_content(probe, host, tmp_path):
    import hashlib
    import os

    conf = tmp_path / "conf"
    conf.mkdir()
    conf.chmod(0o700)
    keys = conf / "keys.yaml"
    keys.write_text("api_keys: [s3cr3t]\n")
    keys.chmod(0o600)
    me = {"uid": os.getuid(), "gid": os.getgid()}
    wanted = [
        dict(me, path=str(conf), type="directory", mode="0700"),
        dict(me, path=str(keys), mode="0600", sha1=hashlib.sha1(b"api_keys: [s3cr3t]\n").hexdigest()),
        dict(me, path=str(conf / "vllm.service"), mode="0644", sha1="0" * 40),
    ]
    r = probe(
        os_release_path=host["os_release_path"], productinfo_path=host["productinfo_path"], docker=False, paths=wanted
    )
    assert r["paths_differing"] == [str(conf / "vllm.service")]
    assert r["paths"][str(conf / "vllm.service")] is None and r["paths"][str(conf)]["type"] == "directory"
    assert "s3cr3t" not in json.dumps(r)
    keys.chmod(0o644)
    r = probe(
        os_release_path=host["os_release_path"],
        productinfo_path=host["productinfo_path"],
        docker=False,
        paths=wanted[:2],
    )
    assert r["paths_differing"] == [str(keys)]


def test_images_security_options_and_logging_driver(probe, host, tmp_path):
    info = dict(INFO, LoggingDriver="journald", SecurityOptions=["name=seccomp,profile=default"])
    docker = script(
        tmp_path / "docker-images",
        "args = sys.argv[1:]\n"
        "if args[:2] == ['info', '--format']:\n    print(%r)\n"
        % json.dumps(info)
        + "elif args[:2] == ['image', 'inspect'] and args[-1] == 'vllm/vllm-openai:v0.27.1':\n"
        "    print('sha256:' + 'f' * 64)\n"
        "else:\n    sys.stderr.write('Error: No such image: %s\\n' % args[-1])\n    sys.exit(1)\n",
    )
    r = probe(
        os_release_path=host["os_release_path"],
        productinfo_path=host["productinfo_path"],
        docker_bin=docker,
        images=["vllm/vllm-openai:v0.27.1", "absent:1"],
    )
    assert r["docker"]["logging_driver"] == "journald"
    assert r["docker"]["security_options"] == ["name=seccomp,profile=default"]
    assert r["images"] == {"vllm/vllm-openai:v0.27.1": "sha256:" + "f" * 64, "absent:1": None}
    assert r["images_error"] is None
    down = probe(
        os_release_path=host["os_release_path"],
        productinfo_path=host["productinfo_path"],
        docker_bin=host["down"],
        images=["absent:1"],
    )
    assert down["images"] == {} and "Docker is not running: Cannot connect" in down["images_error"]


def test_units_say_whether_systemd_has_anything_to_do(probe, host, tmp_path):
    bin_dir = tmp_path / "bin"
    script(
        bin_dir / "systemctl",
        "assert sys.argv[1] == 'show' and sys.argv[4::2] == ['LoadState', 'ActiveState', 'SubState', "
        "'UnitFileState', 'ActiveEnterTimestampMonotonic', 'NeedDaemonReload'], sys.argv\n"
        "import time\n"
        "up = sys.argv[2] == 'vllm'\n"
        "print('LoadState=loaded\\nActiveState=%s\\nSubState=%s\\nUnitFileState=enabled\\nOther=x' % "
        "(('active', 'running') if up else ('inactive', 'dead')))\n"
        "print('ActiveEnterTimestampMonotonic=%d' % ((time.monotonic() - 60) * 1e6 if up else 0))\n"
        "print('NeedDaemonReload=%s' % ('no' if up else 'yes'))\n",
    )
    r = probe(
        os_release_path=host["os_release_path"],
        productinfo_path=host["productinfo_path"],
        docker=False,
        units=["vllm", "vllm-b"],
    )
    started = r["units"]["vllm"].pop("started_at")
    assert r["units"]["vllm"] == {
        "LoadState": "loaded",
        "ActiveState": "active",
        "SubState": "running",
        "UnitFileState": "enabled",
        "started_enabled": True,
        "needs_daemon_reload": False,
    }
    # It started a minute ago (CLOCK_MONOTONIC, as systemd's), in wall-clock seconds (issue 46).
    assert abs(time.time() - 60 - started) < 5
    assert r["units"]["vllm-b"]["started_enabled"] is False
    assert r["units"]["vllm-b"]["started_at"] is None and r["units"]["vllm-b"]["needs_daemon_reload"] is True


def test_disk_listening_ports_and_exists(probe, host, tmp_path):
    import os

    r = probe(
        os_release_path=host["os_release_path"],
        productinfo_path=host["productinfo_path"],
        docker=False,
        disk=[str(tmp_path / "models")],
        listening=True,
        exists=[host["os_release_path"], str(tmp_path / "absent")],
    )
    assert r["disk"][str(tmp_path / "models")]["free"] > 0
    assert os.path.ismount(r["disk"][str(tmp_path / "models")]["mount"])
    assert isinstance(r["listening_ports"], list) and all(isinstance(p, int) for p in r["listening_ports"])
    assert r["exists"] == {host["os_release_path"]: True, str(tmp_path / "absent"): False}
