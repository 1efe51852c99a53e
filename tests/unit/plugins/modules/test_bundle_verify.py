"""bundle_verify as Ansible runs it: every file checked against the manifest, unlisted files reported,
the stamp cache skips unchanged files (and is not written in check mode), failures name each file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest
import yaml

from ansible_collections.airgap.vllm.plugins.modules import bundle_verify as M

FILES = {
    "artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 5000,
    "artifacts/image.tar": bytes(bytearray(i % 253 for i in range(70000))),
    "wheels/x-1.0-py3-none-any.whl": b"w" * 100,
}


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    entries = []
    for rel, data in sorted(FILES.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append(
            {
                "path": rel,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "kind": "file",
                "name": os.path.basename(rel),
                "version": "1",
            }
        )
    (root / "manifest.yml").write_text(yaml.safe_dump({"artifacts": entries}))
    return root, entries, str(tmp_path / "stamps.json")


def test_a_good_bundle_passes_then_a_rerun_hashes_nothing(run_module, bundle):
    root, _entries, stamps = bundle
    r = run_module(M, path=str(root), stamp_file=stamps)
    assert "failed" not in r, r.get("msg")
    assert r["changed"] is False and r["failures"] == []
    assert sorted(f["path"] for f in r["files"]) == sorted(FILES)
    assert all(f["state"] == "ok" for f in r["files"])
    assert r["summary"]["ok"] == 3 and r["summary"]["hashed_files"] == 3
    assert r["summary"]["hashed_bytes"] == sum(len(d) for d in FILES.values())
    assert os.path.exists(stamps)
    again = run_module(M, path=str(root), stamp_file=stamps)
    assert again["summary"]["ok"] == 3 and again["summary"]["hashed_files"] == 0


def test_check_mode_verifies_fully_and_writes_no_stamp_cache(run_module, bundle):
    root, _entries, stamps = bundle
    r = run_module(M, check_mode=True, path=str(root), stamp_file=stamps)
    assert "failed" not in r and r["summary"]["hashed_files"] == 3
    assert not os.path.exists(stamps)


def test_a_corrupt_or_missing_file_fails_naming_it(run_module, bundle):
    root, _entries, stamps = bundle
    path = root / "artifacts" / "image.tar"
    data = bytearray(path.read_bytes())
    data[7] ^= 1
    path.write_bytes(bytes(data))
    (root / "wheels" / "x-1.0-py3-none-any.whl").unlink()
    r = run_module(M, path=str(root), stamp_file=stamps)
    assert r["failed"] is True
    assert "artifacts/image.tar: checksum mismatch" in r["msg"]
    assert "wheels/x-1.0-py3-none-any.whl: missing" in r["msg"]
    states = dict((f["path"], f["state"]) for f in r["files"])
    assert states == {
        "artifacts/driver.run": "ok",
        "artifacts/image.tar": "checksum_mismatch",
        "wheels/x-1.0-py3-none-any.whl": "missing",
    }


def test_an_edit_that_keeps_size_and_mtime_is_still_caught_after_a_cached_run(run_module, bundle):
    root, _entries, stamps = bundle
    assert "failed" not in run_module(M, path=str(root), stamp_file=stamps)
    path = root / "artifacts" / "driver.run"
    st = os.stat(str(path))
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    os.utime(str(path), ns=(st.st_atime_ns, st.st_mtime_ns))
    r = run_module(M, path=str(root), stamp_file=stamps)
    assert r["failed"] is True and "artifacts/driver.run: checksum mismatch" in r["msg"]


def test_an_unlisted_file_fails_unless_allowed(run_module, bundle):
    root, _entries, stamps = bundle
    (root / "artifacts" / "stray.bin").write_bytes(b"x")
    r = run_module(M, path=str(root), stamp_file=stamps)
    assert r["failed"] is True and "artifacts/stray.bin: unlisted" in r["msg"]
    r = run_module(M, path=str(root), stamp_file=stamps, allow_unlisted=True)
    assert "failed" not in r and r["summary"]["unlisted"] == 1


def test_artifacts_given_inline_take_precedence_over_the_manifest(run_module, bundle):
    root, entries, stamps = bundle
    (root / "manifest.yml").write_text("not: [a, manifest")
    r = run_module(M, path=str(root), stamp_file=stamps, artifacts=entries)
    assert "failed" not in r, r.get("msg")
    assert r["summary"]["ok"] == 3


@pytest.mark.parametrize(
    "setup,message",
    [
        (lambda root: None, "bundle directory"),
        (lambda root: root.mkdir(), "manifest"),
        (
            lambda root: (root.mkdir(), (root / "manifest.yml").write_text(json.dumps({"artifacts": [{"path": "a"}]}))),
            "a",
        ),
    ],
)
def test_a_missing_bundle_or_a_broken_manifest_fails_clearly(run_module, tmp_path, setup, message):
    root = tmp_path / "nowhere"
    setup(root)
    r = run_module(M, path=str(root), stamp_file="")
    assert r["failed"] is True and message in r["msg"]
