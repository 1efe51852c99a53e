"""Unit tests for _bundle_manifest: manifest checks, split files' parts, the medium's layout, SourceReader.

The bundles the other test__bundle_* files build (FILES, make_bundle, split_bundle) are made here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import subprocess

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_manifest as M


PART = 4096


def sha(data):
    return hashlib.sha256(data).hexdigest()


def make_bundle(root, files):
    entries = []
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append(
            {"kind": "file", "name": rel, "path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        )
    return entries


FILES = {
    "artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 5000,
    "artifacts/image.tar": os.urandom(3 * 1024 * 1024 + 7),
    "wheels/ansible_core-2.17.0-py3-none-any.whl": b"w" * 100,
}


@pytest.fixture
def bundle(tmp_path):
    root = tmp_path / "bundle"
    return root, make_bundle(root, FILES)


def split_bundle(root, rel="artifacts/image.tar", data=None, part=PART, extra=None):
    """A bundle holding `rel` as parts of `part` bytes (the way the build writes it) plus small whole files."""
    data = data if data is not None else bytes(bytearray((i * 7) % 251 for i in range(3 * part + 123)))
    entries = []
    parts = []
    for i, (off, length) in enumerate(M.split_plan(len(data), part)):
        p_rel = M.part_name(rel, i)
        path = root / p_rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[off : off + length])
        parts.append({"path": p_rel, "size": length, "sha256": sha(data[off : off + length])})
    entries.append({"path": rel, "size": len(data), "sha256": sha(data), "kind": "image", "parts": parts})
    for name, content in (extra or {"artifacts/driver.run": b"#!/bin/sh\n" + b"d" * 100}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
        entries.append({"path": name, "size": len(content), "sha256": sha(content), "kind": "driver"})
    return entries, data


@pytest.mark.parametrize(
    "entry,match",
    [
        ({"path": "/etc/passwd", "size": 1, "sha256": "a" * 64}, "inside the bundle"),
        ({"path": "../x", "size": 1, "sha256": "a" * 64}, "inside the bundle"),
        ({"path": "a", "size": 1, "sha256": "xyz"}, "64 hex"),
        ({"path": "a", "size": "big", "sha256": "a" * 64}, "not an integer"),
        ({"size": 1, "sha256": "a" * 64}, "no path"),
    ],
)
def test_validate_rejects(entry, match):
    with pytest.raises(M.BundleError, match=match):
        M.validate_entries([entry])


def test_validate_rejects_duplicates():
    e = {"path": "a/b", "size": 1, "sha256": "A" * 64}
    with pytest.raises(M.BundleError, match="twice"):
        M.validate_entries([e, dict(e, path="a/./b")])
    assert M.validate_entries([e])[0]["sha256"] == "a" * 64


def test_manifest_path_with_nul_byte_is_refused_naming_the_entry():
    with pytest.raises(M.BundleError, match="NUL byte"):
        M.validate_entries([{"path": "artifacts/a\x00b", "size": 1, "sha256": "a" * 64}])


def test_sha256sums_accepted_by_sha256sum(bundle):
    root, entries = bundle
    (root / "SHA256SUMS").write_text(M.sha256sums_text(entries))
    p = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=str(root), stdout=subprocess.PIPE, check=False)
    assert p.returncode == 0, p.stdout


def test_sha256sums_of_a_split_file_name_its_parts_as_on_the_medium(tmp_path):
    root = tmp_path / "medium"
    entries, _data = split_bundle(root)
    text = M.sha256sums_text(entries)
    named = [ln.split("  ", 1)[1] for ln in text.splitlines()]
    assert "artifacts/image.tar" not in named
    assert named == sorted(named) and [n for n in named if n.startswith("artifacts/image.tar")] == [
        p["path"] for p in entries[0]["parts"]
    ]
    (root / "SHA256SUMS").write_text(text)
    p = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=str(root), stdout=subprocess.PIPE, check=False)
    assert p.returncode == 0, p.stdout


def test_load_manifest_yaml(tmp_path, bundle):
    root, entries = bundle
    import yaml

    (root / "manifest.yml").write_text(yaml.safe_dump({"format": 1, "artifacts": entries}))
    assert [e["path"] for e in M.load_manifest(str(root / "manifest.yml"))] == [e["path"] for e in entries]
    (root / "bad.yml").write_text("format: 1\n")
    with pytest.raises(M.BundleError, match="no 'artifacts'"):
        M.load_manifest(str(root / "bad.yml"))


# ---------------------------------------------------------------- split files (FAT32)


def test_split_plan_and_names():
    assert M.split_plan(10, 0) == [(0, 10)]
    assert M.split_plan(10, 10) == [(0, 10)]
    assert M.split_plan(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert M.split_plan(8, 4) == [(0, 4), (4, 4)]
    assert M.part_name("artifacts/x.tar", 2) == "artifacts/x.tar.part002"


def test_parts_are_validated():
    e = {
        "path": "a/x",
        "size": 10,
        "sha256": "0" * 64,
        "parts": [
            {"path": "a/x.part000", "size": 6, "sha256": "1" * 64},
            {"path": "a/x.part001", "size": 4, "sha256": "2" * 64},
        ],
    }
    assert M.validate_entries([e])[0]["parts"][1]["size"] == 4
    bad_sum = dict(e, size=11)
    with pytest.raises(M.BundleError, match="add up to 10 bytes, the file is 11"):
        M.validate_entries([bad_sum])
    with pytest.raises(M.BundleError, match="must stay inside"):
        M.validate_entries([dict(e, parts=[dict(e["parts"][0], path="../x"), e["parts"][1]])])
    with pytest.raises(M.BundleError, match="listed twice"):
        M.validate_entries([dict(e, parts=[e["parts"][0], dict(e["parts"][1], path="a/x.part000")])])
    with pytest.raises(M.BundleError, match="not 64 hex"):
        M.validate_entries([dict(e, parts=[dict(e["parts"][0], sha256="zz"), e["parts"][1]])])
    with pytest.raises(M.BundleError, match="size must be positive"):
        M.validate_entries([dict(e, size=4, parts=[dict(e["parts"][0], size=0), e["parts"][1]])])


def test_medium_size_and_source_problem(tmp_path):
    root = tmp_path / "medium"
    entries, data = split_bundle(root)
    e = M.validate_entries(entries)[0]
    assert M.medium_size(str(root), e) == len(data)
    assert M.source_problem(str(root), e) is None
    (root / "artifacts/image.tar.part003").unlink()
    assert M.medium_size(str(root), e) is None
    assert M.source_problem(str(root), e) == ("missing", "artifacts/image.tar.part003")


def test_source_reader_seek_across_parts_and_read(tmp_path):
    root = tmp_path / "medium"
    entries, data = split_bundle(root)
    e = M.validate_entries(entries)[0]
    with M.SourceReader(str(root), e) as r:
        r.seek(PART - 10)
        assert r.read(30) == data[PART - 10 : PART + 20]
        assert r.read(10**6) == data[PART + 20 :]
        assert r.read(5) == b""
