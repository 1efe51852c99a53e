# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline bundle: manifest, fast parallel verification with a stamp cache, resumable staging.

Design (why):
- A 30 GB bundle on a USB disk is read at 100-300 MB/s; hashing is faster than that. So the
  dominant cost is reads from the medium. Verification hashes files in parallel with large
  `readinto` buffers (hashlib releases the GIL on big updates) and remembers the result in a stamp
  cache keyed by (path, size, mtime_ns, ctime_ns, inode, device): an unchanged file is not hashed
  again. ctime is the key user space cannot set back (`touch -d` resets mtime, not ctime), so a file
  edited in place with its mtime restored is hashed again.
- Staging hashes while copying (each byte read from the medium once), into `<dest>.part`;
  an interrupted copy resumes from the `.part` (its prefix is re-hashed from the local
  destination disk, not the medium). Nothing is renamed into place until every file of the call
  has matched the manifest, so a corrupt artifact leaves only `.part` files behind. If a rename fails
  part-way, the ones already done are undone; the stamp file must be writable before anything moves.
- Each `.part` has a `.part.json` sidecar naming the manifest entry (sha256, size) it was started for:
  a part left over from an older bundle is discarded and restarted, not reported as a checksum mismatch.
- Progress (percent, rate, ETA) is written to a log file that an operator can `tail -f`.
- FAT32 (4 GiB - 1 byte per file): the bundle build stores a bigger file as numbered parts
  (`<name>.part000`, ...); its manifest entry keeps the whole file's path, size and sha256 and lists
  each part's path, size and sha256 under `parts`. Staging reads the parts in order as one stream
  (`SourceReader`), hashing the whole and each part as it goes, so the medium is still read once and
  the resume point is still the destination's `.part`. Verification of the medium checks the parts;
  a staged (whole) file is checked whole.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import posixpath
import re
import shlex
import stat
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.airgap.vllm.plugins.module_utils._files import write_atomic

BUF_SIZE = 8 * 1024 * 1024
STATES = ("ok", "missing", "size_mismatch", "checksum_mismatch", "unlisted", "not_a_file")
PAYLOAD_DIRS = ("artifacts", "collections", "wheels")
KINDS = ("driver", "toolkit", "image", "model", "collection", "wheel", "file")
_SHA = re.compile(r"^[0-9a-f]{64}$")


class BundleError(Exception):
    """Bad manifest or bad arguments."""


class StageError(Exception):
    """Staging could not complete; `results` holds the per-file outcome so far."""

    def __init__(self, msg, results=None):
        super(StageError, self).__init__(msg)
        self.results = results or []


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
        raise BundleError("artifact %s: its parts add up to %d bytes, the file is %d" % (
            path, sum(p["size"] for p in out), size))
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
            self.files.append((os.path.join(root, f["path"]), f["path"], off, f["size"],
                               f["sha256"] if f is not entry else None))
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
                raise PartError("%s: sha256 %s, manifest says %s (a damaged or misnamed part: copy it again "
                                "from the build machine)" % (rel, got, sha), rel, start)
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
            raise BundleError("%s: PyYAML is not installed here and the manifest is not JSON; "
                              "pass the artifacts list instead" % path)
    except Exception as e:
        raise BundleError("%s: not valid YAML: %s" % (path, e))
    if not isinstance(data, dict) or "artifacts" not in data:
        raise BundleError("%s: no 'artifacts' list" % path)
    return validate_entries(data["artifacts"])


def sha256sums_text(entries):
    """The SHA256SUMS body `sha256sum -c` accepts (two spaces: text mode marker is fine for binary)."""
    return "".join("%s  %s\n" % (e["sha256"], e["path"]) for e in sorted(entries, key=lambda x: x["path"]))


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


def file_key(path, st=None):
    """What identifies one version of a file's bytes. ctime_ns cannot be set back from user space."""
    st = st or os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino, "dev": st.st_dev}


