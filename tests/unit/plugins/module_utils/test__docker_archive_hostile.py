"""Hostile/broken input for docker_archive (issue 12, #9): a failure naming the archive and the fix, never a
traceback. Each test name states what is defended."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import tarfile
import io

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.image import _docker_archive as da

CONFIG = b'{"architecture":"amd64","os":"linux"}'
CONFIG_HEX = hashlib.sha256(CONFIG).hexdigest()


def write_tar(path, members):
    with tarfile.open(str(path), "w") as t:
        for name, body in members:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            t.addfile(info, io.BytesIO(body))
    return str(path)


@pytest.mark.parametrize(
    "manifest",
    [
        b"{",  # not JSON
        b"\xff\xfe[]",  # not UTF-8
        b"{}",  # an object, not a list
        b"[1]",  # entries not objects
        b'[{"Config": 5}]',  # Config not a name
        b'[{"Config": ["x"]}]',
        b'[{"Config": "%s.json", "RepoTags": "vllm:1"}]' % CONFIG_HEX.encode(),
        b'[{"Config": "%s.json", "RepoTags": [7]}]' % CONFIG_HEX.encode(),
        b'[{"Config": "missing.json"}]',
        b"null",
    ],
)
def test_malformed_manifest_json_in_image_archive_fails_naming_the_archive(tmp_path, manifest):
    path = write_tar(tmp_path / "image.tar", [(CONFIG_HEX + ".json", CONFIG), ("manifest.json", manifest)])
    with pytest.raises(da.ArchiveError) as err:
        da.read_archive(path)
    assert str(err.value).startswith(path)
    assert "manifest.json" in str(err.value) or "missing.json" in str(err.value)


@pytest.mark.parametrize(
    "index",
    [
        b"[]",
        b"null",
        b'{"manifests": {}}',
        b'{"manifests": [1]}',
        b'{"manifests": [{"digest": 5}]}',
        b'{"manifests": [{"digest": "sha256:zz"}]}',
        b'{"manifests": [{"digest": "sha256:%s", "annotations": []}]}' % ("0" * 64).encode(),
        b"\xff",
    ],
)
def test_malformed_index_json_in_image_archive_fails_naming_the_archive(tmp_path, index):
    path = write_tar(tmp_path / "image.tar", [("oci-layout", b"{}"), ("index.json", index)])
    with pytest.raises(da.ArchiveError) as err:
        da.read_archive(path)
    assert str(err.value).startswith(path)


def test_manifest_blob_of_the_wrong_shape_fails_naming_the_archive(tmp_path):
    blob = b"[1, 2]"
    digest = hashlib.sha256(blob).hexdigest()
    index = json.dumps({"manifests": [{"digest": "sha256:" + digest}]}).encode()
    path = write_tar(tmp_path / "image.tar", [("index.json", index), ("blobs/sha256/" + digest, blob)])
    with pytest.raises(
        da.ArchiveError, match=r"image.tar: blobs/sha256/%s must hold a JSON object.*docker save" % digest
    ):
        da.read_archive(path)
