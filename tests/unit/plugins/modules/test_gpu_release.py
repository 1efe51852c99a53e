"""gpu_release as Ansible runs it against a stand-in docker CLI: release, check mode, diff, restore, failures."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import stat
import sys

import pytest

from ansible_collections.airgap.vllm.plugins.modules import gpu_release as M

CID = "c" * 64
# Docker with one plain container (restart=always, running) and no swarm; every call is recorded.
FAKE_DOCKER = (
    r'''#!%s
import json, os, sys
path = os.environ["FAKE_DOCKER_STATE"]
st = json.load(open(path))
args = sys.argv[1:]
st["calls"].append(args)
json.dump(st, open(path, "w"))
if st.get("down"):
    sys.stderr.write("Cannot connect to the Docker daemon\n"); sys.exit(1)
if args[:3] == ["inspect", "--type", "container"]:
    if args[3] in ("comfyui", st["cid"]):
        print(json.dumps([{"Id": st["cid"], "Name": "/comfyui", "State": {"Running": True},
                           "Config": {"Labels": {}}, "HostConfig": {"RestartPolicy": {"Name": "always",
                           "MaximumRetryCount": 0}}}]))
        sys.exit(0)
    sys.stderr.write("Error: No such container: %%s\n" %% args[3]); sys.exit(1)
if args[:2] == ["service", "inspect"]:
    sys.stderr.write("Error response from daemon: This node is not a swarm manager. Use \"docker swarm init\"\n")
    sys.exit(1)
if args[0] == "info":
    print("inactive"); sys.exit(0)
if args[0] == "ps":
    print(st["cid"]); sys.exit(0)
'''
    % sys.executable
)


@pytest.fixture
def docker(tmp_path, monkeypatch):
    binary = tmp_path / "docker"
    binary.write_text(FAKE_DOCKER)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "docker-state.json"
    state.write_text(json.dumps({"cid": CID, "calls": []}))
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    return str(binary), state


def mutations(state):
    return [c for c in json.loads(state.read_text())["calls"] if c[0] in ("update", "stop", "start", "service")]


def test_release_check_mode_real_and_again_then_restore(run_module, tmp_path, docker):
    binary, state = docker
    record = tmp_path / "lib" / "gpu-release.json"
    common = dict(containers=["comfyui", "gone"], state_file=str(record), docker_bin=binary)
    r = run_module(M, check_mode=True, diff=True, **common)
    assert r["changed"] and r["commands"] == ["docker update --restart=no " + CID, "docker stop " + CID]
    assert CID in r["diff"]["after"] and not record.exists() and mutations(state) == []
    r = run_module(M, **common)
    assert r["changed"] and r["released_containers"][CID]["restart_policy"] == "always"
    assert mutations(state) == [["update", "--restart=no", CID], ["stop", CID]]
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    r = run_module(M, state="restored", state_file=str(record), docker_bin=binary)
    assert r["changed"] and not record.exists()
    assert mutations(state)[2:] == [["update", "--restart=always", CID], ["start", CID]]
    r = run_module(M, state="restored", state_file=str(record), docker_bin=binary)
    assert not r["changed"] and r["commands"] == []


def test_docker_down_fails_and_keeps_the_record(run_module, tmp_path, docker):
    binary, state = docker
    record = tmp_path / "gpu-release.json"
    run_module(M, containers=["comfyui"], state_file=str(record), docker_bin=binary)
    st = json.loads(state.read_text())
    st["down"] = True
    state.write_text(json.dumps(st))
    r = run_module(M, state="restored", state_file=str(record), docker_bin=binary)
    assert r["failed"] and "Cannot connect to the Docker daemon" in r["msg"] and record.exists()


def test_an_unknown_service_and_a_broken_record_fail_clearly(run_module, tmp_path, docker):
    binary, _state = docker
    r = run_module(M, services=["llm_api"], state_file=str(tmp_path / "r.json"), docker_bin=binary)
    assert r["failed"] and "swarm service(s) not found: llm_api" in r["msg"]
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    r = run_module(M, state="restored", state_file=str(broken), docker_bin=binary)
    assert r["failed"] and "broken.json" in r["msg"]