class StampCache(object):
    """sha256 of files remembered by (realpath, size, mtime_ns, ctime_ns, inode, device); JSON on disk.

    The collection's one hash cache: verification and staging (here) and the bundle build (`_bundle_pack`,
    which also records how a source was split: `put(..., split_size=..., parts=[...])`, read back with
    `record(..., split_size=...)`). save() writes the file atomically and durably (`_files.write_atomic`).
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
            raise BundleError("stamp file %s cannot be written (%s): make its directory writable, or set "
                              "stamp_file to another path (or \"\" to disable the cache); nothing was "
                              "renamed into place" % (self.path, e.strerror or e))

    def save(self):
        if not self.path or not self.dirty:
            return False
        try:
            write_atomic(self.path, json.dumps({"format": 1, "files": self.entries}, sort_keys=True),
                         mode=0o644, makedirs=0o755)
        except (IOError, OSError) as e:
            raise BundleError("stamp file %s cannot be written (%s): make its directory writable, or set "
                              "stamp_file to another path (or \"\" to disable the cache)"
                              % (self.path, e.strerror or e))
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
    res = {"path": entry["path"], "kind": entry.get("kind"), "expected_size": entry["size"],
           "expected_sha256": entry["sha256"], "size": None, "sha256": None, "hashed": False}
    if not entry.get("parts") or os.path.lexists(path):
        res["state"], res["size"], res["sha256"], res["hashed"] = _check_file(
            path, entry["size"], entry["sha256"], stamps, bufsize)
        return res
    res["parts"] = []
    res["state"] = "ok"
    res["size"] = 0
    res["hashed_bytes"] = 0
    for p in entry["parts"]:
        state, size, sha, hashed = _check_file(os.path.join(root, p["path"]), p["size"], p["sha256"], stamps,
                                               bufsize)
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
        results.append({"path": rel, "state": "unlisted", "kind": None, "expected_size": None,
                        "expected_sha256": None, "size": size,
                        "sha256": None, "hashed": False})
    summary = dict((s, 0) for s in STATES)
    for r in results:
        summary[r["state"]] += 1
    summary["hashed_bytes"] = sum(r.get("hashed_bytes", r["size"] or 0) for r in results if r["hashed"])
    summary["hashed_files"] = sum(1 for r in results if r["hashed"])
    return results, summary


def verify_failures(results, allow_unlisted=False):
    bad = [r for r in results if r["state"] != "ok" and not (allow_unlisted and r["state"] == "unlisted")]
    hints = {"missing": " (absent or a dangling symlink: copy the file into the bundle again)",
             "not_a_file": " (the manifest lists a file; replace this directory/special file with it)"}
    out = []
    for r in bad:
        parts = [p for p in r.get("parts") or () if p["state"] != "ok"]
        if parts:
            out.extend("%s: %s%s (part of %s)" % (p["path"], p["state"].replace("_", " "), hints.get(p["state"], ""),
                                                  r["path"]) for p in parts)
        else:
            out.append("%s: %s%s" % (r["path"], r["state"].replace("_", " "), hints.get(r["state"], "")))
    return out


# ---------------------------------------------------------------- progress

def human_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def format_eta(seconds):
    if seconds is None:
        return "--:--:--"
    seconds = int(seconds)
    return "%d:%02d:%02d" % (seconds // 3600, (seconds // 60) % 60, seconds % 60)


class Progress(object):
    """Writes `percent rate ETA` lines for one file to a log (tail -f), at most every `interval` s."""

    def __init__(self, log_path, name, total, start_at=0, interval=1.0, clock=time.monotonic):
        self.log_path = log_path
        self.name = name
        self.total = total
        self.done = start_at
        self.start_at = start_at
        self.clock = clock
        self.t0 = clock()
        self.last = None
        self.interval = interval

    def line(self, now=None, final=False):
        now = self.clock() if now is None else now
        elapsed = max(now - self.t0, 1e-6)
        moved = self.done - self.start_at
        rate = moved / elapsed
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = (self.total - self.done) / rate if rate > 0 else None
        return "%s %s %5.1f%% %s/%s %s/s ETA %s%s" % (
            time.strftime("%Y-%m-%dT%H:%M:%S"), self.name, pct, human_bytes(self.done), human_bytes(self.total),
            human_bytes(rate), format_eta(0 if final else eta), " done" if final else "")

    def _write(self, text):
        if not self.log_path:
            return
        with open(self.log_path, "a") as f:
            f.write(text + "\n")

    def update(self, n):
        self.done += n
        now = self.clock()
        if self.last is None or now - self.last >= self.interval:
            self.last = now
            self._write(self.line(now))

    def message(self, text):
        self._write("%s %s %s" % (time.strftime("%Y-%m-%dT%H:%M:%S"), self.name, text))

    def finish(self):
        self._write(self.line(final=True))


# ---------------------------------------------------------------- staging

def check_space(dest_root, needed, keep_free=0):
    """Fail before writing when the staging filesystem cannot take `needed` more bytes."""
    probe = dest_root
    while not os.path.isdir(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.statvfs(probe)
    free = st.f_bavail * st.f_frsize
    if needed + keep_free > free:
        raise BundleError("%s has %s free; staging needs %s more (+%s kept free); nothing was copied" % (
            probe, human_bytes(free), human_bytes(needed), human_bytes(keep_free)))
    return free


def part_path(dest):
    return dest + ".part"


def part_meta_path(dest):
    return dest + ".part.json"


def parse_mode(value):
    """A file mode the way ansible.builtin.file takes it (type raw).

    An int is the mode itself (YAML `mode: 0644` unquoted is the int 420 == 0o644); a string is octal
    (`"0644"`, `"644"`). Anything else raises BundleError saying how to write it.
    """
    if isinstance(value, bool):
        value = None
    if isinstance(value, int):
        mode = value
    elif isinstance(value, str) and re.match(r"^0?o?[0-7]{1,4}$", value.strip()):
        mode = int(value.strip().replace("o", ""), 8)
    else:
        raise BundleError("mode %r is not an octal file mode: write it as a quoted octal string, e.g. "
                          "mode: \"0644\"" % (value,))
    if not 0 <= mode <= 0o7777:
        raise BundleError("mode %r is out of range (0 to 07777): write it as a quoted octal string, e.g. "
                          "mode: \"0644\"" % (value,))
    return mode


def _part_meta(entry):
    return {"sha256": entry["sha256"], "size": entry["size"]}


def write_part_meta(dest, entry):
    """Record which manifest entry the .part belongs to (written when the part is started)."""
    with open(part_meta_path(dest), "w") as f:
        json.dump(_part_meta(entry), f, sort_keys=True)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def discard_part(dest):
    _remove(part_path(dest))
    _remove(part_meta_path(dest))


def stale_part(dest, entry):
    """True when dest.part exists but was started for another version of the file (or is unknown).

    Such a part is left over from an older bundle: appending the new file to it could only produce a
    checksum mismatch that wrongly blames the medium.
    """
    if not os.path.lexists(part_path(dest)):
        return False
    try:
        with open(part_meta_path(dest), "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (IOError, OSError, ValueError):
        return True
    return not isinstance(meta, dict) or meta != _part_meta(entry)


def _part_size(dest):
    try:
        return os.path.getsize(part_path(dest))
    except OSError:
        return 0


def probe_part(dest, size, bufsize=BUF_SIZE, entry=None):
    """Resume point of dest.part: (offset, hasher over the prefix). A too-long or stale part restarts from 0."""
    part = part_path(dest)
    if entry is not None and stale_part(dest, entry):
        discard_part(dest)
    try:
        have = os.path.getsize(part)
    except OSError:
        return 0, hashlib.sha256()
    if have > size:
        os.unlink(part)
        return 0, hashlib.sha256()
    h, n = hash_file(part, length=have, bufsize=bufsize)
    return n, h


def dest_is_current(dest, entry, stamps):
    """True when dest already holds the artifact (stamp hit, or hash it once from local disk)."""
    try:
        st = os.stat(dest)
    except OSError:
        return False, False
    if not stat.S_ISREG(st.st_mode):
        raise BundleError("%s is not a regular file (a directory or special file sits where %s must be "
                          "staged): remove it and run again" % (dest, entry["path"]))
    if st.st_size != entry["size"]:
        return False, False
    cached = stamps.get(dest, st) if stamps is not None else None
    if cached is not None:
        return cached == entry["sha256"], False
    h = hash_file(dest)[0]
    digest = h.hexdigest()
    if stamps is not None:
        stamps.put(dest, digest, st)
    return digest == entry["sha256"], True


def copy_resumable(src, dest, entry, progress=None, bufsize=BUF_SIZE, reader=None, buf=None, fsync=True):
    """Copy src -> dest.part from where a previous copy stopped, hashing as it goes.

    `reader` (a SourceReader for a split file) replaces opening `src`; `buf` is a reusable bytearray
    (one per run, not one per file); fsync=False leaves the flush to the commit, which flushes every part
    at once. A file that fits in one buffer gets no resume record: restarting it costs one read.
    A wrong part (PartError) cuts the .part back to where that part starts and is raised again.
    Returns {'bytes_copied', 'resumed_from', 'sha256'}; does not rename (the caller commits).
    """
    size = entry["size"]
    stale = stale_part(dest, entry)
    offset, h = probe_part(dest, size, bufsize, entry=entry)
    part = part_path(dest)
    if not os.path.exists(part) and size > bufsize:
        write_part_meta(dest, entry)
    if progress:
        progress.done = progress.start_at = offset
        if stale:
            progress.message("discarded a .part left from another version of this file; restarting")
        if offset:
            progress.message("resuming at %s" % human_bytes(offset))
    copied = 0
    if buf is None or len(buf) < min(bufsize, max(size, 1)):
        buf = bytearray(min(bufsize, max(size, 1)))
    view = memoryview(buf)
    bufsize = len(buf)
    src_f = reader if reader is not None else open(src, "rb", buffering=0)
    try:
        src_f.seek(offset)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while offset + copied < size:
                try:
                    n = src_f.readinto(view[:min(bufsize, size - offset - copied)])
                except PartError as e:
                    os.ftruncate(fd, min(e.offset, offset + copied))
                    raise
                if not n:
                    break
                chunk = view[:n]
                h.update(chunk)
                written = 0
                while written < n:
                    written += os.write(fd, chunk[written:])
                copied += n
                if progress:
                    progress.update(n)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        src_f.close()
    if progress:
        progress.finish()
    return {"bytes_copied": copied, "resumed_from": offset, "sha256": h.hexdigest(),
            "size": offset + copied, "restarted_stale_part": stale}


def _make_parent(dest, dir_mode, made):
    """Create dest's directory (once a call: `made` holds the directories already there)."""
    parent = os.path.dirname(dest)
    if parent not in made:
        if not os.path.isdir(parent):
            os.makedirs(parent, dir_mode)
        made.add(parent)


