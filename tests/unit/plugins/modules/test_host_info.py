"""host_info as Ansible runs it: os-release and productinfo files, a stand-in docker CLI and lspci on the PATH."""
import json
import stat
import sys

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.airgap.vllm.plugins.modules import host_info as M

OS_RELEASE = 'NAME="Kylin Linux Advanced Server"\nVERSION="V10 (Lance)"\nID="kylin"\nVERSION_ID="V10"\n'
PRODUCTINFO = "Kylin Linux Advanced Server\nrelease V10 (SP3) /(Lance)-x86_64-Build20/20221125\n"
LSPCI = ('0000:3b:00.0 "VGA compatible controller [0300]" "NVIDIA Corporation [10de]" '
         '"AD102GL [RTX 6000 Ada Generation] [26b1]" -ra1 "NVIDIA Corporation [10de]" "Device [16a1]"\n'
         '0000:3b:00.1 "Audio device [0403]" "NVIDIA Corporation [10de]" "AD102 HD Audio [22ba]" -ra1 '
         '"NVIDIA Corporation [10de]" "Device [16a1]"\n')
INFO = {"ServerVersion": "20.10.24", "Runtimes": {"runc": {}, "nvidia": {}}, "DefaultRuntime": "runc",
        "CgroupDriver": "cgroupfs", "ServerErrors": None}


def script(path, body):
    path.write_text("#!%s\nimport sys\n%s" % (sys.executable, body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def host(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(bin_dir / "lspci", "assert sys.argv[1:] == ['-D', '-mm', '-nn', '-d', '10de:'], sys.argv\n"
                              "sys.stdout.write(%r)\n" % LSPCI)
    docker = script(tmp_path / "docker", "assert sys.argv[1:3] == ['info', '--format']\nprint(%r)\n"
                    % json.dumps(INFO))
    down = script(tmp_path / "docker-down", "sys.stderr.write('Cannot connect to the Docker daemon\\n')\n"
                                            "sys.exit(1)\n")
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bin_dir)
    (tmp_path / "os-release").write_text(OS_RELEASE)
    (tmp_path / "productinfo").write_text(PRODUCTINFO)
    return dict(os_release_path=str(tmp_path / "os-release"), productinfo_path=str(tmp_path / "productinfo"),
                docker=docker, down=down)


def run(monkeypatch, capsys, **args):
    args.setdefault("_ansible_check_mode", True)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        M.main()
    return json.loads(capsys.readouterr().out)


def test_kylin_docker_and_pci(monkeypatch, capsys, host):
    r = run(monkeypatch, capsys, os_release_path=host["os_release_path"], productinfo_path=host["productinfo_path"],
            kernel_release="4.19.90-52.22.v2207.ky10.x86_64", docker_bin=host["docker"], pci=True)
    assert not r["changed"] and r["kylin"] and r["kylin_sp"] == "SP3" and r["distribution_release"] == "Lance"
    assert r["kernel_release"] == "4.19.90-52.22.v2207.ky10.x86_64"
    assert r["docker"]["running"] and r["docker"]["runtimes"] == ["nvidia", "runc"]
    assert r["pci"]["error"] is None and [g["slot"] for g in r["pci"]["gpus"]] == ["0000:3b:00.0"]
    assert r["pci"]["summary"] == ["0000:3b:00.0 AD102GL [RTX 6000 Ada Generation] [10de:26b1]"]


def test_docker_down_missing_and_not_asked(monkeypatch, capsys, host, tmp_path):
    base = dict(os_release_path=host["os_release_path"], productinfo_path=host["productinfo_path"])
    r = run(monkeypatch, capsys, docker_bin=host["down"], **base)
    assert r["docker"] == {"installed": True, "running": False, "error": "Cannot connect to the Docker daemon"}
    assert "pci" not in r
    r = run(monkeypatch, capsys, docker_bin=str(tmp_path / "nope"), **base)
    assert r["docker"]["installed"] is False and "not found" in r["docker"]["error"]
    r = run(monkeypatch, capsys, docker=False, **base)
    assert r["docker"] == {"installed": None, "running": None}


def test_missing_files_and_no_lspci(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    r = run(monkeypatch, capsys, os_release_path=str(tmp_path / "none"), productinfo_path=str(tmp_path / "none"),
            docker=False, pci=True)
    assert r["distribution"] is None and r["kylin"] is False
    if r["pci"]["lspci"] is None:  # an sbin directory of this machine may hold a real lspci
        assert r["pci"]["error"] == "lspci not found (install pciutils)" and r["pci"]["gpus"] == []
