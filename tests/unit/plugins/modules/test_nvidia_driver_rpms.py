"""nvidia_driver_rpms as Ansible runs it: a stand-in rpm database and dnf on the PATH."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import stat
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.modules import nvidia_driver_rpms as M

INSTALLED = {
    "nvidia-driver": "3:560.35.03-1.el8.x86_64",
    "nvidia-driver-libs": "3:560.35.03-1.el8.x86_64",
    "kmod-nvidia-latest-dkms": "3:560.35.03-1.el8.x86_64",
    "nvidia-persistenced": "3:560.35.03-1.el8.x86_64",
    "libnvidia-container1": "0:1.17.8-1.x86_64",
    "nvidia-container-toolkit": "0:1.17.8-1.x86_64",
    "kernel": "0:4.19.90-52.22.v2207.ky10.x86_64",
}
# rpm -qa prints the database; dnf remove deletes names from it (unless told to fail) and logs its argv.
RPM = r'''import json, os
db = json.load(open(os.environ["FAKE_RPM_DB"]))
if sys.argv[1:3] == ["-e", "--test"]:
    needs = json.loads(os.environ.get("FAKE_RPM_NEEDS", "{}"))  # {dependent nevra: needed package}
    lines = ["\t%s is needed by (installed) %s" % (need, who) for who, need in sorted(needs.items())
             if need in sys.argv[3:]]
    if lines:
        sys.stderr.write("error: Failed dependencies:\n" + "\n".join(lines) + "\n")
    sys.exit(1 if lines else 0)
assert sys.argv[1:3] == ["-qa", "--qf"], sys.argv
for name, version in sorted(db.items()):
    sys.stdout.write("%s\t%s\n" % (name, version))
'''
DNF = r'''import json, os
path = os.environ["FAKE_RPM_DB"]
db = json.load(open(path))
open(path + ".dnf.log", "a").write(json.dumps(sys.argv[1:]) + "\n")
if os.environ.get("FAKE_DNF_FAIL"):
    sys.stderr.write("Error: Transaction test error\n"); sys.exit(1)
for name in sys.argv[sys.argv.index("remove") + 1:]:
    db.pop(name, None)
json.dump(db, open(path, "w"))
'''


@pytest.fixture
def host(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("rpm", RPM), ("dnf", DNF)):
        path = bin_dir / name
        path.write_text("#!%s\nimport sys\n%s" % (sys.executable, body))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    db = tmp_path / "rpmdb.json"
    db.write_text(json.dumps(INSTALLED))
    monkeypatch.setenv("FAKE_RPM_DB", str(db))
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bin_dir)
    return db


DRIVER = ["kmod-nvidia-latest-dkms", "nvidia-driver", "nvidia-driver-libs", "nvidia-persistenced"]


def test_check_mode_lists_with_diff_then_removes_then_nothing_left(run_module, host):
    r = run_module(M, check_mode=True, diff=True)
    assert r["changed"] and r["packages"] == DRIVER
    assert r["kept"] == ["libnvidia-container1", "nvidia-container-toolkit"]
    assert "nvidia-driver 3:560.35.03-1.el8.x86_64\n" in r["diff"]["before"] and r["diff"]["after"] == ""
    assert json.loads(host.read_text()) == INSTALLED  # nothing removed
    r = run_module(M)
    assert r["changed"] and r["packages"] == DRIVER
    assert r["cmd"][1:5] == ["-y", "--disablerepo=*", "--setopt=clean_requirements_on_remove=False", "remove"]
    assert sorted(json.loads(host.read_text())) == ["kernel", "libnvidia-container1", "nvidia-container-toolkit"]
    r = run_module(M)
    assert not r["changed"] and r["packages"] == [] and "cmd" not in r


def test_keep_and_extra(run_module, host):
    r = run_module(M, keep=["nvidia-persist*"], extra=["kernel"], check_mode=True)
    assert r["packages"] == ["kernel", "kmod-nvidia-latest-dkms", "nvidia-driver", "nvidia-driver-libs"]
    assert "nvidia-persistenced" in r["kept"]


def test_a_failed_removal_fails_and_says_what_is_left(run_module, monkeypatch, host):
    monkeypatch.setenv("FAKE_DNF_FAIL", "1")
    r = run_module(M)
    assert r["failed"] and "Transaction test error" in r["msg"]
    assert "still installed: kmod-nvidia-latest-dkms, nvidia-driver" in r["msg"]


def test_dependents_are_listed_and_a_kept_dependent_refuses_the_removal(run_module, monkeypatch, host):
    monkeypatch.setenv("FAKE_RPM_NEEDS", json.dumps({"python3-pynvml-11.5.0-1.el8.noarch": "nvidia-driver-libs"}))
    r = run_module(M, check_mode=True)
    assert r["changed"] and r["also_removed"] == ["python3-pynvml"]
    monkeypatch.setenv("FAKE_RPM_NEEDS", json.dumps({"nvidia-container-toolkit-1.17.8-1.x86_64": "nvidia-driver"}))
    r = run_module(M)
    assert r["failed"] and "would also remove kept package(s) nvidia-container-toolkit" in r["msg"]
    assert "nvidia-container-toolkit needs nvidia-driver" in r["msg"]
    assert json.loads(host.read_text()) == INSTALLED
