"""Unit tests for _docker_archive: header-walk identification and the load/tag decision."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.common import _docker as dk
from ansible_collections.airgap.vllm.plugins.module_utils.image import _docker_archive as da

CONFIG = json.dumps(
    {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}, sort_keys=True
).encode()
CONFIG_HEX = hashlib.sha256(CONFIG).hexdigest()


def write_tar(path, members):
    """members: (name, bytes) or (name, int) - an int is a body of that size left as a hole (sparse file)."""
    with open(path, "wb") as f:
        for name, body in members:
            info = tarfile.TarInfo(name)
            info.size = body if isinstance(body, int) else len(body)
            info.mtime = 0
            f.write(info.tobuf(format=tarfile.PAX_FORMAT))
            if isinstance(body, int):
                f.seek(body, os.SEEK_CUR)
            else:
                f.write(body)
            pad = (-info.size) % 512
            if pad:
                f.seek(pad, os.SEEK_CUR) if isinstance(body, int) else f.write(b"\0" * pad)
        f.write(b"\0" * 1024)


def legacy_members(layer_body=b"layer-bytes", tags=("vllm/vllm-openai:v0.27.1",)):
    manifest = [{"Config": CONFIG_HEX + ".json", "RepoTags": list(tags), "Layers": ["abc/layer.tar"]}]
    return [
        ("abc/VERSION", b"1.0"),
        ("abc/layer.tar", layer_body),
        (CONFIG_HEX + ".json", CONFIG),
        ("manifest.json", json.dumps(manifest).encode()),
        ("repositories", b"{}"),
    ]


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def oci_members(nested_index=True, name_annotation="docker.io/vllm/vllm-openai:v0.27.1", platform="amd64"):
    cfg_digest, cfg = blob(CONFIG)
    layer_digest, layer = blob(b"layer")
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest, "size": len(cfg)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": 5}],
        }
    ).encode()
    man_digest, _blob = blob(manifest)
    other_cfg_digest, other_cfg = blob(b'{"architecture":"arm64"}')
    other_manifest = json.dumps({"schemaVersion": 2, "config": {"digest": other_cfg_digest}, "layers": []}).encode()
    other_digest, _blob = blob(other_manifest)
    members = [
        ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
        ("blobs/sha256/" + layer_digest[7:], layer),
        ("blobs/sha256/" + cfg_digest[7:], cfg),
        ("blobs/sha256/" + man_digest[7:], manifest),
        ("blobs/sha256/" + other_cfg_digest[7:], other_cfg),
        ("blobs/sha256/" + other_digest[7:], other_manifest),
    ]
    ann = {"io.containerd.image.name": name_annotation, "org.opencontainers.image.ref.name": "v0.27.1"}
    if nested_index:
        sub = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": da.MT_OCI_INDEX,
                "manifests": [
                    {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": other_digest,
                        "size": 1,
                        "platform": {"os": "linux", "architecture": "arm64"},
                    },
                    {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": man_digest,
                        "size": 1,
                        "platform": {"os": "linux", "architecture": platform},
                    },
                ],
            }
        ).encode()
        sub_digest, _blob = blob(sub)
        members.append(("blobs/sha256/" + sub_digest[7:], sub))
        top = {"mediaType": da.MT_OCI_INDEX, "digest": sub_digest, "size": len(sub), "annotations": ann}
    else:
        top = {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": man_digest,
            "size": len(manifest),
            "annotations": ann,
        }
    members.append(("index.json", json.dumps({"schemaVersion": 2, "manifests": [top]}).encode()))
    return members


def test_legacy_layout(tmp_path):
    path = str(tmp_path / "img.tar")
    write_tar(path, legacy_members())
    info = da.read_archive(path)
    assert info["layout"] == "docker"
    assert info["images"] == [{"image_id": "sha256:" + CONFIG_HEX, "repo_tags": ["vllm/vllm-openai:v0.27.1"]}]


@pytest.mark.parametrize("nested", [True, False])
def test_oci_layout(tmp_path, nested):
    path = str(tmp_path / "oci.tar")
    write_tar(path, oci_members(nested_index=nested))
    info = da.read_archive(path)
    assert info["layout"] == "oci"
    assert info["images"] == [{"image_id": "sha256:" + CONFIG_HEX, "repo_tags": ["vllm/vllm-openai:v0.27.1"]}]


def test_oci_bare_ref_name_is_not_a_tag(tmp_path):
    members = oci_members(nested_index=False, name_annotation="")
    path = str(tmp_path / "oci.tar")
    write_tar(path, members)
    assert da.read_archive(path)["images"][0]["repo_tags"] == []


def test_docker25_both_layouts_prefers_manifest(tmp_path):
    members = oci_members(nested_index=False)
    manifest = [{"Config": "blobs/sha256/" + CONFIG_HEX, "RepoTags": ["vllm/vllm-openai:v0.27.1"], "Layers": []}]
    members.append(("manifest.json", json.dumps(manifest).encode()))
    path = str(tmp_path / "both.tar")
    write_tar(path, members)
    info = da.read_archive(path)
    assert info["layout"] == "docker+oci"
    assert info["images"][0]["image_id"] == "sha256:" + CONFIG_HEX


def test_config_tampered_is_detected_in_oci(tmp_path):
    members = oci_members(nested_index=False)
    members = [(n, b'{"tampered":1}' if b == CONFIG else b) for n, b in members]
    path = str(tmp_path / "bad.tar")
    write_tar(path, members)
    with pytest.raises(da.ArchiveError, match="does not match its digest"):
        da.read_archive(path)


@pytest.mark.parametrize(
    "members,match",
    [
        ([("hello.txt", b"hi")], "neither manifest.json nor index.json"),
        ([("manifest.json", b"{not json")], "not valid JSON"),
        ([("manifest.json", b"[{\"RepoTags\": []}]")], "without Config"),
    ],
)
def test_bad_archives(tmp_path, members, match):
    path = str(tmp_path / "x.tar")
    write_tar(path, members)
    with pytest.raises(da.ArchiveError, match=match):
        da.read_archive(path)


def test_not_a_tar(tmp_path):
    path = tmp_path / "x.tar"
    path.write_bytes(b"\x01" * 2000)
    with pytest.raises(da.ArchiveError, match="not a readable tar"):
        da.read_archive(str(path))


def test_large_sparse_layer_is_never_read(tmp_path):
    """A 6 GiB layer body (a hole on disk): the ID comes from headers in well under a second."""
    size = 6 * 1024**3 + 123
    path = str(tmp_path / "big.tar")
    write_tar(path, legacy_members(layer_body=size))
    assert os.path.getsize(path) > size
    start = time.monotonic()
    info = da.read_archive(path)
    elapsed = time.monotonic() - start
    assert info["images"][0]["image_id"] == "sha256:" + CONFIG_HEX
    assert elapsed < 0.5, elapsed
    # headers + a few small members; nothing of the 6 GiB body
    assert info["bytes_read"] < 64 * 1024, info["bytes_read"]


def test_normalize_ref():
    assert da.normalize_ref("docker.io/library/busybox:1") == "busybox:1"
    assert da.normalize_ref("docker.io/vllm/vllm-openai:v1") == "vllm/vllm-openai:v1"
    assert da.normalize_ref("registry.local:5000/x/y:1") == "registry.local:5000/x/y:1"


class FakeDocker(object):
    """Stands in for the CLI: a dict of refs -> ids, records calls."""

    def __init__(self, images=None, tags=None, archive_tags=None, archive_id=None):
        self.ids = set(images or [])
        self.tags = dict(tags or {})
        self.calls = []
        self.archive_tags = archive_tags or []
        self.archive_id = archive_id

    def image_id(self, ref):
        if ref in self.ids:
            return ref
        return self.tags.get(ref)

    root = "/"
    full = None  # the stderr of a load that runs out of disk

    def root_dir(self):
        return self.root

    def load(self, path):
        self.calls.append(("load", path))
        if self.full:
            raise dk.DockerError("docker load failed", cmd=["docker", "load"], rc=1, stderr=self.full)
        self.ids.add(self.archive_id)
        for t in self.archive_tags:
            self.tags[t] = self.archive_id

    def tag(self, image_id, ref):
        self.calls.append(("tag", image_id, ref))
        self.tags[ref] = image_id


@pytest.fixture
def legacy_tar(tmp_path):
    path = str(tmp_path / "img.tar")
    write_tar(path, legacy_members())
    return path


IMG = "sha256:" + CONFIG_HEX
TAG = "vllm/vllm-openai:v0.27.1"


def test_import_loads_when_absent_and_tags(legacy_tar):
    d = FakeDocker(archive_tags=[TAG], archive_id=IMG)
    r = da.import_archive(legacy_tar, d, tag="local/vllm:prod")
    assert r["changed"] and r["loaded"]
    assert d.calls == [("load", legacy_tar), ("tag", IMG, "local/vllm:prod")]
    assert set(r["repo_tags"]) == {TAG, "local/vllm:prod"}
    # converged: nothing happens
    d.calls = []
    r2 = da.import_archive(legacy_tar, d, tag="local/vllm:prod")
    assert not r2["changed"] and not r2["loaded"] and d.calls == []


def test_import_check_mode_does_nothing(legacy_tar):
    d = FakeDocker(archive_tags=[TAG], archive_id=IMG)
    r = da.import_archive(legacy_tar, d, tag="local/vllm:prod", check_mode=True)
    assert r["changed"] and r["loaded"] and r["tagged"] == ["local/vllm:prod"]
    assert d.calls == []


def test_present_image_with_moved_tag_is_retagged_not_loaded(legacy_tar):
    d = FakeDocker(images=[IMG], tags={TAG: "sha256:" + "0" * 64}, archive_id=IMG)
    r = da.import_archive(legacy_tar, d)
    assert r["changed"] and not r["loaded"]
    assert d.calls == [("tag", IMG, TAG)]


def test_same_tag_other_image_triggers_load(legacy_tar):
    """community.docker loads by name: a stale image under the same tag would be kept. We load by ID."""
    d = FakeDocker(tags={TAG: "sha256:" + "1" * 64}, archive_tags=[TAG], archive_id=IMG)
    r = da.import_archive(legacy_tar, d)
    assert r["loaded"] and d.calls[0] == ("load", legacy_tar)
    assert d.tags[TAG] == IMG


def test_load_that_does_not_produce_the_id_fails(legacy_tar):
    d = FakeDocker(archive_id="sha256:" + "2" * 64)
    with pytest.raises(dk.DockerError, match="not present"):
        da.import_archive(legacy_tar, d)


def test_load_refused_before_it_starts_when_docker_root_lacks_room(legacy_tar):
    """Issue 46: disk full during an image load. Checked first: the path, the bytes needed, nothing loaded."""
    d = FakeDocker(images=["sha256:" + "9" * 64], tags={TAG: "sha256:" + "9" * 64}, archive_tags=[TAG], archive_id=IMG)
    d.root = "/var/lib/docker"
    need = 2 * os.path.getsize(legacy_tar)
    with pytest.raises(da.ArchiveError) as e:
        da.import_archive(legacy_tar, d, free=lambda p: {"/var/lib/docker": need - 1}[p])
    msg = str(e.value)
    assert msg.startswith("/var/lib/docker: %d bytes free" % (need - 1))
    assert "needs %d bytes" % need in msg and legacy_tar in msg and "untouched" in msg
    assert d.calls == [] and d.tags[TAG] == "sha256:" + "9" * 64  # the previous image keeps its tag
    # Exactly enough: it loads.
    r = da.import_archive(legacy_tar, d, free=lambda p: need)
    assert r["loaded"] and d.tags[TAG] == IMG


def test_disk_that_fills_during_the_load_says_so(legacy_tar):
    d = FakeDocker(tags={TAG: "sha256:" + "9" * 64}, archive_tags=[TAG], archive_id=IMG)
    d.full = "Error processing tar file(exit status 1): write /usr/lib/x.so: no space left on device"
    with pytest.raises(da.ArchiveError) as e:
        da.import_archive(legacy_tar, d, free=lambda p: 1 << 40)
    msg = str(e.value)
    assert "disk filled during docker load" in msg and "no space left on device" in msg
    assert "needs %d bytes" % (2 * os.path.getsize(legacy_tar)) in msg
    assert d.tags[TAG] == "sha256:" + "9" * 64
    # Another failure stays Docker's own error.
    d.full = None
    d2 = FakeDocker(archive_id=IMG)
    d2.full = "Cannot connect to the Docker daemon"
    with pytest.raises(dk.DockerError):
        da.import_archive(legacy_tar, d2, free=lambda p: 1 << 40)


def test_docker_root_not_visible_is_not_judged(legacy_tar):
    d = FakeDocker(archive_tags=[TAG], archive_id=IMG)

    def unreadable(path):
        raise OSError(2, "No such file or directory")

    assert da.import_archive(legacy_tar, d, free=unreadable)["loaded"]


def test_cli_image_id_parses_inspect():
    calls = []

    def run(cmd):
        calls.append(cmd)
        if cmd[-1] == "present":
            return 0, "sha256:abc\n", ""
        if cmd[-1] == "absent":
            return 1, "[]\n", "Error: No such image: absent\n"
        return 1, "", "Cannot connect to the Docker daemon"

    cli = dk.DockerCli("/usr/bin/docker", run=run)
    assert cli.image_id("present") == "sha256:abc"
    assert cli.image_id("absent") is None
    with pytest.raises(dk.DockerError, match="Cannot connect"):
        cli.image_id("broken")
    assert calls[0][:4] == ["/usr/bin/docker", "image", "inspect", "--format"]


def _docker_ok():
    if not shutil.which("docker"):
        return False
    return (
        subprocess.run(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
        == 0
    )


@pytest.mark.skipif(not _docker_ok(), reason="needs a running Docker daemon")
def test_real_docker_save_roundtrip(tmp_path):
    """A real `docker save` of a from-scratch image: our ID equals docker's, and import is idempotent."""
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    (rootfs / "hello").write_text("hi %s\n" % time.time())
    ref = "airgap-test/docker-archive-unit:%d" % os.getpid()
    tar_in = str(tmp_path / "rootfs.tar")
    with tarfile.open(tar_in, "w") as t:
        t.add(str(rootfs / "hello"), arcname="hello")
    subprocess.run(["docker", "import", tar_in, ref], check=True, stdout=subprocess.DEVNULL)
    saved = str(tmp_path / "saved.tar")
    try:
        subprocess.run(["docker", "save", "-o", saved, ref], check=True)
        want = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", ref],
            check=True,
            stdout=subprocess.PIPE,
            universal_newlines=True,
        ).stdout.strip()
        info = da.read_archive(saved)
        assert info["images"][0]["image_id"] == want
        assert info["images"][0]["repo_tags"] == [ref]

        def run(cmd):
            p = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False
            )
            return p.returncode, p.stdout, p.stderr

        cli = dk.DockerCli(run=run)
        subprocess.run(["docker", "rmi", ref], check=True, stdout=subprocess.DEVNULL)
        r = da.import_archive(saved, cli, tag=ref + "-extra")
        assert r["loaded"] and r["tagged"] == [ref + "-extra"]
        r = da.import_archive(saved, cli, tag=ref + "-extra")
        assert not r["changed"]
    finally:
        subprocess.run(
            ["docker", "rmi", "-f", ref, ref + "-extra"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )


def test_counting_reader_counts():
    r = da.CountingReader(io.BytesIO(b"x" * 100))
    r.read(10)
    r.seek(50)
    r.read()
    assert r.bytes_read == 60


def test_check_mode_before_staging_reports_would_load(tmp_path):
    d = FakeDocker()
    r = da.import_archive(str(tmp_path / "not-yet.tar"), d, tag=TAG, check_mode=True)
    assert r["changed"] and r["loaded"] and d.calls == [] and r["warnings"]
    with pytest.raises(da.ArchiveError, match="no such file"):
        da.import_archive(str(tmp_path / "not-yet.tar"), d, tag=TAG)


def test_failure_message_says_the_cause_first_then_the_hint(tmp_path):
    """One fatal line for a failed import (tests/unit/test_one_fatal_line.py): no rescue in the roles asks again."""
    missing = str(tmp_path / "absent.tar")
    assert da.failure_message(missing, da.ArchiveError("x"), hint="Use the bundle.") == (
        "%s is not a file: stage the offline bundle first (--tags bundle). Use the bundle." % missing
    )
    archive = tmp_path / "image.tar"
    archive.write_bytes(b"x")
    down = "docker version: Cannot connect to the Docker daemon"
    assert da.failure_message(str(archive), dk.DockerError("load failed"), down) == (
        "Docker does not answer (%s)." % down
    )
    assert da.failure_message(str(archive), dk.DockerError("docker load failed (rc=1): bad layer"), None) == (
        "Importing %s failed: docker load failed (rc=1): bad layer" % archive
    )


@pytest.mark.parametrize(
    "answer, expected",
    [
        ((0, "20.10.24\n", ""), None),
        ((1, "", "Cannot connect to the Docker daemon\n"), "docker version: Cannot connect to the Docker daemon"),
        ((0, "\n", ""), "docker version: rc 0"),
    ],
)
def test_daemon_error_asks_docker_version(answer, expected):
    calls = []

    def run(cmd):
        calls.append(cmd)
        return answer

    assert da.daemon_error(dk.DockerCli("docker", run=run)) == expected
    assert calls == [["docker", "version", "--format", "{{.Server.Version}}"]]
