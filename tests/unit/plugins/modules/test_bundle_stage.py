"""bundle_stage (the module) as Ansible runs it with remote_src: the bundle mounted on the target is staged
locally - hashed while copying, all or nothing, resumable, a converged re-run moves nothing. The
controller-to-target protocol (probe/append/commit) is tested with the action plugin in
tests/unit/plugins/action/test_bundle_stage.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.modules import bundle_stage as M

FILES = {
    "artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 9000,
    "artifacts/image.tar": bytes(bytearray(i % 251 for i in range(40000))),
    "wheels/x-1.0-py3-none-any.whl": b"w" * 100,
}


@pytest.fixture
def world(tmp_path):
    src = tmp_path / "usb" / "bundle"
    entries = []
    for rel, data in sorted(FILES.items()):
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "kind": "file"})
    (src / "manifest.yml").write_text(yaml.safe_dump({"artifacts": entries}))
    dest = tmp_path / "staged"
    args = dict(src=str(src), dest=str(dest), remote_src=True, log_path="", stamp_file=str(tmp_path / "stamps.json"))
    return dict(src=src, dest=dest, entries=entries, args=args)


def staged(dest):
    return dict((rel, (dest / rel).read_bytes()) for rel in FILES if (dest / rel).is_file())


def test_stages_every_file_then_a_rerun_moves_nothing(run_module, world):
    r = run_module(M, **world["args"])
    assert "failed" not in r, r.get("msg")
    assert r["changed"] is True and r["bytes_copied"] == sum(len(d) for d in FILES.values())
    assert staged(world["dest"]) == FILES
    assert all(f["state"] == "copied" for f in r["files"])
    for rel in FILES:
        assert oct(os.stat(str(world["dest"] / rel)).st_mode & 0o7777) == "0o644"
    again = run_module(M, **world["args"])
    assert again["changed"] is False and again["bytes_copied"] == 0
    assert all(f["state"] == "current" for f in again["files"])


def test_check_mode_reports_the_copies_and_writes_nothing(run_module, world, tmp_path):
    r = run_module(M, check_mode=True, **world["args"])
    assert r["changed"] is True and r["bytes_copied"] == 0
    assert all(f["state"] == "copied" for f in r["files"])
    assert staged(world["dest"]) == {}
    assert not (tmp_path / "stamps.json").exists()


def test_a_corrupt_file_fails_naming_it_and_nothing_is_renamed_into_place(run_module, world):
    path = world["src"] / "artifacts" / "image.tar"
    data = bytearray(path.read_bytes())
    data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    r = run_module(M, **world["args"])
    assert r["failed"] is True and "artifacts/image.tar" in r["msg"]
    assert dict((f["path"], f["state"]) for f in r["files"])["artifacts/image.tar"] == "checksum_mismatch"
    assert staged(world["dest"]) == {}


def test_a_mode_given_as_the_unquoted_yaml_integer_is_that_mode(run_module, world):
    r = run_module(M, mode=0o640, **world["args"])
    assert "failed" not in r, r.get("msg")
    assert oct(os.stat(str(world["dest"] / "artifacts" / "driver.run")).st_mode & 0o7777) == "0o640"


@pytest.mark.parametrize(
    "extra,message",
    [
        (dict(mode="rw-r--r--"), "not an octal file mode"),
        (dict(min_free_bytes=1 << 60), "free"),
        (dict(remote_src=False), "needs the airgap.vllm.bundle_stage action plugin"),
        (dict(manifest="nosuch.yml"), "nosuch.yml"),
    ],
)
def test_bad_input_fails_with_a_message_and_stages_nothing(run_module, world, extra, message):
    r = run_module(M, **dict(world["args"], **extra))
    assert r["failed"] is True and message in r["msg"], r["msg"]
    assert staged(world["dest"]) == {}


def test_a_missing_required_argument_is_named(run_module):
    r = run_module(M, src="/nowhere")
    assert r["failed"] is True and "dest" in r["msg"]
