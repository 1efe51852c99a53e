# -*- coding: utf-8 -*-
"""Building the bundle's payload: artifacts as downloaded, split for FAT32, unchanged means untouched."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_hash as H
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_manifest as M
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_pack as P
from ansible_collections.airgap.vllm.plugins.module_utils.bundle import _bundle_stage as S


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def downloads(tmp_path):
    d = tmp_path / "dl"
    (d / "toolkit" / "repodata").mkdir(parents=True)
    (d / "toolkit" / "a.rpm").write_bytes(b"rpm-a")
    (d / "toolkit" / "repodata" / "repomd.xml").write_bytes(b"<repomd/>")
    (d / "model").mkdir()
    (d / "model" / "config.json").write_bytes(b"{}")
    (d / "model" / "empty.txt").write_bytes(b"")
    (d / "driver.run").write_bytes(b"#!/bin/sh\n" + b"x" * 90)
    (d / "image.tar").write_bytes(bytes(bytearray(i % 253 for i in range(2500))))
    arts = [
        {"kind": "driver", "name": "nvidia-driver", "version": "580.65.06", "src": str(d / "driver.run")},
        {"kind": "toolkit", "name": "nct", "version": "1.17.8-1", "src": str(d / "toolkit") + "/"},
        {"kind": "image", "name": "vllm-openai", "version": "v0.27.1", "src": str(d / "image.tar")},
        {"kind": "model", "name": "m", "version": 1, "src": str(d / "model")},
    ]
    return d, arts


def test_pack_splits_big_files_and_the_manifest_stages_back(tmp_path, downloads):
    d, arts = downloads
    root = tmp_path / "bundle"
    (root / "wheels" / "py3.11").mkdir(parents=True)
    (root / "wheels" / "py3.11" / "ansible_core-2.17.14-py3-none-any.whl").write_bytes(b"whl")
    out = P.pack(str(root), arts, split_size=1000, stamps=H.StampCache(str(tmp_path / "st.json")))
    by = dict((e["path"], e) for e in out["entries"])
    img = by["artifacts/image.tar"]
    assert img["size"] == 2500 and img["sha256"] == sha((d / "image.tar").read_bytes())
    assert [p["size"] for p in img["parts"]] == [1000, 1000, 500]
    assert not (root / "artifacts" / "image.tar").exists()
    for p in img["parts"]:
        assert sha((root / p["path"]).read_bytes()) == p["sha256"]
    assert "parts" not in by["artifacts/driver.run"]
    assert by["artifacts/toolkit/repodata/repomd.xml"]["kind"] == "toolkit"
    assert by["artifacts/model/empty.txt"]["size"] == 0 and by["artifacts/model/empty.txt"]["version"] == "1"
    assert by["wheels/py3.11/ansible_core-2.17.14-py3-none-any.whl"]["name"] == "ansible_core"
    # SHA256SUMS lists what is on the disk: the parts, not the whole image.
    assert "artifacts/image.tar.part002\n" in out["sums"] and "artifacts/image.tar\n" not in out["sums"]
    # The manifest is one the staging takes, and it rebuilds the image byte for byte.
    dest = tmp_path / "host"
    S.stage_files(str(root), str(dest), out["entries"])
    assert (dest / "artifacts" / "image.tar").read_bytes() == (d / "image.tar").read_bytes()
    results, summary = H.verify_bundle(str(root), out["entries"])
    assert summary["ok"] == len(out["entries"]) and summary["unlisted"] == 0


def test_an_unchanged_rebuild_copies_and_reads_nothing(tmp_path, downloads, monkeypatch):
    d, arts = downloads
    root = tmp_path / "bundle"
    stamps = str(tmp_path / "st.json")
    s = H.StampCache(stamps)
    first = P.pack(str(root), arts, split_size=1000, stamps=s)
    s.save()
    opened = []
    monkeypatch.setattr(P, "_hash_ranges", lambda *a, **k: opened.append(a))
    monkeypatch.setattr(P, "_hash_medium", lambda *a, **k: opened.append(a))
    again = P.pack(str(root), arts, split_size=1000, stamps=H.StampCache(stamps))
    assert again["copied"] == [] and again["removed"] == [] and opened == []
    assert again["entries"] == first["entries"]


def test_the_build_stamps_live_in_the_one_stamp_cache_keyed_by_split_size(tmp_path, downloads):
    d, arts = downloads
    root = tmp_path / "bundle"
    s = H.StampCache(str(tmp_path / "st.json"))
    P.pack(str(root), arts, split_size=1000, stamps=s)
    assert s.save() is True
    again = H.StampCache(str(tmp_path / "st.json"))
    image = str(d / "image.tar")
    rec = again.record(image, split_size=1000)
    assert rec["sha256"] == sha((d / "image.tar").read_bytes()) and len(rec["parts"]) == 3
    assert again.record(image, split_size=0) is None  # cut another way: hashed again
    assert again.get(image) == rec["sha256"]  # the whole file's sha256, as verification keeps it


def test_a_changed_split_size_rewrites_and_removes_the_old_files(tmp_path, downloads):
    d, arts = downloads
    root = tmp_path / "bundle"
    P.pack(str(root), arts, split_size=1000)
    out = P.pack(str(root), arts, split_size=0)
    assert "artifacts/image.tar" in out["copied"]
    assert out["removed"] == [
        "artifacts/image.tar.part000",
        "artifacts/image.tar.part001",
        "artifacts/image.tar.part002",
    ]
    assert (root / "artifacts" / "image.tar").read_bytes() == (d / "image.tar").read_bytes()
    assert not list((root / "artifacts").glob("image.tar.part*"))


def test_check_mode_writes_nothing_but_returns_the_manifest_it_would_write(tmp_path, downloads):
    d, arts = downloads
    root = tmp_path / "bundle"
    out = P.pack(str(root), arts, split_size=1000, check_mode=True)
    assert not root.exists()
    assert "artifacts/image.tar" in out["copied"]
    img = [e for e in out["entries"] if e["path"] == "artifacts/image.tar"][0]
    assert len(img["parts"]) == 3 and img["sha256"] == sha((d / "image.tar").read_bytes())


@pytest.mark.parametrize(
    "art,msg",
    [
        ({"kind": "driver"}, "needs src"),
        ({"kind": "bogus", "src": "/x"}, "kind 'bogus' is not one of"),
        ({"kind": "file", "src": "/nonexistent/x"}, "not found"),
    ],
)
def test_bad_artifacts_are_refused(tmp_path, art, msg):
    with pytest.raises(M.BundleError, match=msg):
        P.pack(str(tmp_path / "bundle"), [art])


def test_the_kind_check_is_the_one_list_for_the_module_and_the_roles_preflight():
    """Issue 32: bundle_build's preflight (filter airgap.vllm.bundle_artifact_kinds) and pack() share kind_problem."""
    good = [{"kind": k, "src": "/x/" + k} for k in P.ARTIFACT_KINDS]
    assert P.kind_check(good) == {"kinds": list(P.ARTIFACT_KINDS), "problems": []}
    bad = [{"kind": "weights", "src": "/x/w"}, {"image": "vllm:1"}, {"kind": "model", "src": "/m"}, "oops"]
    assert P.kind_check(bad)["problems"] == [
        "artifact /x/w: kind 'weights' is not one of driver, fabricmanager, toolkit, rpms, image, model, file",
        "artifact vllm:1: kind None is not one of driver, fabricmanager, toolkit, rpms, image, model, file",
        "artifact #3 is not a mapping (kind, name, version, src)",
    ]
    assert P.kind_check(None)["problems"] == []
    with pytest.raises(M.BundleError) as e:
        P.plan_artifacts([bad[0]])
    # pack() also takes the control-node image bundle_build adds itself (issue 47), which the preflight refuses.
    assert str(e.value) == P.kind_problem(bad[0], 0, P.PACK_KINDS)
    assert str(e.value).endswith("model, file, control")
    control = {"kind": "control", "src": "/x/control.tar"}
    assert P.kind_check([control])["problems"] == [
        "artifact /x/control.tar: kind 'control' is not one of driver, fabricmanager, toolkit, rpms, image, model, file"
    ]


def test_two_sources_on_one_path_are_refused(tmp_path, downloads):
    d, arts = downloads
    other = tmp_path / "other"
    other.mkdir()
    (other / "driver.run").write_bytes(b"x")
    with pytest.raises(M.BundleError, match="both be stored as artifacts/driver.run"):
        P.pack(str(tmp_path / "bundle"), arts + [{"kind": "file", "src": str(other / "driver.run")}])


def test_layout_and_fat32_default():
    assert P.FAT32_SPLIT < 4 * 1024**3 - 1
    assert P.layout("a/x", 10, 4) == [("a/x.part000", 0, 4), ("a/x.part001", 4, 4), ("a/x.part002", 8, 2)]
    assert P.layout("a/x", 10, 0) == [("a/x", 0, 10)]
    with pytest.raises(M.BundleError, match="split size"):
        P.pack("/tmp/none", [], split_size=-1)
