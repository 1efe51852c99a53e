# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline bundle, staged from the controller (remote_src=false): the action plugin streams chunks over its
connection (`bulk_ssh_args`: how those uploads use ssh) and drives the target through three steps - probe
(`probe_dest`), append (`append_segments`), commit (`commit_parts`) - on _bundle_stage.py's
`.part` files and all-or-nothing commit."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import posixpath
import re
import shlex

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import BUF_SIZE, hash_file, read_exactly
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    BundleError,
    validate_entries,
)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_stage import (
    make_parent,
    check_space,
    commit_verified,
    dest_is_current,
    discard_part,
    part_path,
    stale_part,
    write_part_meta,
)


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
        out.append(
            {
                "path": entry["path"],
                "size": entry["size"],
                "state": "current" if current else "partial",
                "offset": offset,
                "hashed_dest": hashed,
                "restarted_stale_part": stale,
            }
        )
    needed = sum(o["size"] - o["offset"] for o in out if o["state"] != "current")
    if needed:
        check_space(dest_root, needed, keep_free)
    return out


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
            make_parent(dest, dir_mode, made)
            if have != offset:
                raise BundleError("%s: part is at %d bytes, chunk starts at %d; probe again" % (rel, have, offset))
            entry = by_path.get(posixpath.normpath(rel))
            if have == 0 and entry is not None and length < entry["size"]:
                # The file spans more chunks: record what the part is for, so an interruption resumes it.
                write_part_meta(dest, entry)
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                for data in read_exactly(f, view, length, "%s: the uploaded chunk ended %d bytes early", rel):
                    written = 0
                    while written < len(data):
                        written += os.write(fd, data[written:])
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
    commit_verified(results, pending, stamps, mode)
    return [r for r in results if r["state"] == "copied"]
