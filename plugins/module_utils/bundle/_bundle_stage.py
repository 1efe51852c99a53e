# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline bundle: resumable, all-or-nothing staging onto the host.

Design (why):
- Staging hashes while copying (each byte read from the medium once), into `<dest>.part`;
  an interrupted copy resumes from the `.part` (its prefix is re-hashed from the local
  destination disk, not the medium). Nothing is renamed into place until every file of the call
  has matched the manifest, so a corrupt artifact leaves only `.part` files behind. If a rename fails
  part-way, the ones already done are undone; the stamp file must be writable before anything moves.
- Each `.part` has a `.part.json` sidecar naming the manifest entry (sha256, size) it was started for:
  a part left over from an older bundle is discarded and restarted, not reported as a checksum mismatch.
- Progress (percent, rate, ETA) is written to a log file that an operator can `tail -f`.
- A file split into parts on the medium (FAT32) is read through `_bundle_manifest.SourceReader`, so the
  resume point is still the destination's `.part`; a bad part cuts the `.part` back to where that part starts.
- Controller-side staging (the action plugin) drives the same `.part` files and commit in three steps:
  _bundle_push.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import stat
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import BUF_SIZE, hash_file
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    BundleError,
    PartError,
    SourceReader,
    source_problem,
    validate_entries,
)


class StageError(Exception):
    """Staging could not complete; `results` holds the per-file outcome so far."""

    def __init__(self, msg, results=None):
        super(StageError, self).__init__(msg)
        self.results = results or []

    @property
    def details(self):
        """The per-file outcome so far and the bytes copied: the result keys a module fails with (_module.py)."""
        return dict(files=self.results, bytes_copied=sum(r.get("bytes_copied", 0) for r in self.results))


def keep_stamps(stamps, error):
    """An interrupted stage or fetch keeps the hashes it made, so the next run resumes from them; a save that fails
    too is added to `error`'s message. Call it in the StageError handler, then re-raise."""
    try:
        stamps.save()
    except BundleError as save_error:
        raise StageError("%s; %s" % (error, save_error), error.results)


def files_result(results):
    """A stage's or fetch's module result: changed when a file was copied, the per-file outcome, the bytes moved."""
    return dict(
        changed=any(r["state"] == "copied" for r in results),
        files=results,
        bytes_copied=sum(r["bytes_copied"] for r in results),
    )


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
            time.strftime("%Y-%m-%dT%H:%M:%S"),
            self.name,
            pct,
            human_bytes(self.done),
            human_bytes(self.total),
            human_bytes(rate),
            format_eta(0 if final else eta),
            " done" if final else "",
        )

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
        raise BundleError(
            "%s has %s free; staging needs %s more (+%s kept free); nothing was copied"
            % (probe, human_bytes(free), human_bytes(needed), human_bytes(keep_free))
        )
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
        raise BundleError(
            "mode %r is not an octal file mode: write it as a quoted octal string, e.g. mode: \"0644\"" % (value,)
        )
    if not 0 <= mode <= 0o7777:
        raise BundleError(
            "mode %r is out of range (0 to 07777): write it as a quoted octal string, e.g. mode: \"0644\"" % (value,)
        )
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
        raise BundleError(
            "%s is not a regular file (a directory or special file sits where %s must be "
            "staged): remove it and run again" % (dest, entry["path"])
        )
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
                    n = src_f.readinto(view[: min(bufsize, size - offset - copied)])
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
    return {
        "bytes_copied": copied,
        "resumed_from": offset,
        "sha256": h.hexdigest(),
        "size": offset + copied,
        "restarted_stale_part": stale,
    }


def make_parent(dest, dir_mode, made):
    """Create dest's directory (once a call: `made` holds the directories already there)."""
    parent = os.path.dirname(dest)
    if parent not in made:
        if not os.path.isdir(parent):
            os.makedirs(parent, dir_mode)
        made.add(parent)


def stage_files(
    src_root,
    dest_root,
    entries,
    stamps=None,
    log_path=None,
    bufsize=BUF_SIZE,
    check_mode=False,
    mode=0o644,
    dir_mode=0o755,
    keep_free=0,
):
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
        results.append(
            {
                "path": entry["path"],
                "size": entry["size"],
                "bytes_copied": 0,
                "resumed_from": 0,
                "state": "current" if current else "copied",
                "hashed_dest": hashed,
            }
        )
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
        make_parent(dest, dir_mode, made)
        progress = Progress(log_path, entry["path"], entry["size"])
        try:
            out = copy_resumable(
                None,
                dest,
                entry,
                progress=progress,
                bufsize=bufsize,
                reader=SourceReader(src_root, entry),
                buf=buf,
                fsync=False,
            )
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
    commit_verified(results, pending, stamps, mode)
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


def commit_verified(results, pending, stamps, mode):
    """Rename every verified part into place, or none of them.

    The stamp file is checked writable first and every part is flushed to disk. Each existing
    destination is moved aside before its part is renamed in; if any step fails, every file already
    renamed goes back to being a `.part` (verified, so the next run only commits it) and the previous
    files are put back.
    """
    bad = [r for r in results if r["state"] not in ("current", "copied")]
    if bad:
        raise StageError(
            "bundle files failed verification, nothing was put in place: %s" % ", ".join(_describe_bad(r) for r in bad),
            results,
        )
    if not pending:
        return
    if stamps is not None:
        stamps.check_writable()
    _fsync_all([part_path(dest) for dest, _digest in pending])
    done = []  # (dest, backup or None)
    try:
        for dest, _digest in pending:
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
        raise StageError(
            "renaming the verified files into place failed (%s); the %d already renamed were "
            "put back, nothing changed: fix the destination and run again" % (e, len(undone)),
            results,
        )
    for dest, backup in done:
        if backup:
            _remove(backup)
        _remove(part_meta_path(dest))
    if stamps is not None:
        for dest, digest in pending:
            stamps.put(dest, digest)
