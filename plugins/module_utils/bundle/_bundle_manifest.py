# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline bundle: the manifest and the bundle's layout on the medium.

What a bundle is (hashing and verification: `_bundle_hash`; staging on the host: `_bundle_stage`):
- manifest.yml lists the artifacts: bundle-relative `path`, `size`, `sha256` (`validate_entries` checks and
  normalises them; `load_manifest` reads the file, as YAML where PyYAML is there, else its JSON subset).
- FAT32 (4 GiB - 1 byte per file): the bundle build stores a bigger file as numbered parts
  (`<name>.part000`, ...); its manifest entry keeps the whole file's path, size and sha256 and lists
  each part's path, size and sha256 under `parts`. A directory holding the whole file (a staged copy, a disk
  written without splitting) is read whole (`source_files`). `SourceReader` reads the parts in order as one
  stream, hashing each part as it goes, so the medium is read once: staging hashes the whole as it copies.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import posixpath
import re
import stat

PAYLOAD_DIRS = ("artifacts", "collections", "wheels")
_SHA = re.compile(r"^[0-9a-f]{64}$")


class BundleError(Exception):
    """Bad manifest or bad arguments."""


# ---------------------------------------------------------------- manifest


def validate_entries(entries):
    """Check manifest entries; return them normalised (path, size:int, sha256 lower-case)."""
    if not isinstance(entries, list) or not entries:
        raise BundleError("manifest lists no artifacts")
    seen = set()
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise BundleError("artifact #%d is not a mapping" % i)
        path = e.get("path")
        if not path or not isinstance(path, str):
            raise BundleError("artifact #%d has no path" % i)
        if "\x00" in path:
            raise BundleError("artifact #%d: path %r contains a NUL byte; fix the manifest entry" % (i, path))
        norm = posixpath.normpath(path)
        if norm.startswith("/") or norm == ".." or norm.startswith("../"):
            raise BundleError("artifact path %r must stay inside the bundle" % path)
        if norm in seen:
            raise BundleError("artifact path %r listed twice" % path)
        seen.add(norm)
        sha = str(e.get("sha256", "")).lower()
        if not _SHA.match(sha):
            raise BundleError("artifact %s: sha256 %r is not 64 hex digits" % (path, e.get("sha256")))
        try:
            size = int(e.get("size"))
        except (TypeError, ValueError):
            raise BundleError("artifact %s: size %r is not an integer" % (path, e.get("size")))
        if size < 0:
            raise BundleError("artifact %s: negative size" % path)
        item = dict(e)
        item.update(path=norm, size=size, sha256=sha)
        if e.get("parts"):
            item["parts"] = _validate_parts(norm, size, e["parts"], seen)
        else:
            item.pop("parts", None)
        out.append(item)
    return out


def _validate_parts(path, size, parts, seen):
    """The `parts` of a split entry: bundle-relative path, size > 0 and sha256 each, sizes adding up."""
    if not isinstance(parts, list):
        raise BundleError("artifact %s: parts is not a list" % path)
    out = []
    for i, p in enumerate(parts):
        if not isinstance(p, dict) or not p.get("path") or not isinstance(p.get("path"), str):
            raise BundleError("artifact %s: part #%d has no path" % (path, i))
        norm = posixpath.normpath(p["path"])
        if "\x00" in norm or norm.startswith("/") or norm == ".." or norm.startswith("../"):
            raise BundleError("artifact %s: part path %r must stay inside the bundle" % (path, p["path"]))
        if norm in seen:
            raise BundleError("artifact %s: part path %r listed twice" % (path, p["path"]))
        seen.add(norm)
        sha = str(p.get("sha256", "")).lower()
        if not _SHA.match(sha):
            raise BundleError("artifact %s: part %s: sha256 %r is not 64 hex digits" % (path, norm, p.get("sha256")))
        try:
            psize = int(p.get("size"))
        except (TypeError, ValueError):
            raise BundleError("artifact %s: part %s: size %r is not an integer" % (path, norm, p.get("size")))
        if psize <= 0:
            raise BundleError("artifact %s: part %s: size must be positive" % (path, norm))
        out.append({"path": norm, "size": psize, "sha256": sha})
    if sum(p["size"] for p in out) != size:
        raise BundleError(
            "artifact %s: its parts add up to %d bytes, the file is %d" % (path, sum(p["size"] for p in out), size)
        )
    return out


def medium_files(entry):
    """What the bundle build put on the medium for a manifest entry: its parts, or the whole file."""
    return entry.get("parts") or [entry]


def source_files(root, entry):
    """What to read for an entry under root: the whole file when it is there (a staged copy, or a disk
    written without splitting), else its parts."""
    if entry.get("parts") and not os.path.lexists(os.path.join(root, entry["path"])):
        return entry["parts"]
    return [entry]


def medium_size(root, entry):
    """Bytes of the entry found on the medium (the whole file, else all its parts), or None if absent."""
    try:
        return os.stat(os.path.join(root, entry["path"])).st_size
    except OSError:
        pass
    if not entry.get("parts"):
        return None
    total = 0
    for p in entry["parts"]:
        try:
            total += os.stat(os.path.join(root, p["path"])).st_size
        except OSError:
            return None
    return total


