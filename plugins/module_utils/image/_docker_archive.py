# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a `docker save` archive's image identity from its tar headers, and import it idempotently.

A docker-save tar of vLLM is ~8.5 GB, but what identifies it (manifest.json / index.json, and the
image config blob whose sha256 *is* the image ID) is a few KiB. We walk the tar headers, seeking
over member bodies, and read only those small members. Both layouts are understood:

- legacy (Docker <= 24): manifest.json -> Config "<hex>.json", RepoTags
- OCI (Docker >= 25 writes both, other tools only index.json): index.json -> manifest (or nested
  index) blob -> config descriptor; tags from the io.containerd.image.name / ref.name annotations.

Only the Docker CLI is used on the target (no Python docker SDK there).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import tarfile

from ansible_collections.airgap.vllm.plugins.module_utils.common import _disk_space
from ansible_collections.airgap.vllm.plugins.module_utils.common._docker import DockerError

BLOCK = 512
# Small JSON members only: a config or manifest above this is not what we think it is.
MAX_META_BYTES = 16 * 1024 * 1024

MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
INDEX_TYPES = (MT_OCI_INDEX, MT_DOCKER_LIST)

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ArchiveError(Exception):
    """The file is not a readable docker-save archive."""


class CountingReader(object):
    """File wrapper that counts the bytes actually read (tests prove the body is never read)."""

    def __init__(self, fileobj):
        self._f = fileobj
        self.bytes_read = 0

    def read(self, size=-1):
        data = self._f.read(size)
        self.bytes_read += len(data)
        return data

    def seek(self, offset, whence=0):
        return self._f.seek(offset, whence)

    def tell(self):
        return self._f.tell()

    def close(self):
        self._f.close()


def normalize_ref(ref):
    """docker.io/library/busybox:1 -> busybox:1, the spelling `docker image inspect` shows."""
    if not ref:
        return ref
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/", "index.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    if ref.startswith("library/") and ref.count("/") == 1:
        ref = ref[len("library/") :]
    return ref


def _digest_path(digest):
    if not isinstance(digest, str):
        raise ArchiveError("malformed digest %r in the archive's index: re-create it with `docker save`" % (digest,))
    algo, _sep, hexpart = (digest or "").partition(":")
    if algo != "sha256" or not _HEX64.match(hexpart):
        raise ArchiveError("unsupported or malformed digest %r" % (digest,))
    return "blobs/sha256/" + hexpart


def _clean(name):
    while name.startswith("./"):
        name = name[2:]
    return name


def _is_gzip(path):
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


class _Members(object):
    """Index of regular members by name, then random access to the small ones."""

    def __init__(self, path):
        self.path = path
        self._raw = open(path, "rb")
        self.reader = CountingReader(self._raw)
        compressed = _is_gzip(path)
        self.compressed = compressed
        # Uncompressed: random-access mode, tarfile seeks over member bodies.
        # gzip (docker load accepts it): no seeking possible, whole read; documented.
        mode = "r:gz" if compressed else "r:"
        try:
            self._tar = tarfile.open(fileobj=self.reader, mode=mode)
            self.members = {}
            for info in self._tar:
                if info.isfile():
                    self.members[_clean(info.name)] = info
        except (tarfile.TarError, EOFError, OSError) as e:
            self.close()
            raise ArchiveError("%s: not a readable tar archive: %s" % (path, e))

    def has(self, name):
        return name in self.members

    def read(self, name):
        info = self.members.get(name)
        if info is None:
            raise ArchiveError("%s: member %s not found" % (self.path, name))
        if info.size > MAX_META_BYTES:
            raise ArchiveError("%s: member %s is %d bytes, too large for metadata" % (self.path, name, info.size))
        f = self._tar.extractfile(info)
        return f.read()

    def read_json(self, name):
        try:
            return json.loads(self.read(name).decode("utf-8"))
        except ValueError as e:
            raise ArchiveError("%s: member %s is not valid JSON: %s" % (self.path, name, e))

    def close(self):
        try:
            self._raw.close()
        except Exception:  # pragma: no cover
            pass


