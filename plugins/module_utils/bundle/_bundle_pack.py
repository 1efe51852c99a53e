# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building the offline bundle's payload: artifacts in, files (whole or split) and manifest entries out.

Design (why):
- The operator's artifacts (a `.run`, an RPM directory, a docker-save tar, a model directory) go under
  `artifacts/<basename>`; a file bigger than `split_size` is written as `<name>.part000`, ... directly
  from the source (no whole copy first: the image tar alone is 8.5 GB), hashing the whole and each part
  in the same read. FAT32 stores at most 4 GiB - 1 byte per file.
- Rebuilding is cheap: a file (or all parts of one) whose size and mtime equal the source's is not copied
  again (like rsync), and hashes are remembered in `_bundle_hash.StampCache` (by size, mtime, ctime, inode and
  device, with the split size a source was cut at), so an unchanged bundle is neither copied nor read. In
  check mode nothing is written, and the caller does not save the stamp file.
- Files under artifacts/ that no artifact produces any more (a file now split, an old version) are
  removed, so the manifest and the disk agree; collections/ and wheels/ are hashed as found.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import os
import posixpath

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import BUF_SIZE, StampCache, read_exactly
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    PAYLOAD_DIRS,
    BundleError,
    part_name,
    sha256sums_text,
    split_plan,
)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._control_image import CONTROL_KIND

ARTIFACT_KINDS = ("driver", "fabricmanager", "toolkit", "rpms", "image", "model", "file")
# What the bundle build packs: the operator's kinds and the control-node image it adds itself (bundle_build_control_image,
# module_utils/bundle/_control_image.py), which an operator does not list and the bundle role never stages to a server.
PACK_KINDS = ARTIFACT_KINDS + (CONTROL_KIND,)
# FAT32 keeps at most 4 GiB - 1 byte in one file; 1 MiB under 4 GiB leaves room and stays aligned.
FAT32_SPLIT = 4 * 1024**3 - 1024**2


def kind_problem(artifact, index=0, kinds=ARTIFACT_KINDS):
    """None when the artifact (a bundle_build_artifacts entry) has one of `kinds`, else why not: the one
    check of the kind, for plan_artifacts (PACK_KINDS) and for the bundle_build role's preflight (filter
    airgap.vllm.bundle_artifact_kinds: ARTIFACT_KINDS), before anything is read or saved."""
    if not isinstance(artifact, dict):
        return "artifact #%d is not a mapping (kind, name, version, src)" % index
    kind = artifact.get("kind")
    if kind in kinds:
        return None
    label = artifact.get("src") or artifact.get("image") or artifact.get("name") or "#%d" % index
    return "artifact %s: kind %r is not one of %s" % (label, kind, ", ".join(kinds))


def kind_check(artifacts):
    """{'kinds': [ARTIFACT_KINDS], 'problems': [kind_problem() of each artifact with one]}."""
    problems = [kind_problem(a, i) for i, a in enumerate(artifacts or [])]
    return dict(kinds=list(ARTIFACT_KINDS), problems=[p for p in problems if p])


def plan_artifacts(artifacts):
    """[(src file, bundle-relative path, artifact)] for the artifact list, sorted by path.

    A directory artifact contributes every file below it (symlinks followed, as a Hugging Face cache
    snapshot links to its blobs). Raises BundleError for a bad entry or two sources landing on one path.
    """
    out = []
    seen = {}
    for i, a in enumerate(artifacts or []):
        if not isinstance(a, dict) or not a.get("src"):
            raise BundleError("artifact #%d needs src (a file or directory)" % i)
        problem = kind_problem(a, i, PACK_KINDS)
        if problem:
            raise BundleError(problem)
        src = os.path.normpath(os.path.expanduser(str(a["src"])))
        top = "artifacts/" + os.path.basename(src)
        if os.path.isdir(src):
            files = []
            for d, dirs, names in os.walk(src, followlinks=True):
                dirs.sort()
                for n in sorted(names):
                    full = os.path.join(d, n)
                    rel = posixpath.join(top, os.path.relpath(full, src).replace(os.sep, "/"))
                    files.append((full, rel))
            if not files:
                raise BundleError("artifact directory %s is empty" % src)
        elif os.path.isfile(src):
            files = [(src, top)]
        else:
            raise BundleError("artifact source %s not found (or not a file or directory)" % src)
        for full, rel in files:
            if rel in seen:
                raise BundleError("%s and %s would both be stored as %s: rename one" % (seen[rel], full, rel))
            seen[rel] = full
            out.append((full, rel, a))
    out.sort(key=lambda x: x[1].encode("utf-8"))
    return out


def layout(rel, size, split_size):
    """[(path on the medium, offset, length)] of one file: itself, or its numbered parts."""
    plan = split_plan(size, split_size)
    if len(plan) == 1:
        return [(rel, 0, size)]
    return [(part_name(rel, i), off, length) for i, (off, length) in enumerate(plan)]


def _cached_pieces(stamps, src, st, split_size):
    """(whole sha256, [piece sha256]) the stamp cache holds for this version of `src` split this way, or None."""
    rec = stamps.record(src, st, split_size=split_size)
    if rec is None or not isinstance(rec.get("parts"), list):
        return None
    return rec["sha256"], rec["parts"]


