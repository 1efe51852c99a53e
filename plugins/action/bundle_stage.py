# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of airgap.vllm.bundle_stage.

Why an action plugin: ansible.builtin.copy re-reads the whole source on every run and cannot
resume, and synchronize needs rsync over ssh plus a community collection. Here the controller
asks the target how far each file's `.part` got (probe), reads the bundle medium once from that
offset, uploads it in `chunk_size` pieces with the connection's own put_file, the target appends
each piece (append), and finally the target hashes the parts on its local disk and renames them
all into place only if every one matches the manifest (commit). An interrupted run loses at most
one chunk. Progress (percent, rate, ETA) is shown and appended to `log_path` on the controller.
Over ssh the chunks are uploaded without the `-C` of ansible-core's default ssh_args, each on a connection
of its own (_put_chunk): ssh's zlib, CPU-bound at 20-30 MiB/s, capped staging far below a LAN that scp
fills at 60-100 MiB/s (and more on real hardware).

The files to send are one stream cut into chunks: a chunk may hold the tail of one file and the
heads of the next ones (segments), so a directory of small files (RPMs, tokenizer files) costs one
upload and one module run per chunk, not per file, and a 0-byte file is a segment of length 0. A file
split into parts on the medium (FAT32) is read through SourceReader: parts in order, each checked as
it ends; a bad part fails the run naming it, and the target's `.part` is cut back to where it starts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import BUF_SIZE
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    BundleError,
    PartError,
    SourceReader,
    load_manifest,
    source_files,
    validate_entries,
)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_push import bulk_ssh_args
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_stage import Progress, parse_mode

display = Display()

MODULE = "airgap.vllm.bundle_stage"
# The ssh connection's options whose compression flags are the operator's own choice (see _put_chunk).
SSH_OTHER_ARGS = ("ssh_common_args", "ssh_extra_args", "sftp_extra_args", "scp_extra_args")