def _config_id(members, config_name):
    """The image ID is sha256 of the config blob; hash it (it is small) rather than trust its name."""
    data = members.read(config_name)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _pick_manifest(members, descriptor, platform, depth=0):
    """Follow an OCI index down to one image manifest (the requested platform, else the first)."""
    if depth > 4:
        raise ArchiveError("%s: OCI index nesting too deep" % members.path)
    name = _digest_path(descriptor.get("digest"))
    doc = _shape(members.read_json(name), dict, members.path, name, "a JSON object")
    media = descriptor.get("mediaType") or doc.get("mediaType")
    if media in INDEX_TYPES or ("manifests" in doc and "config" not in doc):
        manifests = _shape(doc.get("manifests") or [], list, members.path, name, 'a "manifests" list')
        candidates = [_shape(m, dict, members.path, name, "manifest descriptors as objects") for m in manifests]
        candidates = [
            m
            for m in candidates
            if (m.get("annotations") or {}).get("vnd.docker.reference.type") != "attestation-manifest"
        ]
        if not candidates:
            raise ArchiveError("%s: OCI index without image manifests" % members.path)
        chosen = candidates[0]
        if platform:
            os_name, _sep, arch = platform.partition("/")
            for m in candidates:
                p = m.get("platform") or {}
                if p.get("os") == os_name and p.get("architecture") == arch:
                    chosen = m
                    break
        return _pick_manifest(members, chosen, platform, depth + 1)
    return doc


def _shape(value, kind, path, member, what):
    """value when it is a `kind`; else ArchiveError naming the archive, the member and the fix."""
    if not isinstance(value, kind):
        raise ArchiveError(
            "%s: %s must hold %s, found %s: the archive is malformed; re-create it with "
            "`docker save` (or rebuild the bundle)" % (path, member, what, type(value).__name__)
        )
    return value


def _oci_tags(descriptor):
    ann = descriptor.get("annotations") or {}
    full = ann.get("io.containerd.image.name")
    if full:
        return [normalize_ref(full)]
    ref = ann.get("org.opencontainers.image.ref.name")
    # A bare tag ("v1") names no repository; only a full reference is usable as a RepoTag.
    if ref and (":" in ref or "/" in ref) and not ref.startswith(":"):
        return [normalize_ref(ref)]
    return []


def read_archive(path, platform="linux/amd64"):
    """Return {'images': [{'image_id', 'repo_tags'}], 'layout', 'bytes_read', 'size'} without reading layer bodies.

    A malformed manifest.json / index.json raises ArchiveError naming the archive and the fix, never a traceback.
    """
    try:
        return _read_archive(path, platform)
    except ArchiveError as e:
        if str(e).startswith(path):
            raise
        raise ArchiveError("%s: %s" % (path, e))
    except (AttributeError, TypeError, KeyError, ValueError) as e:
        raise ArchiveError(
            "%s: manifest.json / index.json has an unexpected shape (%s): the archive is malformed; "
            "re-create it with `docker save` (or rebuild the bundle)" % (path, e)
        )


