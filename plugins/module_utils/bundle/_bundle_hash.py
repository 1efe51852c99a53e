# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline bundle: hashing, the stamp cache, parallel verification.

Design (why):
- A 30 GB bundle on a USB disk is read at 100-300 MB/s; hashing is faster than that. So the
  dominant cost is reads from the medium. Verification hashes files in parallel with large
  `readinto` buffers (hashlib releases the GIL on big updates) and remembers the result in a stamp
  cache keyed by (path, size, mtime_ns, ctime_ns, inode, device): an unchanged file is not hashed
  again. ctime is the key user space cannot set back (`touch -d` resets mtime, not ctime), so a file
  edited in place with its mtime restored is hashed again.
- Verification of the medium checks a split file's parts (`_bundle_manifest`); a staged (whole) file is
  checked whole.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    PAYLOAD_DIRS,
    BundleError,
    validate_entries,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic

BUF_SIZE = 8 * 1024 * 1024
STATES = ("ok", "missing", "size_mismatch", "checksum_mismatch", "unlisted", "not_a_file")


# ---------------------------------------------------------------- hashing


def hash_file(path, offset=0, length=None, bufsize=BUF_SIZE, hasher=None, on_bytes=None):
    """sha256 of path[offset:offset+length] with one reusable buffer; returns (hasher, bytes_hashed)."""
    h = hasher or hashlib.sha256()
    buf = bytearray(bufsize)
    view = memoryview(buf)
    done = 0
    with open(path, "rb", buffering=0) as f:
        if offset:
            f.seek(offset)
        while length is None or done < length:
            want = bufsize if length is None else min(bufsize, length - done)
            n = f.readinto(view[:want])
            if not n:
                break
            h.update(view[:n])
            done += n
            if on_bytes:
                on_bytes(n)
    return h, done


def read_exactly(f, view, length, short, name):
    """Yield the next ``length`` bytes of the unbuffered file ``f`` as slices of ``view`` (at most its size each);
    BundleError(short % (name, bytes left)) when the file ends first."""
    left = length
    while left:
        n = f.readinto(view[: min(len(view), left)])
        if not n:
            raise BundleError(short % (name, left))
        yield view[:n]
        left -= n


def file_key(path, st=None):
    """What identifies one version of a file's bytes. ctime_ns cannot be set back from user space."""
    st = st or os.stat(path)
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "ino": st.st_ino,
        "dev": st.st_dev,
    }


class StampCache(object):
    """sha256 of files remembered by (realpath, size, mtime_ns, ctime_ns, inode, device); JSON on disk.

    The collection's one hash cache: verification (here), staging (`_bundle_stage`) and the bundle build
    (`_bundle_pack`, which also records how a source was split: `put(..., split_size=..., parts=[...])`, read
    back with `record(..., split_size=...)`). save() writes the file atomically and durably (`_files.write_atomic`).
    """

    def __init__(self, path=None):
        self.path = path
        self.entries = {}
        self.dirty = False
        if path and os.path.exists(path):
            try:
                with open(path, "rb") as f:
                    data = json.loads(f.read().decode("utf-8"))
                files = data.get("files") if isinstance(data, dict) else None
                if isinstance(files, dict):
                    # A broken cache (wrong JSON shape, [] / null / {"files": []}) only costs a re-hash.
                    self.entries = dict((k, v) for k, v in files.items() if isinstance(v, dict))
            except (ValueError, IOError, OSError):
                self.entries = {}  # a broken cache only costs a re-hash

    def record(self, path, st=None, **match):
        """The record of this version of the file (whose `match` fields are equal too), else None."""
        rec = self.entries.get(os.path.realpath(path))
        if not rec or not isinstance(rec, dict):
            return None
        try:
            key = file_key(path, st)
        except OSError:
            return None
        key.update(match)
        for k, v in key.items():
            if rec.get(k) != v:
                return None
        return rec

    def get(self, path, st=None):
        rec = self.record(path, st)
        return rec.get("sha256") if rec else None

    def put(self, path, sha256, st=None, **extra):
        rec = file_key(path, st)
        rec.update(extra)
        rec["sha256"] = sha256
        self.entries[os.path.realpath(path)] = rec
        self.dirty = True

    def forget(self, path):
        if self.entries.pop(os.path.realpath(path), None) is not None:
            self.dirty = True

    def check_writable(self):
        """Raise BundleError naming the stamp file and the fix unless save() can write it."""
        if not self.path:
            return
        d = os.path.dirname(self.path) or "."
        try:
            if not os.path.isdir(d):
                os.makedirs(d, 0o755)
            if os.path.isdir(self.path):
                raise OSError(21, "Is a directory")
            tmp = "%s.probe.%d" % (self.path, os.getpid())
            with open(tmp, "w"):
                pass
            os.unlink(tmp)
        except (IOError, OSError) as e:
            raise BundleError(
                "stamp file %s cannot be written (%s): make its directory writable, or set "
                "stamp_file to another path (or \"\" to disable the cache); nothing was "
                "renamed into place" % (self.path, e.strerror or e)
            )

    def save(self):
        if not self.path or not self.dirty:
            return False
        try:
            write_atomic(
                self.path, json.dumps({"format": 1, "files": self.entries}, sort_keys=True), mode=0o644, makedirs=0o755
            )
        except (IOError, OSError) as e:
            raise BundleError(
                "stamp file %s cannot be written (%s): make its directory writable, or set "
                "stamp_file to another path (or \"\" to disable the cache)" % (self.path, e.strerror or e)
            )
        self.dirty = False
        return True