def stage_files(src_root, dest_root, entries, stamps=None, log_path=None, bufsize=BUF_SIZE,
                check_mode=False, mode=0o644, dir_mode=0o755, keep_free=0):
    """Stage manifest entries from src_root to dest_root; all-or-nothing commit.

    Every file is copied to `.part` and checked against the manifest first; only when all match are
    the parts renamed into place. A split file is read from its parts in order, in the same pass.
    Raises StageError naming the bad files (their parts removed; a bad part of a split file keeps the
    good parts before it).
    """
    entries = validate_entries(entries)
    results = []
    pending = []
    todo = []
    for entry in entries:
        dest = os.path.join(dest_root, entry["path"])
        current, hashed = dest_is_current(dest, entry, stamps)
        if not current:
            todo.append(entry)
        results.append({"path": entry["path"], "size": entry["size"], "bytes_copied": 0, "resumed_from": 0,
                        "state": "current" if current else "copied", "hashed_dest": hashed})
    if check_mode or not todo:
        return results
    check_space(dest_root, sum(e["size"] - _part_size(os.path.join(dest_root, e["path"])) for e in todo), keep_free)
    by_path = dict((r["path"], r) for r in results)
    buf = bytearray(min(bufsize, max([e["size"] for e in todo] + [1])))
    made = set()
    for entry in todo:
        dest = os.path.join(dest_root, entry["path"])
        res = by_path[entry["path"]]
        problem = source_problem(src_root, entry)
        if problem:
            res["state"] = problem[0]
            if problem[1] != entry["path"]:
                res["part"] = problem[1]
            continue
        _make_parent(dest, dir_mode, made)
        progress = Progress(log_path, entry["path"], entry["size"])
        try:
            out = copy_resumable(None, dest, entry, progress=progress, bufsize=bufsize,
                                 reader=SourceReader(src_root, entry), buf=buf, fsync=False)
        except PartError as e:
            res["state"] = "checksum_mismatch" if "sha256" in str(e) else "size_mismatch"
            res["part"] = e.path
            progress.message("BAD PART: %s" % e)
            continue
        res["bytes_copied"] = out["bytes_copied"]
        res["resumed_from"] = out["resumed_from"]
        res["restarted_stale_part"] = out["restarted_stale_part"]
        if out["size"] != entry["size"] or out["sha256"] != entry["sha256"]:
            # The part is the medium's bytes: keeping it would only resume into the same mismatch.
            discard_part(dest)
            res["state"] = "checksum_mismatch"
            progress.message("CHECKSUM MISMATCH (got %s, manifest %s)" % (out["sha256"], entry["sha256"]))
        else:
            pending.append((dest, out["sha256"]))
    _commit(results, pending, stamps, mode)
    return results