def _read_archive(path, platform):
    if not os.path.isfile(path):
        raise ArchiveError("%s: no such file" % path)
    members = _Members(path)
    try:
        images = []
        layout = None
        if members.has("manifest.json"):
            layout = "docker"
            manifest = _shape(members.read_json("manifest.json"), list, path, "manifest.json", "a list")
            for entry in manifest:
                _shape(entry, dict, path, "manifest.json", "one object per image")
                config = _shape(entry.get("Config") or "", str, path, "manifest.json", 'a "Config" file name')
                config = _clean(config)
                if not config:
                    raise ArchiveError(
                        "%s: manifest.json entry without Config: re-create the archive with `docker save`" % path
                    )
                tags = _shape(entry.get("RepoTags") or [], list, path, "manifest.json", '"RepoTags" as a list')
                images.append(
                    {
                        "image_id": _config_id(members, config),
                        "repo_tags": [
                            normalize_ref(_shape(t, str, path, "manifest.json", "RepoTags strings")) for t in tags
                        ],
                    }
                )
            if members.has("index.json"):
                layout = "docker+oci"
        elif members.has("index.json"):
            layout = "oci"
            index = _shape(members.read_json("index.json"), dict, path, "index.json", "a JSON object")
            by_id = {}
            for desc in _shape(index.get("manifests") or [], list, path, "index.json", 'a "manifests" list'):
                _shape(desc, dict, path, "index.json", "manifest descriptors as objects")
                man = _pick_manifest(members, desc, platform)
                config = _shape(man.get("config") or {}, dict, path, "the image manifest", 'a "config" object')
                image_id = _config_id(members, _digest_path(config.get("digest")))
                if config.get("digest") != image_id:
                    raise ArchiveError("%s: config blob does not match its digest %s" % (path, config.get("digest")))
                entry = by_id.setdefault(image_id, {"image_id": image_id, "repo_tags": []})
                for tag in _oci_tags(desc):
                    if tag not in entry["repo_tags"]:
                        entry["repo_tags"].append(tag)
            images = list(by_id.values())
        else:
            raise ArchiveError("%s: neither manifest.json nor index.json found: not a docker-save archive" % path)
        if not images:
            raise ArchiveError("%s: archive names no image" % path)
        return {
            "images": images,
            "layout": layout,
            "compressed": members.compressed,
            "bytes_read": members.reader.bytes_read,
            "size": os.path.getsize(path),
        }
    finally:
        members.close()


def plan_import(archive, present_id, tag_ids, wanted_tags):
    """Decide what to do.

    archive: read_archive() result for one image; present_id: docker's ID for archive's image ID or None;
    tag_ids: {ref: id-or-None} for every wanted tag. Returns {'load': bool, 'tags': [refs to apply]}.
    Tags that `docker load` itself restores (the archive's RepoTags) are re-checked after the load.
    """
    image_id = archive["image_id"]
    load = present_id != image_id
    tags = [ref for ref in wanted_tags if tag_ids.get(ref) != image_id]
    if load:
        tags = [ref for ref in tags if ref not in archive["repo_tags"]]
    return {"load": load, "tags": tags}


def derived_image(docker, ref, base_id, labels, base_label):
    """An image derived from the archive's, recorded earlier by `ref`: {'image_id', 'labels', 'current'} or None.

    current: the image is present, its `base_label` names `base_id` (the archive's image) and it carries every
    other label in `labels` with the same value -- the image a build from this base with these inputs made.
    Its ID is a content hash, so a present image with those labels is the image that was built and verified.
    """
    if not ref:
        return None
    items = docker.inspect_json(["image", "inspect", ref])
    if not items:
        return None
    image = items[0]
    got = (image.get("Config") or {}).get("Labels") or {}
    want = dict(labels or {})
    want[base_label] = base_id
    current = bool(base_id) and all(got.get(k) == v for k, v in want.items())
    return {"image_id": image.get("Id"), "labels": got, "current": current}


def daemon_error(docker):
    """None when the Docker daemon answers (`docker version` prints its server version), else what the CLI said."""
    rc, out, err = docker.call(["version", "--format", "{{.Server.Version}}"], check=False)
    if rc == 0 and out.strip():
        return None
    return "%s version: %s" % (docker.docker_bin, (err or out).strip() or "rc %s" % rc)


def failure_message(path, error, daemon=None, hint=""):
    """The one message of a failed import, its cause first: the archive is not there (the bundle was not staged), the
    Docker daemon does not answer (`daemon`: daemon_error's text, asked only after a Docker failure), else the import's
    own error. `hint` (the role's advice) follows it."""
    if not os.path.isfile(path):
        msg = "%s is not a file: stage the offline bundle first (--tags bundle)." % path
    elif daemon:
        msg = "Docker does not answer (%s)." % daemon
    else:
        msg = "Importing %s failed: %s" % (path, error)
    return msg + (" " + hint if hint else "")