class ActionModule(ActionBase):
    # The upload directory is made only when there is something to send (a converged target costs one
    # module run, no mkdir and rm round trips); ActionBase would make it before every run otherwise.
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        (
            "src",
            "dest",
            "remote_src",
            "manifest",
            "artifacts",
            "stamp_file",
            "log_path",
            "chunk_size",
            "mode",
            "min_free_bytes",
        )
    )

    def _module(self, args, task_vars):
        res = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
        if res.get("failed"):
            raise AnsibleActionFail(res.get("msg", "bundle_stage failed on the target"), result=res)
        return res

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        if args.get("remote_src"):
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            return result
        for key in ("src", "dest"):
            if not args.get(key):
                raise AnsibleActionFail("%s is required" % key)
        src = os.path.expanduser(args["src"])
        try:
            parse_mode(args.get("mode", "0644"))  # a bad mode fails now, not after the copy
            if args.get("artifacts"):
                entries = validate_entries(args["artifacts"])
            else:
                entries = load_manifest(os.path.join(src, args.get("manifest") or "manifest.yml"))
        except BundleError as e:
            raise AnsibleActionFail(to_text(e))
        chunk_size = int(args.get("chunk_size") or 268435456)
        log_path = args.get("log_path", "/var/log/airgap-vllm-stage.log")
        if log_path is None:
            log_path = "/var/log/airgap-vllm-stage.log"
        log_path = os.path.expanduser(log_path) if log_path else None
        if log_path and not os.access(os.path.dirname(log_path) or ".", os.W_OK):
            log_path = None
        common = dict(
            src=src,
            dest=args["dest"],
            stamp_file=args.get("stamp_file", "/var/cache/airgap-vllm/stage-stamps.json"),
            mode=args.get("mode", "0644"),
            min_free_bytes=int(args.get("min_free_bytes") or 0),
            artifacts=[dict(path=e["path"], size=e["size"], sha256=e["sha256"]) for e in entries],
        )
        if common["stamp_file"] is None:
            common["stamp_file"] = "/var/cache/airgap-vllm/stage-stamps.json"

        try:
            probe = self._module(dict(common, _op="probe"), task_vars)["files"]
            todo = [p for p in probe if p["state"] != "current"]
            files = dict(
                (
                    p["path"],
                    {
                        "path": p["path"],
                        "state": "current",
                        "bytes_copied": 0,
                        "resumed_from": 0,
                        "restarted_stale_part": bool(p.get("restarted_stale_part")),
                    },
                )
                for p in probe
            )
            # Nothing to send (every file current): no commit round trip.
            if self._play_context.check_mode or not todo:
                for p in todo:
                    files[p["path"]]["state"] = "copied"
                result.update(changed=bool(todo), files=[files[p["path"]] for p in probe], bytes_copied=0)
                return result
            # Missing or short source files (or parts of a split file) fail here, before anything moves.
            by_path = dict((e["path"], e) for e in entries)
            for p in todo:
                for f in source_files(src, by_path[p["path"]]):
                    self._check_source(src, f)
            if self._connection._shell.tmpdir is None:  # without pipelining the probe made one already
                self._make_tmp_path()
            for path, out in self._send_all(src, todo, by_path, chunk_size, log_path, common, task_vars).items():
                files[path].update(out)
            commit = self._execute_module(
                module_name=MODULE, module_args=dict(common, _op="commit"), task_vars=task_vars
            )
            if commit.get("failed"):
                for f in commit.get("files", []):
                    if f["path"] in files:
                        files[f["path"]]["state"] = f["state"]
                result.update(
                    failed=True,
                    msg=commit.get("msg"),
                    files=list(files.values()),
                    bytes_copied=sum(f["bytes_copied"] for f in files.values()),
                )
                return result
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        moved = sum(f["bytes_copied"] for f in files.values())
        result.update(changed=bool(todo), files=[files[p["path"]] for p in probe], bytes_copied=moved)
        return result

    def _put_chunk(self, local, remote):
        """Upload one chunk with the connection's put_file; over ssh, without the compression that only
        ansible-core's default ssh_args ask for (see _bundle_push.bulk_ssh_args: 3-4x faster on a LAN)."""
        conn = self._connection
        bulk = old = None
        if getattr(conn, "transport", None) == "ssh":
            try:
                old = conn.get_option("ssh_args")
                bulk = bulk_ssh_args(old, [conn.get_option(o) for o in SSH_OTHER_ARGS])
            except KeyError:  # an ssh plugin without these options: upload as it is configured
                bulk = None
        if bulk is None:
            return self._transfer_file(local, remote)
        conn.set_option("ssh_args", bulk)
        try:
            return self._transfer_file(local, remote)
        finally:
            conn.set_option("ssh_args", old)

    @staticmethod
    def _check_source(src, f):
        path = os.path.join(src, f["path"])
        if os.path.islink(path) and not os.path.exists(path):
            raise AnsibleActionFail(
                "bundle file %s is a dangling symlink (to %s): copy the real file "
                "into the bundle" % (path, os.readlink(path))
            )
        if not os.path.exists(path):
            raise AnsibleActionFail("bundle file %s is missing: copy it into the bundle again" % path)
        if not os.path.isfile(path):
            raise AnsibleActionFail(
                "bundle file %s is not a regular file (a directory?): the manifest "
                "lists a file there; rebuild the bundle" % path
            )
        if os.path.getsize(path) != f["size"]:
            raise AnsibleActionFail(
                "bundle file %s: size %d, manifest says %d" % (f["path"], os.path.getsize(path), f["size"])
            )

    def _send_all(self, src, todo, by_path, chunk_size, log_path, common, task_vars):
        """Stream every file from its probe offset as one sequence of chunks; each medium byte is read once."""
        remote_chunk = self._connection._shell.join_path(self._connection._shell.tmpdir, "chunk")
        fd, local_chunk = tempfile.mkstemp(prefix="airgap-vllm-chunk-")
        os.close(fd)
        state = {"segments": [], "filled": 0, "out": open(local_chunk, "wb")}
        progress = {}
        buf = bytearray(min(chunk_size, BUF_SIZE))  # read in pieces into one buffer, not a chunk-sized string
        view = memoryview(buf)

        def flush():
            state["out"].close()
            if state["segments"]:
                self._put_chunk(local_chunk, remote_chunk)
                self._fixup_perms2((self._connection._shell.tmpdir, remote_chunk))
                res = self._module(
                    dict(common, _op="append", _chunk=remote_chunk, _segments=state["segments"]), task_vars
                )
                for seg in state["segments"]:
                    want = seg["offset"] + seg["length"]
                    if not seg.get("cut") and res["part_sizes"].get(seg["path"]) != want:
                        raise AnsibleActionFail(
                            "%s: the target's part is at %s bytes, expected %d"
                            % (seg["path"], res["part_sizes"].get(seg["path"]), want)
                        )
                    prog = progress.get(seg["path"])
                    if prog is not None and seg["length"]:
                        prog.update(seg["length"])
                # One line per chunk (the file it ends in), not one per small file.
                prog = progress.get(state["segments"][-1]["path"])
                if prog is not None:
                    display.display("  %s" % prog.line(), log_only=False)
            state["segments"] = []
            state["filled"] = 0
            state["out"] = open(local_chunk, "wb")

        out = {}
        try:
            for p in todo:
                entry = by_path[p["path"]]
                size = entry["size"]
                offset = p["offset"]
                prog = progress[p["path"]] = Progress(log_path, p["path"], size, start_at=offset, interval=5.0)
                if offset:
                    prog.message("resuming at %d bytes" % offset)
                with SourceReader(src, entry) as reader:
                    reader.seek(offset)
                    while True:
                        want = min(chunk_size - state["filled"], size - offset, len(buf))
                        got = 0
                        try:
                            while got < want:
                                n = reader.readinto(view[got:want])
                                if not n:
                                    break
                                got += n
                        except PartError as e:
                            # Send what is buffered, then cut the target's .part back to where the bad part starts.
                            state["segments"].append({"path": p["path"], "offset": e.offset, "length": 0, "cut": True})
                            flush()
                            prog.message("BAD PART: %s" % e)
                            raise AnsibleActionFail(
                                "bundle file %s: %s; the parts before it stay staged" % (p["path"], e)
                            )
                        if got != want:
                            raise AnsibleActionFail(
                                "%s ended at %d bytes, manifest says %d" % (p["path"], offset + got, size)
                            )
                        state["out"].write(view[:got])
                        last = state["segments"][-1] if state["segments"] else None
                        if last and last["path"] == p["path"] and last["offset"] + last["length"] == offset:
                            last["length"] += got  # the next piece of the same file: one segment
                        else:
                            state["segments"].append({"path": p["path"], "offset": offset, "length": got})
                        state["filled"] += got
                        offset += got
                        if state["filled"] >= chunk_size:
                            flush()
                        if offset >= size:
                            break
                out[p["path"]] = {"state": "copied", "bytes_copied": size - p["offset"], "resumed_from": p["offset"]}
            flush()
            for prog in progress.values():
                prog.finish()
        finally:
            state["out"].close()
            os.unlink(local_chunk)
        return out
