# -*- coding: utf-8 -*-
"""Split files (FAT32): manifest parts, one-pass reassembly while hashing, resume, hostile media."""
import hashlib
import os

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils import _bundle as b

PART = 4096


def sha(data):
    return hashlib.sha256(data).hexdigest()


def split_bundle(root, rel="artifacts/image.tar", data=None, part=PART, extra=None):
    """A bundle holding `rel` as parts of `part` bytes (the way the build writes it) plus small whole files."""
    data = data if data is not None else bytes(bytearray((i * 7) % 251 for i in range(3 * part + 123)))
    entries = []
    parts = []
    for i, (off, length) in enumerate(b.split_plan(len(data), part)):
        p_rel = b.part_name(rel, i)
        path = root / p_rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[off:off + length])
        parts.append({"path": p_rel, "size": length, "sha256": sha(data[off:off + length])})
    entries.append({"path": rel, "size": len(data), "sha256": sha(data), "kind": "image", "parts": parts})
    for name, content in (extra or {"artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 100}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
        entries.append({"path": name, "size": len(content), "sha256": sha(content), "kind": "driver"})
    return entries, data


def test_split_plan_and_names():
    assert b.split_plan(10, 0) == [(0, 10)]
    assert b.split_plan(10, 10) == [(0, 10)]
    assert b.split_plan(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert b.split_plan(8, 4) == [(0, 4), (4, 4)]
    assert b.part_name("artifacts/x.tar", 2) == "artifacts/x.tar.part002"


def test_parts_are_validated():
    e = {"path": "a/x", "size": 10, "sha256": "0" * 64,
         "parts": [{"path": "a/x.part000", "size": 6, "sha256": "1" * 64},
                   {"path": "a/x.part001", "size": 4, "sha256": "2" * 64}]}
    assert b.validate_entries([e])[0]["parts"][1]["size"] == 4
    bad_sum = dict(e, size=11)
    with pytest.raises(b.BundleError, match="add up to 10 bytes, the file is 11"):
        b.validate_entries([bad_sum])
    with pytest.raises(b.BundleError, match="must stay inside"):
        b.validate_entries([dict(e, parts=[dict(e["parts"][0], path="../x"), e["parts"][1]])])
    with pytest.raises(b.BundleError, match="listed twice"):
        b.validate_entries([dict(e, parts=[e["parts"][0], dict(e["parts"][1], path="a/x.part000")])])
    with pytest.raises(b.BundleError, match="not 64 hex"):
        b.validate_entries([dict(e, parts=[dict(e["parts"][0], sha256="zz"), e["parts"][1]])])
    with pytest.raises(b.BundleError, match="size must be positive"):
        b.validate_entries([dict(e, size=4, parts=[dict(e["parts"][0], size=0), e["parts"][1]])])


def test_stage_reassembles_byte_identical_in_one_pass_and_rerun_is_current(tmp_path, monkeypatch):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    reads = []
    real_open = open

    def counting_open(path, *a, **kw):
        f = real_open(path, *a, **kw)
        if str(path).startswith(str(root)) and "b" in (a[0] if a else kw.get("mode", "r")):
            reads.append(str(path))
        return f
    monkeypatch.setattr(b, "open", counting_open, raising=False)
    res = b.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert (dest / "artifacts/image.tar").read_bytes() == data
    assert not (dest / "artifacts/image.tar.part000").exists(), "the host gets the whole file, not the parts"
    assert sorted(reads) == sorted([str(root / p["path"]) for p in entries[0]["parts"]] + [
        str(root / "artifacts/driver.run")]), "each part opened once: one pass over the medium"
    assert [r["state"] for r in res] == ["copied", "copied"]
    again = b.stage_files(str(root), str(dest), entries, stamps=b.StampCache(str(tmp_path / "s.json")))
    assert [r["state"] for r in again] == ["current", "current"]


def test_interrupted_reassembly_resumes_at_the_last_complete_chunk(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    entry = b.validate_entries(entries)[0]
    target = str(dest / entry["path"])
    os.makedirs(os.path.dirname(target))
    # An earlier run stopped inside the second part, after 1.5 parts.
    cut = PART + PART // 2
    with open(target + ".part", "wb") as f:
        f.write(data[:cut])
    b.write_part_meta(target, entry)
    res = b.stage_files(str(root), str(dest), entries, bufsize=1000)
    img = [r for r in res if r["path"] == entry["path"]][0]
    assert img["resumed_from"] == cut and img["bytes_copied"] == len(data) - cut
    assert (dest / entry["path"]).read_bytes() == data


@pytest.mark.parametrize("damage,state,part", [
    (lambda root: (root / "artifacts/image.tar.part001").unlink(), "missing", "artifacts/image.tar.part001"),
    (lambda root: (root / "artifacts/image.tar.part002").write_bytes(b"short"), "size_mismatch",
     "artifacts/image.tar.part002"),
])
def test_missing_or_short_part_fails_before_anything_is_copied(tmp_path, damage, state, part):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, _data = split_bundle(root)
    damage(root)
    with pytest.raises(b.StageError) as err:
        b.stage_files(str(root), str(dest), entries)
    assert "artifacts/image.tar (%s in %s)" % (state.replace("_", " "), part) in str(err.value)
    assert not (dest / "artifacts/image.tar.part").exists()
    assert not (dest / "artifacts/driver.run").exists(), "all or nothing"


def test_reordered_parts_fail_naming_the_first_wrong_part_and_keep_the_good_prefix(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    p0, p1 = root / "artifacts/image.tar.part000", root / "artifacts/image.tar.part001"
    a, c = p0.read_bytes(), p1.read_bytes()
    p0.write_bytes(c)
    p1.write_bytes(a)  # same sizes, swapped: only the per-part hashes can tell which
    with pytest.raises(b.StageError, match=r"checksum mismatch in artifacts/image.tar.part000"):
        b.stage_files(str(root), str(dest), entries, bufsize=1000)
    part = dest / "artifacts/image.tar.part"
    assert part.exists() and part.stat().st_size == 0, "cut back to the start of the bad part"
    # Put the parts right: the next run copies and commits.
    p0.write_bytes(a)
    p1.write_bytes(c)
    b.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert (dest / "artifacts/image.tar").read_bytes() == data


def test_a_bad_later_part_keeps_the_parts_before_it_for_the_next_run(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, data = split_bundle(root)
    p2 = root / "artifacts/image.tar.part002"
    good = p2.read_bytes()
    p2.write_bytes(b"\0" * len(good))
    with pytest.raises(b.StageError, match="part002"):
        b.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert (dest / "artifacts/image.tar.part").stat().st_size == 2 * PART
    p2.write_bytes(good)
    res = b.stage_files(str(root), str(dest), entries, bufsize=1000)
    img = [r for r in res if r["path"] == "artifacts/image.tar"][0]
    assert img["resumed_from"] == 2 * PART, "the two good parts are not read again"
    assert (dest / "artifacts/image.tar").read_bytes() == data


def test_wrong_whole_hash_after_correct_parts_fails_and_discards(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, _data = split_bundle(root)
    entries[0]["sha256"] = "f" * 64  # every part matches its own hash, the whole does not
    with pytest.raises(b.StageError, match=r"artifacts/image.tar \(checksum mismatch\)"):
        b.stage_files(str(root), str(dest), entries, bufsize=1000)
    assert not (dest / "artifacts/image.tar.part").exists()
    assert not (dest / "artifacts/image.tar").exists()


def test_verify_checks_parts_on_the_medium_and_the_whole_on_the_host(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    entries, _data = split_bundle(root)
    results, summary = b.verify_bundle(str(root), entries)
    assert summary["ok"] == 2 and summary["unlisted"] == 0, "parts are listed, not unlisted"
    img = [r for r in results if r["path"] == "artifacts/image.tar"][0]
    assert [p["state"] for p in img["parts"]] == ["ok"] * 4
    assert summary["hashed_bytes"] == sum(e["size"] for e in entries)
    # A flipped byte in one part names that part.
    p1 = root / "artifacts/image.tar.part001"
    raw = bytearray(p1.read_bytes())
    raw[10] ^= 1
    p1.write_bytes(bytes(raw))
    results, summary = b.verify_bundle(str(root), entries)
    fails = b.verify_failures(results)
    assert fails == ["artifacts/image.tar.part001: checksum mismatch (part of artifacts/image.tar)"]
    p1.unlink()
    fails = b.verify_failures(b.verify_bundle(str(root), entries)[0])
    assert fails[0].startswith("artifacts/image.tar.part001: missing")
    # On the host the staged whole file is what is checked.
    os.makedirs(str(dest / "artifacts"))
    (dest / "artifacts/image.tar").write_bytes(_data)
    (dest / "artifacts/driver.run").write_bytes((root / "artifacts/driver.run").read_bytes())
    results, summary = b.verify_bundle(str(dest), entries)
    assert summary["ok"] == 2 and "parts" not in results[1]


def test_medium_size_and_source_problem(tmp_path):
    root = tmp_path / "medium"
    entries, data = split_bundle(root)
    e = b.validate_entries(entries)[0]
    assert b.medium_size(str(root), e) == len(data)
    assert b.source_problem(str(root), e) is None
    (root / "artifacts/image.tar.part003").unlink()
    assert b.medium_size(str(root), e) is None
    assert b.source_problem(str(root), e) == ("missing", "artifacts/image.tar.part003")


def test_source_reader_seek_across_parts_and_read(tmp_path):
    root = tmp_path / "medium"
    entries, data = split_bundle(root)
    e = b.validate_entries(entries)[0]
    with b.SourceReader(str(root), e) as r:
        r.seek(PART - 10)
        assert r.read(30) == data[PART - 10:PART + 20]
        assert r.read(10 ** 6) == data[PART + 20:]
        assert r.read(5) == b""


def test_zero_byte_file_stages_on_both_paths(tmp_path):
    root, dest = tmp_path / "medium", tmp_path / "stage"
    (root / "artifacts").mkdir(parents=True)
    (root / "artifacts/empty").write_bytes(b"")
    entries = [{"path": "artifacts/empty", "size": 0, "sha256": sha(b"")}]
    b.stage_files(str(root), str(dest), entries)
    assert (dest / "artifacts/empty").read_bytes() == b""
    # Controller protocol without an upload: commit creates the empty part itself.
    dest2 = tmp_path / "stage2"
    done = b.commit_parts(str(dest2), entries, None)
    assert [r["state"] for r in done] == ["copied"]
    assert (dest2 / "artifacts/empty").read_bytes() == b""


def test_append_segments_carries_several_files_in_one_chunk(tmp_path):
    dest = tmp_path / "stage"
    files = {"a/one": b"1" * 10, "a/two": b"", "b/three": b"3" * 7}
    entries = [{"path": k, "size": len(v), "sha256": sha(v)} for k, v in sorted(files.items())]
    chunk = tmp_path / "chunk"
    chunk.write_bytes(b"".join(files[k] for k in sorted(files)))
    segs = [{"path": k, "offset": 0, "length": len(files[k])} for k in sorted(files)]
    sizes = b.append_segments(str(dest), str(chunk), segs, b.validate_entries(entries))
    assert sizes == {"a/one": 10, "a/two": 0, "b/three": 7}
    assert not chunk.exists()
    b.commit_parts(str(dest), entries, None)
    for k, v in files.items():
        assert (dest / k).read_bytes() == v
    chunk.write_bytes(b"x")
    with pytest.raises(b.BundleError, match="probe again"):
        b.append_segments(str(dest), str(chunk), [{"path": "a/one.x", "offset": 5, "length": 1}])
    chunk.write_bytes(b"xy")
    with pytest.raises(b.BundleError, match="ended 3 bytes early"):
        b.append_segments(str(dest), str(chunk), [{"path": "c/new", "offset": 0, "length": 5}])


def test_a_staged_copy_with_whole_files_is_a_source_too(tmp_path):
    """Staging again from a directory that holds the whole file (a host's staged copy, a disk written
    without splitting): the manifest's parts are not looked for."""
    root, dest, dest2 = tmp_path / "medium", tmp_path / "stage", tmp_path / "stage2"
    entries, data = split_bundle(root)
    b.stage_files(str(root), str(dest), entries)
    b.stage_files(str(dest), str(dest2), entries)
    assert (dest2 / "artifacts/image.tar").read_bytes() == data