def _load_with_room(path, docker, info, free=None):
    """`docker load` once Docker's root directory has the room (module_utils/common/_disk_space.py); a disk that fills
    anyway during the load gives the same clear words. Either way the images Docker holds are untouched (the load
    adds an image, it replaces none) and the daemon releases the layers of a failed load itself."""
    free = free or _disk_space.free_bytes
    need = _disk_space.image_load_need(
        info["size"], info.get("compressed"), _disk_space.gzip_isize(path) if info.get("compressed") else None
    )
    kept = "the images Docker holds are untouched"
    root = docker.root_dir()
    try:
        avail = free(root) if root else -1
    except OSError:
        avail = -1  # Docker's root is not visible here (another mount namespace): docker load tells
    short = _disk_space.shortfall(root, avail, need, 0, "docker load of %s" % path, kept)
    if short:
        raise ArchiveError(short)
    try:
        docker.load(path)
    except DockerError as e:
        if not _disk_space.said_disk_full(" ".join([str(e), e.stderr or ""])):
            raise
        raise ArchiveError(
            "%s: the disk filled during docker load of %s (%s): the load needs %d bytes (%s); Docker released the "
            "layers of the failed load and %s"
            % (root, path, (e.stderr or str(e)).strip(), need, _disk_space.human(need), kept)
        )


def import_archive(path, docker, tag=None, check_mode=False, platform="linux/amd64", free=None):
    """Load the archive only if its image ID is absent, then make `tag` (and its own tags) point at it.

    free: bytes free at a path (statvfs by default), read before the load for Docker's root directory."""
    if check_mode and not os.path.exists(path):
        # A check run before the bundle is staged: the real run stages it first, then loads it.
        return {
            "changed": True,
            "loaded": True,
            "tagged": [tag] if tag else [],
            "layout": None,
            "archive_bytes_read": 0,
            "images": [],
            "image_id": None,
            "repo_tags": [tag] if tag else [],
            "warnings": ["%s does not exist yet; a real run would load it" % path],
        }
    info = read_archive(path, platform=platform)
    if len(info["images"]) != 1 and tag:
        raise ArchiveError("%s holds %d images; `tag` needs exactly one" % (path, len(info["images"])))
    result = {
        "changed": False,
        "loaded": False,
        "tagged": [],
        "layout": info["layout"],
        "warnings": [],
        "archive_bytes_read": info["bytes_read"],
        "images": info["images"],
        "image_id": info["images"][0]["image_id"],
        "repo_tags": [],
    }
    need_load = False
    pending_tags = []
    for image in info["images"]:
        wanted = list(image["repo_tags"])
        if tag and tag not in wanted:
            wanted.append(tag)
        present = docker.image_id(image["image_id"])
        tag_ids = dict((ref, docker.image_id(ref)) for ref in wanted)
        plan = plan_import(image, present, tag_ids, wanted)
        need_load = need_load or plan["load"]
        pending_tags.append((image, wanted, plan["tags"]))
    if need_load:
        result["loaded"] = True
        result["changed"] = True
        if not check_mode:
            _load_with_room(path, docker, info, free)
    for image, wanted, to_tag in pending_tags:
        if need_load and not check_mode:
            # docker load restores the archive's own tags; recompute what is still missing.
            to_tag = [ref for ref in wanted if docker.image_id(ref) != image["image_id"]]
            if docker.image_id(image["image_id"]) != image["image_id"]:
                raise DockerError("docker load of %s finished but image %s is not present" % (path, image["image_id"]))
        for ref in to_tag:
            if not check_mode:
                docker.tag(image["image_id"], ref)
            result["tagged"].append(ref)
            result["changed"] = True
        result["repo_tags"].extend(r for r in wanted if r not in result["repo_tags"])
    return result