def _fsync_all(paths, workers=16):
    """Flush every file to disk, several at once so the filesystem can commit them together."""
    def one(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    if not paths:
        return
    if len(paths) == 1:
        one(paths[0])
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(paths))) as pool:
        list(pool.map(one, paths))


def _describe_bad(r):
    what = r["state"].replace("_", " ")
    if r.get("part"):
        what += " in %s" % r["part"]
    return "%s (%s)" % (r["path"], what)


def _commit(results, pending, stamps, mode):
    """Rename every verified part into place, or none of them.

    The stamp file is checked writable first and every part is flushed to disk. Each existing
    destination is moved aside before its part is renamed in; if any step fails, every file already
    renamed goes back to being a `.part` (verified, so the next run only commits it) and the previous
    files are put back.
    """
    bad = [r for r in results if r["state"] not in ("current", "copied")]
    if bad:
        raise StageError("bundle files failed verification, nothing was put in place: %s" % ", ".join(
            _describe_bad(r) for r in bad), results)
    if not pending:
        return
    if stamps is not None:
        stamps.check_writable()
    _fsync_all([part_path(dest) for dest, _digest in pending])
    done = []  # (dest, backup or None)
    try:
        for dest, digest in pending:
            os.chmod(part_path(dest), mode)
            backup = None
            if os.path.lexists(dest):
                backup = dest + ".airgap-old"
                os.rename(dest, backup)
            try:
                os.rename(part_path(dest), dest)
            except Exception:
                if backup:
                    os.rename(backup, dest)
                raise
            done.append((dest, backup))
    except (IOError, OSError) as e:
        undone = []
        for dest, backup in reversed(done):
            try:
                os.rename(dest, part_path(dest))
                if backup:
                    os.rename(backup, dest)
                undone.append(dest)
            except OSError:
                pass
        for dest, digest in pending:
            # Verified parts: their record lets the next run commit them without reading the medium again.
            try:
                if os.path.exists(part_path(dest)) and not os.path.exists(part_meta_path(dest)):
                    write_part_meta(dest, {"sha256": digest, "size": os.path.getsize(part_path(dest))})
            except (IOError, OSError):
                pass
        raise StageError("renaming the verified files into place failed (%s); the %d already renamed were "
                         "put back, nothing changed: fix the destination and run again" % (e, len(undone)),
                         results)
    for dest, backup in done:
        if backup:
            _remove(backup)
        _remove(part_meta_path(dest))
    if stamps is not None:
        for dest, digest in pending:
            stamps.put(dest, digest)


