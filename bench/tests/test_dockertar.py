"""Generated docker-save tars are what they claim: valid tars, the expected image ID, real layer digests."""

import hashlib
import io
import json
import os
import tarfile

import pytest

import benchlib as B
import dockertar as T
import identity
import stagelib

B.import_collection()
from ansible_collections.airgap.vllm.plugins.module_utils.image import _docker_archive as DA  # noqa: E402


@pytest.mark.parametrize("layout", ["legacy", "docker+oci", "oci"])
def test_header_read_finds_the_generated_id(tmp_path, layout):
    p = str(tmp_path / "a.tar")
    built = T.build(p, layout, T.layer_split(64 * B.MIB, 5), "airgap-bench/identity", "t", "nonce")
    info = DA.read_archive(p)
    assert info["images"] == [{"image_id": built["image_id"], "repo_tags": ["airgap-bench/identity:t"]}]
    assert info["layout"] == {"legacy": "docker"}.get(layout, layout)
    assert info["bytes_read"] < 64 * 1024 < built["size"]


@pytest.mark.parametrize("layout", ["legacy", "docker+oci"])
def test_real_digests_match_the_layer_blobs(tmp_path, layout):
    p = str(tmp_path / "a.tar")
    built = T.build(p, layout, [B.MIB + 3, 100], "airgap-bench/identity", "t", "n", real_digests=True)
    with tarfile.open(p) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config_bytes = tar.extractfile(manifest["Config"]).read()
        assert "sha256:" + hashlib.sha256(config_bytes).hexdigest() == built["image_id"]
        diff_ids = json.loads(config_bytes)["rootfs"]["diff_ids"]
        for layer, diff_id in zip(manifest["Layers"], diff_ids):
            blob = tar.extractfile(layer).read()
            assert "sha256:" + hashlib.sha256(blob).hexdigest() == diff_id
            with tarfile.open(fileobj=io.BytesIO(blob)) as inner:
                assert any(n.startswith("airgap-bench/big-") for n in inner.getnames())
    assert ("index.json" in names) == (layout == "docker+oci")


def test_archive_is_sparse(tmp_path):
    p = str(tmp_path / "a.tar")
    built = T.build(p, "legacy", [1 * B.GIB], "r", "t", "n")
    assert built["size"] > B.GIB and os.stat(p).st_blocks * 512 < 16 * B.MIB


def test_layer_split_sums():
    sizes = T.layer_split(8 * B.GIB, 24)
    assert len(sizes) == 24 and abs(sum(sizes) - 8 * B.GIB) < 24 and sizes[0] == 6 * B.GIB
    assert T.layer_split(5, 1) == [5]


def test_docker_version_parsing():
    assert identity.major("20.10.24+dfsg1") == 20 and identity.major("27.3.1") == 27
    assert identity.major(None) == 0 and identity.major("dev") == 0


def test_medium_bytes_subtracts_destination_reads():
    rep = {"io": {"rchar": 1000}, "local_io": {"rchar": 300}}
    assert stagelib.medium_bytes(rep) == 700
    assert stagelib.medium_bytes({"io": {"rchar": 5}, "local_io": {}}) == 5
