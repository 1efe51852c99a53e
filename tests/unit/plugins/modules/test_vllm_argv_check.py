"""vllm_argv_check as Ansible runs it: a stand-in docker CLI that plays vLLM 0.27.1's parser (--swap-space refused)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.modules import vllm_argv_check as M

IMAGE = "sha256:" + "e" * 64
DOCKER = r'''import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
if args[:2] == ["image", "inspect"]:
    if args[-1] in ("vllm/vllm-openai:v0.27.1", "%(image)s"):
        print("%(image)s")
        sys.exit(0)
    sys.stderr.write("Error: No such image: " + args[-1] + "\n")
    sys.exit(1)
assert args[:4] == ["run", "--rm", "--network", "none"], args
for a in args:
    if a.startswith("seccomp=/") and os.environ.get("FAKE_DOCKER_SECCOMP_COPY"):
        with open(a[len("seccomp="):]) as src, open(os.environ["FAKE_DOCKER_SECCOMP_COPY"], "w") as dst:
            dst.write(src.read())
argv = args[args.index("-c") + 3:]
print("INFO vLLM is importing")
if "--swap-space" in argv:
    case = {"id": "plan", "ok": False, "args": None, "vllm": "0.27.1+cpu",
            "error": "vllm serve: error: unrecognized arguments: --swap-space 4"}
else:
    case = {"id": "plan", "ok": True, "error": None, "args": {}, "vllm": "0.27.1+cpu"}
print("AIRGAP_VLLM_PARSE " + json.dumps([case]))
''' % {"image": IMAGE}
SCRIPT = open(
    os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "vllm_service", "files", "parse_argv.py")
).read()
ARGV = ["/opt/models/m", "--max-model-len", "8192", "--config", "/etc/vllm/keys.yaml"]


@pytest.fixture
def docker(tmp_path, monkeypatch):
    path = tmp_path / "docker"
    path.write_text("#!%s\n%s" % (sys.executable, DOCKER))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "docker.log"
    log.write_text("")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    return str(path), log


def runs(log):
    return [json.loads(line) for line in log.read_text().splitlines() if json.loads(line)[0] == "run"]


def test_accepts_then_answers_from_the_cache(run_module, docker, tmp_path):
    bin_, log = docker
    cache = str(tmp_path / "etc" / "vllm" / "argv-check.json")
    args = dict(
        image="vllm/vllm-openai:v0.27.1",
        argv=ARGV,
        script=SCRIPT,
        docker_bin=bin_,
        cache_file=cache,
        docker_options=["--gpus", "all", "--security-opt", "no-new-privileges"],
    )
    r = run_module(M, **args)
    assert not r.get("failed") and r["ok"] and r["checked"] and not r["cached"] and not r["changed"]
    assert r["release"] == "0.27.1+cpu" and r["image_id"] == IMAGE and r["argv"] == ARGV[:3]
    run = runs(log)[0]
    assert (
        "--gpus" not in run and "/etc/vllm/keys.yaml" not in run and run[4:6] == ["--security-opt", "no-new-privileges"]
    )
    r = run_module(M, **args)
    assert r["ok"] and r["cached"] and not r["changed"] and len(runs(log)) == 1


def test_check_mode_judges_and_writes_nothing(run_module, docker, tmp_path):
    bin_, log = docker
    cache = tmp_path / "argv-check.json"
    r = run_module(M, check_mode=True, image=IMAGE, argv=ARGV, script=SCRIPT, docker_bin=bin_, cache_file=str(cache))
    assert r["ok"] and not r["cache_written"] and not cache.exists() and len(runs(log)) == 1


def test_a_refused_flag_fails_naming_flag_and_release(run_module, docker, tmp_path):
    bin_, log = docker
    r = run_module(
        M,
        image=IMAGE,
        argv=ARGV[:3] + ["--swap-space", "4"],
        script=SCRIPT,
        docker_bin=bin_,
        release="0.27.1+cpu",
        cache_file=str(tmp_path / "argv-check.json"),
    )
    assert r["failed"] and r["flags"] == ["--swap-space"]
    assert "vLLM 0.27.1+cpu" in r["msg"] and "--swap-space" in r["msg"] and "not touched" in r["msg"]


def test_an_absent_image_fails_before_any_container(run_module, docker):
    bin_, log = docker
    r = run_module(M, image="vllm/vllm-openai:v9", argv=ARGV, script=SCRIPT, docker_bin=bin_)
    assert r["failed"] and "not in the local Docker" in r["msg"] and runs(log) == []


@pytest.mark.parametrize(
    "profile",
    ['{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}', {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}],
)
def test_the_service_profile_is_used_before_the_service_has_it(run_module, docker, tmp_path, monkeypatch, profile):
    bin_, log = docker
    seen = tmp_path / "seen.json"
    # The stand-in docker copies the profile it was given (the module removes its temporary copy afterwards).
    monkeypatch.setenv("FAKE_DOCKER_SECCOMP_COPY", str(seen))
    r = run_module(
        M,
        image=IMAGE,
        argv=ARGV,
        script=SCRIPT,
        docker_bin=bin_,
        seccomp_profile=profile,
        docker_options=[
            "--security-opt",
            "seccomp=/etc/airgap-vllm/vllm/seccomp.json",
            "--security-opt",
            "no-new-privileges",
        ],
    )
    assert r["ok"]
    run = runs(log)[0]
    used = run[run.index("--security-opt") + 1]
    assert used.startswith("seccomp=") and used != "seccomp=/etc/airgap-vllm/vllm/seccomp.json"
    assert json.loads(seen.read_text()) == {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": []}
    assert not os.path.exists(used[len("seccomp=") :])
