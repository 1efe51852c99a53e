"""docker_archive as Ansible runs it: a stand-in docker CLI on disk, check mode, load by ID, idempotence, errors."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import os
import stat
import sys
import tarfile

import pytest

from ansible_collections.airgap.vllm.plugins.modules import docker_archive as M

CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
IMAGE_ID = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
TAG = "vllm/vllm-openai:v0.27.1"

# A docker CLI that keeps its images in a JSON file: image inspect, load (by reading the archive's id), tag.
FAKE_DOCKER = (
    r'''#!%s
import json, os, sys
state_path = os.environ["FAKE_DOCKER_STATE"]
st = json.load(open(state_path))
args = sys.argv[1:]
st["calls"].append(args)
def save():
    json.dump(st, open(state_path, "w"))
if st.get("down"):
    save(); sys.stderr.write("Cannot connect to the Docker daemon\n"); sys.exit(1)
if args[:2] == ["image", "inspect"]:
    ref = args[-1]
    found = ref if ref in st["ids"] else st["tags"].get(ref)
    save()
    if found and "--format" not in args:
        print(json.dumps([{"Id": found, "Config": {"Labels": st.get("labels", {}).get(found)}}])); sys.exit(0)
    if found:
        print(found); sys.exit(0)
    sys.stderr.write("Error response from daemon: No such image: %%s\n" %% ref); sys.exit(1)
if args[0] == "load":
    st["ids"].append(st["archive_id"]); st["tags"].update(dict((t, st["archive_id"]) for t in st["archive_tags"]))
elif args[0] == "tag":
    st["tags"][args[2]] = args[1]
save()
'''
    % sys.executable
)


def write_archive(path, tags=(TAG,)):
    members = {
        "manifest.json": json.dumps(
            [{"Config": IMAGE_ID[7:] + ".json", "RepoTags": list(tags), "Layers": []}]
        ).encode(),
        IMAGE_ID[7:] + ".json": CONFIG,
    }
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def docker(tmp_path, monkeypatch):
    binary = tmp_path / "docker"
    binary.write_text(FAKE_DOCKER)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "docker-state.json"
    state.write_text(json.dumps({"ids": [], "tags": {}, "calls": [], "archive_id": IMAGE_ID, "archive_tags": [TAG]}))
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(state))
    return binary, state


def test_check_mode_then_load_then_idempotent(run_module, tmp_path, docker):
    binary, state = docker
    archive = str(tmp_path / "img.tar")
    write_archive(archive)
    r = run_module(M, path=archive, tag="vllm:local", docker_bin=str(binary), check_mode=True, diff=True)
    assert r["changed"] and r["loaded"] and r["tagged"] == ["vllm:local"]
    assert r["diff"]["before"]["image_present"] is False and r["diff"]["after"]["image_id"] == IMAGE_ID
    assert [c[0] for c in json.loads(state.read_text())["calls"]] == ["image"] * 3  # inspected only
    r = run_module(M, path=archive, tag="vllm:local", docker_bin=str(binary))
    assert r["changed"] and r["image_id"] == IMAGE_ID and r["tagged"] == ["vllm:local"]
    st = json.loads(state.read_text())
    assert ["load", "--input", archive] in st["calls"] and st["tags"]["vllm:local"] == IMAGE_ID
    r = run_module(M, path=archive, tag="vllm:local", docker_bin=str(binary))
    assert not r["changed"] and not r["loaded"] and r["tagged"] == []


def test_a_daemon_that_does_not_answer_fails_with_the_command(run_module, tmp_path, docker):
    binary, state = docker
    st = json.loads(state.read_text())
    st["down"] = True
    state.write_text(json.dumps(st))
    archive = str(tmp_path / "img.tar")
    write_archive(archive)
    r = run_module(M, path=archive, docker_bin=str(binary))
    assert r["failed"] and "Cannot connect to the Docker daemon" in r["msg"]
    assert r["cmd"][0] == str(binary) and r["rc"] == 1


def test_not_an_archive_and_missing_docker(run_module, tmp_path, docker):
    binary, _state = docker
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar")
    r = run_module(M, path=str(bad), docker_bin=str(binary))
    assert r["failed"] and "not a readable tar archive" in r["msg"]
    r = run_module(M, path=str(bad), docker_bin=os.path.join(str(tmp_path), "no-docker"))
    assert r["failed"] and "no-docker" in r["msg"]


def test_derived_image_is_current_only_for_this_base_and_these_labels(run_module, tmp_path, docker):
    binary, state = docker
    archive = str(tmp_path / "img.tar")
    write_archive(archive)
    derived = "sha256:" + "d" * 64
    st = json.loads(state.read_text())
    st["ids"] = [IMAGE_ID, derived]
    st["tags"] = {TAG: IMAGE_ID}
    base = {
        "org.airgap.vllm.base-image-id": IMAGE_ID,
        "org.airgap.vllm.patches": "madvise_populate_write@1",
        "org.airgap.vllm.patch-fingerprint": "f" * 64,
    }
    st["labels"] = {derived: base}
    state.write_text(json.dumps(st))
    args = dict(path=archive, tag=TAG, docker_bin=str(binary), check_mode=True)
    wanted = {"org.airgap.vllm.patches": "madvise_populate_write@1"}
    r = run_module(M, derived=derived, derived_labels=wanted, **args)
    assert not r["changed"] and r["derived"] == {"image_id": derived, "labels": base, "current": True}
    # Another patch revision, another base, or no such image: not current (the role derives again).
    r = run_module(M, derived=derived, derived_labels={"org.airgap.vllm.patches": "x@2"}, **args)
    assert r["derived"]["current"] is False
    st["labels"] = {derived: dict(base, **{"org.airgap.vllm.base-image-id": "sha256:" + "0" * 64})}
    state.write_text(json.dumps(st))
    r = run_module(M, derived=derived, derived_labels=wanted, **args)
    assert r["derived"]["current"] is False
    r = run_module(M, derived="sha256:" + "e" * 64, derived_labels=wanted, **args)
    assert r["derived"] is None
    r = run_module(M, derived_labels=wanted, **args)
    assert r["derived"] is None