# ---------------------------------------------------------------- verify


def _check_file(path, size, sha256, stamps, bufsize):
    """(state, size found, sha256 found or None, hashed) of one file on disk against its expected size/sha256."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing", None, None, False  # absent, or a dangling symlink
    if not stat.S_ISREG(st.st_mode):
        return "not_a_file", None, None, False  # a directory, FIFO or device where the manifest lists a file
    if st.st_size != size:
        return "size_mismatch", st.st_size, None, False
    cached = stamps.get(path, st) if stamps is not None else None
    hashed = False
    if cached is None:
        cached = hash_file(path, bufsize=bufsize)[0].hexdigest()
        hashed = True
        # Only remember a hash taken of a file that did not change while we read it.
        if stamps is not None and file_key(path) == file_key(path, st):
            stamps.put(path, cached, st)
    return ("ok" if cached == sha256 else "checksum_mismatch"), st.st_size, cached, hashed


def _check_one(root, entry, stamps, bufsize):
    """One entry: the whole file when it is there (a staged copy), else its parts (a split file on the medium)."""
    path = os.path.join(root, entry["path"])
    res = {
        "path": entry["path"],
        "kind": entry.get("kind"),
        "expected_size": entry["size"],
        "expected_sha256": entry["sha256"],
        "size": None,
        "sha256": None,
        "hashed": False,
    }
    if not entry.get("parts") or os.path.lexists(path):
        res["state"], res["size"], res["sha256"], res["hashed"] = _check_file(
            path, entry["size"], entry["sha256"], stamps, bufsize
        )
        return res
    res["parts"] = []
    res["state"] = "ok"
    res["size"] = 0
    res["hashed_bytes"] = 0
    for p in entry["parts"]:
        state, size, sha, hashed = _check_file(os.path.join(root, p["path"]), p["size"], p["sha256"], stamps, bufsize)
        res["parts"].append({"path": p["path"], "state": state, "size": size, "sha256": sha, "hashed": hashed})
        res["size"] += size or 0
        res["hashed"] = res["hashed"] or hashed
        res["hashed_bytes"] += (size or 0) if hashed else 0
        if state != "ok" and res["state"] == "ok":
            res["state"] = state  # the first bad part decides; every part is listed under parts
    return res


def find_unlisted(root, entries, scan_dirs=PAYLOAD_DIRS):
    listed = set(e["path"] for e in entries)
    listed.update(p["path"] for e in entries for p in e.get("parts") or ())
    found = []
    for d in scan_dirs:
        top = os.path.join(root, d)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                if rel not in listed:
                    found.append(rel)
    return found


def verify_bundle(root, entries, stamps=None, workers=4, bufsize=BUF_SIZE, scan_dirs=PAYLOAD_DIRS):
    """Verify every entry (in parallel); return (results, summary). Never raises for a bad file."""
    entries = validate_entries(entries)
    workers = max(1, int(workers))
    # Biggest first: the long pole starts at once, small files fill the other workers.
    order = sorted(entries, key=lambda e: -e["size"])
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda e: _check_one(root, e, stamps, bufsize), order))
    results.sort(key=lambda r: r["path"])
    for rel in find_unlisted(root, entries, scan_dirs or ()):
        try:
            size = os.path.getsize(os.path.join(root, rel))
        except OSError:
            size = None  # a dangling symlink: reported as unlisted, without a size
        results.append(
            {
                "path": rel,
                "state": "unlisted",
                "kind": None,
                "expected_size": None,
                "expected_sha256": None,
                "size": size,
                "sha256": None,
                "hashed": False,
            }
        )
    summary = dict((s, 0) for s in STATES)
    for r in results:
        summary[r["state"]] += 1
    summary["hashed_bytes"] = sum(r.get("hashed_bytes", r["size"] or 0) for r in results if r["hashed"])
    summary["hashed_files"] = sum(1 for r in results if r["hashed"])
    return results, summary


def verify_failures(results, allow_unlisted=False):
    bad = [r for r in results if r["state"] != "ok" and not (allow_unlisted and r["state"] == "unlisted")]
    hints = {
        "missing": " (absent or a dangling symlink: copy the file into the bundle again)",
        "not_a_file": " (the manifest lists a file; replace this directory/special file with it)",
    }
    out = []
    for r in bad:
        parts = [p for p in r.get("parts") or () if p["state"] != "ok"]
        if parts:
            out.extend(
                "%s: %s%s (part of %s)"
                % (p["path"], p["state"].replace("_", " "), hints.get(p["state"], ""), r["path"])
                for p in parts
            )
        else:
            out.append("%s: %s%s" % (r["path"], r["state"].replace("_", " "), hints.get(r["state"], "")))
    return out