def source_problem(root, entry):
    """Why the entry cannot be read from the medium, as (state, path), or None when every file is there.

    state is missing (also a dangling symlink), not_a_file or size_mismatch; path names the part."""
    for f in source_files(root, entry):
        full = os.path.join(root, f["path"])
        try:
            st = os.stat(full)
        except OSError:
            return "missing", f["path"]
        if not stat.S_ISREG(st.st_mode):
            return "not_a_file", f["path"]
        if st.st_size != f["size"]:
            return "size_mismatch", f["path"]
    return None


def split_plan(size, split_size):
    """[(offset, length)] of the parts a file of `size` bytes is stored as; one part when not split."""
    if split_size <= 0 or size <= split_size:
        return [(0, size)]
    return [(off, min(split_size, size - off)) for off in range(0, size, split_size)]


def part_name(path, index):
    return "%s.part%03d" % (path, index)


class PartError(BundleError):
    """A part on the medium does not match its manifest entry."""

    def __init__(self, msg, path, offset):
        super(PartError, self).__init__(msg)
        self.path = path
        self.offset = offset


class SourceReader(object):
    """Reads a manifest entry from the medium as one stream: the whole file, or its parts in order.

    Each part read from its first byte is hashed as it goes and compared with the manifest when it
    ends: a wrong part raises PartError naming it (with the offset it starts at), before a byte of the
    next part is returned. Offers seek(), readinto(), read() and close(), like a raw file.
    """

    def __init__(self, root, entry):
        self.files = []
        off = 0
        for f in source_files(root, entry):
            self.files.append(
                (os.path.join(root, f["path"]), f["path"], off, f["size"], f["sha256"] if f is not entry else None)
            )
            off += f["size"]
        self.size = off
        self.pos = 0
        self.idx = 0
        self.f = None
        self.h = None
        self.in_part = 0
        self.parts_checked = []

    def _open(self, idx, inner):
        if self.f is not None:
            self.f.close()
            self.f = None
        self.idx = idx
        self.in_part = inner
        if idx >= len(self.files):
            return
        full, _rel, _start, _size, sha = self.files[idx]
        self.f = open(full, "rb", buffering=0)
        if inner:
            self.f.seek(inner)
        self.h = hashlib.sha256() if sha and inner == 0 else None

    def seek(self, offset):
        if offset >= self.size:
            self._open(len(self.files), 0)
        else:
            for i, (_full, _rel, start, size, _sha) in enumerate(self.files):
                if start <= offset < start + size:
                    self._open(i, offset - start)
                    break
        self.pos = offset
        return offset

    def _end_part(self):
        _full, rel, start, size, sha = self.files[self.idx]
        if self.h is not None:
            got = self.h.hexdigest()
            if got != sha:
                raise PartError(
                    "%s: sha256 %s, manifest says %s (a damaged or misnamed part: copy it again "
                    "from the build machine)" % (rel, got, sha),
                    rel,
                    start,
                )
            self.parts_checked.append(rel)
        self._open(self.idx + 1, 0)

    def readinto(self, view):
        while self.idx < len(self.files):
            if self.f is None:
                self._open(self.idx, self.in_part)
            _full, rel, start, size, _sha = self.files[self.idx]
            want = min(len(view), size - self.in_part)
            n = self.f.readinto(view[:want]) if want > 0 else 0
            if n:
                if self.h is not None:
                    self.h.update(view[:n])
                self.in_part += n
                self.pos += n
                if self.in_part >= size:
                    self._end_part()
                return n
            if self.in_part < size:
                raise PartError("%s ended at %d bytes, manifest says %d" % (rel, self.in_part, size), rel, start)
            self._end_part()
        return 0

    def read(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.readinto(view[got:])
            if not k:
                break
            got += k
        return bytes(buf[:got])

    def close(self):
        if self.f is not None:
            self.f.close()
            self.f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def load_manifest(path):
    """Read manifest.yml (YAML if PyYAML is there, else its JSON subset); return its artifact list."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (IOError, OSError) as e:
        raise BundleError("cannot read manifest %s: %s" % (path, e))
    data = None
    try:
        import yaml  # PyYAML ships with ansible-core on the controller; targets may lack it.

        data = yaml.safe_load(text)
    except ImportError:
        try:
            data = json.loads(text)
        except ValueError:
            raise BundleError(
                "%s: PyYAML is not installed here and the manifest is not JSON; pass the artifacts list instead" % path
            )
    except Exception as e:
        raise BundleError("%s: not valid YAML: %s" % (path, e))
    if not isinstance(data, dict) or "artifacts" not in data:
        raise BundleError("%s: no 'artifacts' list" % path)
    return validate_entries(data["artifacts"])


def sha256sums_text(entries):
    """SHA256SUMS of the files as they are on the medium (the parts of a split file), for `sha256sum -c`
    (two spaces: the text-mode marker is fine for binary files), sorted by the path's bytes."""
    lines = []
    for e in entries:
        for f in medium_files(e):
            lines.append((f["path"], "%s  %s\n" % (f["sha256"], f["path"])))
    lines.sort(key=lambda x: x[0].encode("utf-8"))
    return "".join(line for _p, line in lines)
