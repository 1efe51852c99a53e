"""Unit tests for _bundle_hash: hash_file, the stamp cache (it cannot be fooled), verification states and messages."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_hash as H
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_manifest as M

from .test__bundle_manifest import FILES, make_bundle, split_bundle


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    return root, make_bundle(root, FILES)


def _edit_in_place_keeping_mtime(path):
    """Same size, same inode, mtime set back: only ctime shows the change."""
    st = os.stat(str(path))
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    with open(str(path), "r+b") as f:
        f.write(bytes(data))
    os.utime(str(path), ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(str(path))
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert after.st_ctime_ns != st.st_ctime_ns


def test_hash_file_matches_hashlib(tmp_path):
    p = tmp_path / "f"
    data = os.urandom(1000003)
    p.write_bytes(data)
    h, n = H.hash_file(str(p), bufsize=4096)
    assert n == len(data) and h.hexdigest() == hashlib.sha256(data).hexdigest()
    h, n = H.hash_file(str(p), offset=10, length=100)
    assert h.hexdigest() == hashlib.sha256(data[10:110]).hexdigest()


def test_verify_all_ok_then_cached(bundle, tmp_path):
    root, entries = bundle
    stamps = H.StampCache(str(tmp_path / "stamps.json"))
    results, summary = H.verify_bundle(str(root), entries, stamps=stamps, workers=3)
    assert summary["ok"] == 3 and summary["hashed_files"] == 3
    assert stamps.save()
    # fresh cache object from disk: nothing hashed
    stamps2 = H.StampCache(str(tmp_path / "stamps.json"))
    results, summary = H.verify_bundle(str(root), entries, stamps=stamps2)
    assert summary["ok"] == 3 and summary["hashed_files"] == 0 and summary["hashed_bytes"] == 0
    assert H.verify_failures(results) == []


def test_verify_reports_each_state(bundle, tmp_path):
    root, entries = bundle
    stamps = H.StampCache(str(tmp_path / "stamps.json"))
    H.verify_bundle(str(root), entries, stamps=stamps)
    # corrupt one byte in place keeping size (mtime changes -> stamp miss -> re-hash)
    img = root / "artifacts/image.tar"
    data = bytearray(img.read_bytes())
    data[12345] ^= 0xFF
    img.write_bytes(bytes(data))
    (root / "artifacts/driver.run").write_bytes(b"short")
    os.unlink(str(root / "wheels/ansible_core-2.17.0-py3-none-any.whl"))
    (root / "artifacts/stray.rpm").write_bytes(b"x")
    results, summary = H.verify_bundle(str(root), entries, stamps=stamps)
    states = dict((r["path"], r["state"]) for r in results)
    assert states == {
        "artifacts/driver.run": "size_mismatch",
        "artifacts/image.tar": "checksum_mismatch",
        "wheels/ansible_core-2.17.0-py3-none-any.whl": "missing",
        "artifacts/stray.rpm": "unlisted",
    }
    fails = H.verify_failures(results)
    assert "artifacts/image.tar: checksum mismatch" in fails and len(fails) == 4
    assert len(H.verify_failures(results, allow_unlisted=True)) == 3


def test_stamp_keyed_by_inode(bundle, tmp_path):
    """A file replaced by another with the same size and mtime (new inode) is hashed again."""
    root, entries = bundle
    stamps = H.StampCache(str(tmp_path / "s.json"))
    H.verify_bundle(str(root), entries, stamps=stamps)
    p = root / "artifacts/driver.run"
    st = os.stat(str(p))
    tmp = root / "artifacts/driver.run.new"
    tmp.write_bytes(b"#!/bin/sh\n" + b"e" * 5000)
    os.utime(str(tmp), ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(str(tmp), str(p))
    results, _summary = H.verify_bundle(str(root), entries, stamps=stamps)
    r = [x for x in results if x["path"] == "artifacts/driver.run"][0]
    assert r["hashed"] and r["state"] == "checksum_mismatch"


# ---------------------------------------------------------------- stamp caches cannot be fooled (issue 12: #1)


def test_verify_stamp_cache_rehashes_when_ctime_changes(bundle, tmp_path):
    root, entries = bundle
    stamps = H.StampCache(str(tmp_path / "verify-stamps.json"))
    results = H.verify_bundle(str(root), entries, stamps=stamps)[0]
    assert all(r["state"] == "ok" for r in results)
    stamps.save()
    _edit_in_place_keeping_mtime(root / "artifacts/image.tar")
    results = H.verify_bundle(str(root), entries, stamps=H.StampCache(str(tmp_path / "verify-stamps.json")))[0]
    r = dict((x["path"], x) for x in results)["artifacts/image.tar"]
    assert r["hashed"] and r["state"] == "checksum_mismatch"


@pytest.mark.parametrize("content", ["[]", "null", '{"files": []}', '{"files": {"/x": []}}', '"x"', "{", "\xff"])
def test_stamp_cache_of_the_wrong_shape_only_costs_a_rehash(bundle, tmp_path, content):
    root, entries = bundle
    path = tmp_path / "stamps.json"
    path.write_bytes(content.encode("latin-1"))
    stamps = H.StampCache(str(path))
    results, summary = H.verify_bundle(str(root), entries, stamps=stamps)
    assert summary["ok"] == len(FILES) and summary["hashed_files"] == len(FILES)
    stamps.save()
    assert json.loads(path.read_text())["files"]


def test_unwritable_stamp_file_on_save_names_the_file_and_the_fix(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    stamps = H.StampCache(str(blocker / "stamps.json"))
    stamps.put(str(blocker), "0" * 64)
    with pytest.raises(M.BundleError, match=r"f/stamps.json cannot be written.*stamp_file"):
        stamps.save()


# ---------------------------------------------------------------- no tracebacks, clear errors (issue 12: #9)


def test_verify_dangling_symlink_in_artifacts_is_reported_not_a_traceback(bundle, tmp_path):
    root, entries = bundle
    os.symlink(str(tmp_path / "gone"), str(root / "artifacts/extra.bin"))
    (root / "artifacts/driver.run").unlink()
    os.symlink(str(tmp_path / "gone-too"), str(root / "artifacts/driver.run"))
    results, summary = H.verify_bundle(str(root), entries)
    states = dict((r["path"], r["state"]) for r in results)
    assert states["artifacts/extra.bin"] == "unlisted"
    assert states["artifacts/driver.run"] == "missing"
    msgs = H.verify_failures(results)
    assert any("artifacts/driver.run: missing" in m and "dangling symlink" in m for m in msgs)


def test_verify_manifest_entry_that_is_a_directory_is_reported_not_a_traceback(bundle):
    root, entries = bundle
    (root / "artifacts/adir").mkdir()
    entries = entries + [
        {"path": "artifacts/adir", "size": os.stat(str(root / "artifacts/adir")).st_size, "sha256": "0" * 64}
    ]
    results, summary = H.verify_bundle(str(root), entries)
    assert dict((r["path"], r["state"]) for r in results)["artifacts/adir"] == "not_a_file"
    assert summary["not_a_file"] == 1
    assert any("artifacts/adir: not a file" in m and "replace" in m for m in H.verify_failures(results))


# ---------------------------------------------------------------- split files (FAT32)


def test_verify_checks_parts_on_the_medium_and_the_whole_on_the_host(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, _data = split_bundle(root)
    results, summary = H.verify_bundle(str(root), entries)
    assert summary["ok"] == 2 and summary["unlisted"] == 0, "parts are listed, not unlisted"
    img = [r for r in results if r["path"] == "artifacts/image.tar"][0]
    assert [p["state"] for p in img["parts"]] == ["ok"] * 4
    assert summary["hashed_bytes"] == sum(e["size"] for e in entries)
    # A flipped byte in one part names that part.
    p1 = root / "artifacts/image.tar.part001"
    raw = bytearray(p1.read_bytes())
    raw[10] ^= 1
    p1.write_bytes(bytes(raw))
    results, summary = H.verify_bundle(str(root), entries)
    fails = H.verify_failures(results)
    assert fails == ["artifacts/image.tar.part001: checksum mismatch (part of artifacts/image.tar)"]
    p1.unlink()
    fails = H.verify_failures(H.verify_bundle(str(root), entries)[0])
    assert fails[0].startswith("artifacts/image.tar.part001: missing")
    # On the host the staged whole file is what is checked.
    os.makedirs(str(dest / "artifacts"))
    (dest / "artifacts/image.tar").write_bytes(_data)
    (dest / "artifacts/driver.run").write_bytes((root / "artifacts/driver.run").read_bytes())
    results, summary = H.verify_bundle(str(dest), entries)
    assert summary["ok"] == 2 and "parts" not in results[1]


def test_read_exactly_yields_the_length_a_buffer_at_a_time(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    view = memoryview(bytearray(4))
    with open(str(path), "rb", buffering=0) as f:
        assert [bytes(b) for b in H.read_exactly(f, view, 6, "%s: %d short", "f")] == [b"0123", b"45"]
        with pytest.raises(M.BundleError, match="^f: 2 short$"):
            list(H.read_exactly(f, view, 6, "%s: %d short", "f"))  # 4 bytes were left of 6