# Controller-side staging (action plugin): how its uploads use an ssh connection.

_SSH_CONTROL = ("controlmaster", "controlpath", "controlpersist")
_SSH_FLAGS = re.compile(r"^-[46AaCfGgKkMNnqsTtVvXxYy]+$")  # ssh's options that take no argument


def _ssh_option(tokens, i):
    """(name lower-case, value lower-case, tokens used) of the `-o` option at tokens[i], else (None, None, 1)."""
    tok = tokens[i]
    if tok == "-o" and i + 1 < len(tokens):
        text, n = tokens[i + 1], 2
    elif tok.startswith("-o") and len(tok) > 2:
        text, n = tok[2:], 1
    else:
        return None, None, 1
    bits = re.split(r"\s*=\s*|\s+", text.strip(), maxsplit=1)
    return bits[0].lower(), (bits[1].strip().lower() if len(bits) > 1 else ""), n


def _compresses(tokens):
    """Whether ssh arguments turn compression on: -C (alone or among other flags) or -o Compression=yes."""
    for i, tok in enumerate(tokens):
        name, value, _n = _ssh_option(tokens, i)
        if name == "compression" and value == "yes":
            return True
        if _SSH_FLAGS.match(tok) and "C" in tok:
            return True
    return False


def bulk_ssh_args(ssh_args, other_args=()):
    """The ssh connection's `ssh_args` for uploading bundle chunks, or None to upload with them unchanged.

    ansible-core's default ssh_args are `-C -o ControlMaster=auto -o ControlPersist=60s`: zlib on every byte,
    CPU-bound at 20-30 MiB/s on 2 vCPUs, so a LAN upload ran at zlib's speed, not the link's. When compression comes only from
    ssh_args, the upload drops it, and also the connection sharing (the shared master is compressed):
    `-o ControlPath=none` first (ssh takes an option's first value), ControlMaster/ControlPersist removed, so
    each chunk opens its own connection. Compression asked for anywhere else (`other_args`: ssh_common_args,
    ssh_extra_args, sftp_extra_args, scp_extra_args) is the operator's choice: None, nothing changes.
    """
    try:
        tokens = shlex.split(ssh_args or "")
        if not _compresses(tokens) or any(_compresses(shlex.split(a or "")) for a in other_args):
            return None
    except ValueError:  # unbalanced quotes: leave them to the connection's own error
        return None
    out = ["-o", "ControlPath=none"]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        name, _value, n = _ssh_option(tokens, i)
        if name in _SSH_CONTROL or name == "compression":
            i += n
            continue
        if _SSH_FLAGS.match(tok) and "C" in tok:
            tok = tok.replace("C", "")
            if tok == "-":
                i += 1
                continue
        out.append(tok)
        i += 1
    return " ".join(shlex.quote(t) for t in out)