def _hash_ranges(path, pieces, bufsize=BUF_SIZE, write_to=None, mtime_ns=None):
    """Read `path` once; sha256 of the whole and of each (name, offset, length) piece.

    With write_to (the bundle root), each piece is also written to write_to/name (via a temp file and a
    rename, with the source's mtime). Returns (whole sha256, [piece sha256]).
    """
    whole = hashlib.sha256()
    shas = []
    buf = bytearray(min(bufsize, max([p[2] for p in pieces] + [1])))
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        for name, _off, length in pieces:
            h = hashlib.sha256()
            out = None
            tmp = None
            if write_to is not None:
                dest = os.path.join(write_to, name)
                parent = os.path.dirname(dest)
                if not os.path.isdir(parent):
                    os.makedirs(parent, 0o755)
                tmp = dest + ".airgap-tmp"
                out = open(tmp, "wb")
            try:
                for data in read_exactly(f, view, length, "%s shrank while it was read (%d bytes short)", path):
                    whole.update(data)
                    h.update(data)
                    if out is not None:
                        out.write(data)
            finally:
                if out is not None:
                    out.close()
            if tmp is not None:
                os.chmod(tmp, 0o644)
                os.utime(tmp, ns=(mtime_ns, mtime_ns))
                os.rename(tmp, dest)
            shas.append(h.hexdigest())
    return whole.hexdigest(), shas


def _up_to_date(root, pieces, src_st):
    """Every piece on the medium has its length and the source's mtime (what the last build wrote)."""
    for name, _off, length in pieces:
        try:
            st = os.stat(os.path.join(root, name))
        except OSError:
            return False
        if st.st_size != length or st.st_mtime_ns != src_st.st_mtime_ns:
            return False
    return True


def _wheel_meta(rel):
    base = posixpath.basename(rel)
    bits = base.split("-")
    return {"kind": "wheel", "name": bits[0], "version": bits[1] if len(bits) > 1 else ""}


def pack(root, artifacts, split_size=FAT32_SPLIT, stamps=None, check_mode=False, collection_version=""):
    """Bring root/artifacts/ in line with the artifacts and hash the payload.

    Returns {entries (manifest artifacts, sorted by path), sums (SHA256SUMS text), copied, removed}.
    """
    if split_size < 0:
        raise BundleError("split size %d: use 0 (no split) or a positive number of bytes" % split_size)
    stamps = stamps or StampCache(None)
    plan = plan_artifacts(artifacts)
    copied, removed = [], []
    entries = []
    wanted = set()
    for src, rel, a in plan:
        src_st = os.stat(src)
        pieces = layout(rel, src_st.st_size, split_size)
        wanted.update(p[0] for p in pieces)
        if not _up_to_date(root, pieces, src_st):
            copied.append(rel)
            if check_mode:
                cached = _cached_pieces(stamps, src, src_st, split_size)
                whole, shas = cached if cached else _hash_ranges(src, pieces)
            else:
                whole, shas = _hash_ranges(src, pieces, write_to=root, mtime_ns=src_st.st_mtime_ns)
                stamps.put(src, whole, src_st, split_size=split_size, parts=shas)
        else:
            cached = _cached_pieces(stamps, src, src_st, split_size)
            if cached:
                whole, shas = cached
            else:
                # The medium's copy of an unchanged source: hash what is on the medium (the source may be gone).
                whole, shas = _hash_medium(root, pieces)
                stamps.put(src, whole, src_st, split_size=split_size, parts=shas)
        entry = {
            "kind": a["kind"],
            "name": str(a.get("name") or posixpath.basename(rel)),
            "version": str(a.get("version", "") if a.get("version") is not None else ""),
            "path": rel,
            "size": src_st.st_size,
            "sha256": whole,
        }
        if len(pieces) > 1:
            entry["parts"] = [
                {"path": name, "size": length, "sha256": sha} for (name, _off, length), sha in zip(pieces, shas)
            ]
        entries.append(entry)
    # Whatever artifacts/ holds that no artifact produces now.
    top = os.path.join(root, "artifacts")
    for d, _dirs, names in os.walk(top, topdown=False):
        for n in names:
            full = os.path.join(d, n)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel not in wanted:
                removed.append(rel)
                if not check_mode:
                    os.unlink(full)
        if not check_mode and d != top:
            try:
                os.rmdir(d)
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
    for sub in PAYLOAD_DIRS[1:]:
        for d, dirs, names in os.walk(os.path.join(root, sub)):
            dirs.sort()
            for n in sorted(names):
                full = os.path.join(d, n)
                if os.path.islink(full):
                    continue
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                st = os.stat(full)
                sha = stamps.get(full, st)
                if sha is None:
                    sha = _hash_ranges(full, [(rel, 0, st.st_size)])[0]
                    stamps.put(full, sha, st)
                if sub == "wheels":
                    meta = _wheel_meta(rel)
                else:
                    meta = {"kind": "collection", "name": "airgap.vllm", "version": str(collection_version)}
                entries.append(dict(meta, path=rel, size=st.st_size, sha256=sha))
    entries.sort(key=lambda e: e["path"].encode("utf-8"))
    return {"entries": entries, "sums": sha256sums_text(entries), "copied": copied, "removed": sorted(removed)}


def _hash_medium(root, pieces):
    whole = hashlib.sha256()
    shas = []
    for name, _off, _length in pieces:
        h = hashlib.sha256()
        with open(os.path.join(root, name), "rb") as f:
            for chunk in iter(lambda: f.read(BUF_SIZE), b""):
                whole.update(chunk)
                h.update(chunk)
        shas.append(h.hexdigest())
    return whole.hexdigest(), shas
