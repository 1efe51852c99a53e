"""bundle_pack as the bundle_build role runs it: artifacts in, parts for FAT32, the manifest entries and
SHA256SUMS out; an unchanged bundle is neither copied nor read again; check mode writes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

import pytest

from ansible_collections.airgap.vllm.plugins.modules import bundle_pack as M


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def world(tmp_path):
    dl = tmp_path / "downloads"
    (dl / "model").mkdir(parents=True)
    (dl / "model" / "config.json").write_bytes(b'{"model_type": "qwen3"}')
    (dl / "driver.run").write_bytes(b"#!/bin/sh\n" + b"x" * 90)
    image = bytes(bytearray(i % 253 for i in range(2500)))
    (dl / "image.tar").write_bytes(image)
    artifacts = [
        {"kind": "driver", "name": "nvidia-driver", "version": "580.65.06", "src": str(dl / "driver.run")},
        {"kind": "image", "name": "vllm-openai", "version": "v0.27.1", "src": str(dl / "image.tar")},
        {"kind": "model", "name": "qwen3-tiny", "version": "1", "src": str(dl / "model")},
    ]
    args = dict(
        dest=str(tmp_path / "bundle"), artifacts=artifacts, split_size=1000, stamp_file=str(tmp_path / "stamps.json")
    )
    return dict(dl=dl, image=image, args=args, bundle=tmp_path / "bundle", stamps=tmp_path / "stamps.json")


def listing(root):
    out = []
    for d, _dirs, names in os.walk(str(root)):
        out.extend(os.path.relpath(os.path.join(d, n), str(root)) for n in names)
    return sorted(out)


def test_packs_splits_and_returns_the_manifest_then_a_rerun_copies_nothing(run_module, world):
    r = run_module(M, **world["args"])
    assert "failed" not in r, r.get("msg")
    assert r["changed"] is True and r["removed"] == []
    by = dict((e["path"], e) for e in r["entries"])
    image = by["artifacts/image.tar"]
    assert image["size"] == 2500 and image["sha256"] == sha(world["image"])
    assert image["kind"] == "image" and image["version"] == "v0.27.1"
    assert [p["size"] for p in image["parts"]] == [1000, 1000, 500]
    assert by["artifacts/model/config.json"]["kind"] == "model"
    assert listing(world["bundle"]) == [
        "artifacts/driver.run",
        "artifacts/image.tar.part000",
        "artifacts/image.tar.part001",
        "artifacts/image.tar.part002",
        "artifacts/model/config.json",
    ]
    for line in r["sums"].splitlines():
        digest, path = line.split("  ", 1)
        assert sha((world["bundle"] / path).read_bytes()) == digest
    again = run_module(M, **world["args"])
    assert again["changed"] is False and again["copied"] == [] and again["removed"] == []
    assert again["entries"] == r["entries"] and again["sums"] == r["sums"]


def test_check_mode_returns_the_manifest_and_writes_nothing(run_module, world):
    r = run_module(M, check_mode=True, **world["args"])
    assert "failed" not in r, r.get("msg")
    assert r["changed"] is True and r["copied"]
    assert sorted(e["path"] for e in r["entries"]) == [
        "artifacts/driver.run",
        "artifacts/image.tar",
        "artifacts/model/config.json",
    ]
    assert not world["bundle"].exists() and not world["stamps"].exists()


def test_a_changed_source_is_copied_again_and_a_file_no_longer_produced_is_removed(run_module, world):
    run_module(M, **world["args"])
    (world["dl"] / "driver.run").write_bytes(b"#!/bin/sh\n" + b"y" * 200)
    args = dict(world["args"], artifacts=[a for a in world["args"]["artifacts"] if a["kind"] != "model"])
    r = run_module(M, **args)
    assert r["changed"] is True
    assert r["copied"] == ["artifacts/driver.run"]
    assert r["removed"] == ["artifacts/model/config.json"]
    assert (world["bundle"] / "artifacts" / "driver.run").read_bytes() == b"#!/bin/sh\n" + b"y" * 200


@pytest.mark.parametrize(
    "artifact,message",
    [
        ({"kind": "driver", "name": "x", "version": "1"}, "needs src"),
        ({"kind": "weights", "name": "x", "version": "1", "src": "/etc/hostname"}, "kind 'weights' is not one of"),
        ({"kind": "file", "name": "x", "version": "1", "src": "/nonexistent/thing"}, "not found"),
    ],
)
def test_a_bad_artifact_fails_naming_it_and_writes_nothing(run_module, world, artifact, message):
    r = run_module(M, **dict(world["args"], artifacts=world["args"]["artifacts"] + [artifact]))
    assert r["failed"] is True and message in r["msg"], r["msg"]
    assert listing(world["bundle"]) == []