# Controller-side staging (action plugin) talks to the target through these three steps.

def _inside(root, rel):
    norm = posixpath.normpath(rel or "")
    if not rel or norm.startswith("/") or norm == ".." or norm.startswith("../"):
        raise BundleError("path %r must stay inside the staging directory" % rel)
    return os.path.join(root, norm)


def probe_dest(dest_root, entries, stamps, keep_free=0):
    """Per entry: current (nothing to do), or the offset its .part has reached; checks free space."""
    out = []
    for entry in validate_entries(entries):
        dest = _inside(dest_root, entry["path"])
        current, hashed = dest_is_current(dest, entry, stamps)
        offset = 0
        stale = False
        if not current:
            stale = stale_part(dest, entry)
            if stale:
                discard_part(dest)
            try:
                offset = os.path.getsize(part_path(dest))
            except OSError:
                offset = 0
            if offset > entry["size"]:
                discard_part(dest)
                offset = 0
        out.append({"path": entry["path"], "size": entry["size"], "state": "current" if current else "partial",
                    "offset": offset, "hashed_dest": hashed, "restarted_stale_part": stale})
    needed = sum(o["size"] - o["offset"] for o in out if o["state"] != "current")
    if needed:
        check_space(dest_root, needed, keep_free)
    return out


def append_chunk(dest_root, rel, chunk, offset, dir_mode=0o755, entry=None):
    """Append an uploaded chunk to <rel>.part, refusing if the part is not exactly at `offset`.

    `entry` (the manifest entry) is recorded next to a part that starts here, so a later run can
    tell a part of this file version from one left over by an older bundle.
    """
    dest = _inside(dest_root, rel)
    part = part_path(dest)
    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, dir_mode)
    have = os.path.getsize(part) if os.path.exists(part) else 0
    if have != offset:
        raise BundleError("%s: part is at %d bytes, chunk starts at %d; probe again" % (rel, have, offset))
    if have == 0 and entry is not None:
        write_part_meta(dest, entry)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with open(chunk, "rb", buffering=0) as f:
            buf = bytearray(BUF_SIZE)
            view = memoryview(buf)
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                written = 0
                while written < n:
                    written += os.write(fd, view[written:n])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.unlink(chunk)
    return os.path.getsize(part)


def append_segments(dest_root, chunk, segments, entries=None, dir_mode=0o755):
    """Append an uploaded chunk that holds several files' next bytes to their `.part` files.

    segments: [{path, offset, length}] in the chunk's order; each `.part` must be exactly at `offset`
    (else BundleError: probe again). A segment of length 0 creates an empty `.part` (a 0-byte file, or
    one that needs no more bytes). A segment with `cut: true` cuts a `.part` longer than `offset` back
    to it (a bad part of a split file was sent). One upload and one module run carry many small files.
    Returns {path: size of its .part}.
    """
    by_path = dict((e["path"], e) for e in entries or ())
    sizes = {}
    buf = bytearray(min(BUF_SIZE, max([int(s_.get("length") or 0) for s_ in segments] + [1])))
    view = memoryview(buf)
    made = set()
    with open(chunk, "rb", buffering=0) as f:
        for seg in segments:
            rel = seg.get("path")
            dest = _inside(dest_root, rel)
            part = part_path(dest)
            offset = int(seg.get("offset") or 0)
            length = int(seg.get("length") or 0)
            have = os.path.getsize(part) if os.path.exists(part) else 0
            if seg.get("cut"):
                if have > offset:
                    with open(part, "r+b") as p_:
                        p_.truncate(offset)
                sizes[rel] = min(have, offset)
                continue
            _make_parent(dest, dir_mode, made)
            if have != offset:
                raise BundleError("%s: part is at %d bytes, chunk starts at %d; probe again" % (rel, have, offset))
            entry = by_path.get(posixpath.normpath(rel))
            if have == 0 and entry is not None and length < entry["size"]:
                # The file spans more chunks: record what the part is for, so an interruption resumes it.
                write_part_meta(dest, entry)
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                left = length
                while left:
                    n = f.readinto(view[:min(len(buf), left)])
                    if not n:
                        raise BundleError("%s: the uploaded chunk ended %d bytes early" % (rel, left))
                    written = 0
                    while written < n:
                        written += os.write(fd, view[written:n])
                    left -= n
            finally:
                os.close(fd)
            sizes[rel] = have + length
    os.unlink(chunk)
    return sizes


def commit_parts(dest_root, entries, stamps, mode=0o644, check_mode=False):
    """Verify every complete .part at the destination, then rename all of them, or fail naming the bad ones."""
    results = []
    pending = []
    for entry in validate_entries(entries):
        dest = _inside(dest_root, entry["path"])
        part = part_path(dest)
        if not os.path.exists(part):
            current = dest_is_current(dest, entry, stamps)[0]
            if current or entry["size"] or check_mode:
                results.append({"path": entry["path"], "state": "current" if current else "missing"})
                continue
            # A 0-byte file has no bytes to upload, so no chunk created its part: create it here.
            parent = os.path.dirname(dest)
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
            os.close(os.open(part, os.O_WRONLY | os.O_CREAT, 0o600))
        res = {"path": entry["path"], "state": "copied"}
        if os.path.getsize(part) != entry["size"]:
            res["state"] = "size_mismatch"
        else:
            digest = hash_file(part)[0].hexdigest()
            if digest != entry["sha256"]:
                res["state"] = "checksum_mismatch"
                discard_part(dest)
            else:
                pending.append((dest, digest))
        results.append(res)
    if check_mode:
        return [r for r in results if r["state"] != "current"]
    _commit(results, pending, stamps, mode)
    return [r for r in results if r["state"] == "copied"]
