#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_stage
short_description: Stage bundle artifacts to a host - resumable, hashed while copying, all-or-nothing
version_added: 0.1.0
description:
  - Copies the artifacts listed in the bundle manifest from O(src) to O(dest) in large chunks,
    hashing each byte as it is read, so the bundle medium (a slow USB disk) is read once.
  - A copy goes to C(<file>.part); after an interruption it resumes from there (the part's prefix is
    re-hashed from the destination disk, not from the medium).
  - Nothing is renamed into place until every file of the run matches the manifest's size and sha256.
    A corrupt artifact fails the task, naming the file, with the destination unchanged.
  - A converged re-run moves 0 bytes and, thanks to a stamp cache (path, size, mtime, ctime, inode, device),
    hashes nothing. A file edited in place with its mtime set back has a new ctime and is hashed again.
  - All or nothing - if renaming one verified file into place fails, the ones already renamed are put
    back; an unwritable O(stamp_file) fails before anything is renamed.
  - A C(.part) left over from an older bundle (its C(.part.json) names another sha256) is discarded and
    copied again, not reported as a checksum mismatch.
  - Progress lines (percent, rate, ETA) go to O(log_path); C(tail -f) it while a run is going.
  - With O(remote_src=false) (the default) the bundle is on the controller; the action plugin streams
    it in O(chunk_size) pieces, each appended on the target to the C(.part) files, then verified on the
    target. Small files share a piece, so many small files cost few round trips.
  - A file the bundle build split into parts (C(<name>.part000), ... for FAT32's 4 GiB limit; the
    manifest entry lists them under C(parts)) is read from its parts in order, in the same single pass,
    each part checked against its own sha256 as it ends, and staged as the whole file. With
    O(remote_src=true) the bundle is mounted on the target (USB or NFS) and the module copies locally.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  src:
    description: Bundle root (on the controller, or on the target with O(remote_src=true)).
    type: path
    required: true
  dest:
    description: Staging directory on the target; artifacts keep their bundle-relative paths below it.
    type: path
    required: true
  remote_src:
    description: Whether O(src) is a path on the target.
    type: bool
    default: false
  manifest:
    description: Manifest file relative to O(src) (read where O(src) is), unless O(artifacts) is given.
    type: path
    default: manifest.yml
  artifacts:
    description: The manifest's C(artifacts) list, already parsed; entries need C(path), C(size), C(sha256).
    type: list
    elements: dict
  stamp_file:
    description: Stamp cache for the staged files (on the target). Empty string disables it.
    type: path
    default: /var/cache/airgap-vllm/stage-stamps.json
  log_path:
    description:
      - Progress log (on the target with O(remote_src=true), on the controller otherwise).
        Empty string disables it.
    type: path
    default: /var/log/airgap-vllm-stage.log
  chunk_size:
    description:
      - Bytes per transfer from the controller (O(remote_src=false)); a resume restarts at most one chunk.
    type: int
    default: 268435456
  min_free_bytes:
    description: Free space to leave on the staging filesystem; checked before anything is copied.
    type: int
    default: 0
  mode:
    description:
      - "Mode of staged files, taken as M(ansible.builtin.file) takes it - a quoted octal string
        (V(0644)) or an integer (YAML C(mode: 0644) unquoted is the integer 420, that is 0644)."
    type: raw
    default: "0644"
  _op:
    description: Internal step of the action plugin's protocol; do not set.
    type: str
    choices: [stage, probe, append, commit]
    default: stage
  _chunk:
    description: Internal (V(append)) - uploaded chunk on the target.
    type: path
  _segments:
    description:
      - Internal (V(append)) - the files whose next bytes the chunk holds, in order, each C(path),
        C(offset) and C(length).
    type: list
    elements: dict
attributes:
  check_mode:
    support: full
    description: Reports which files would be copied; copies nothing.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Files already staged (matching the manifest) are not copied or re-hashed.
notes:
  - The action plugin of the same name does the controller side; it is ansible-core machinery
    (put_file of each chunk), so no rsync, ssh-only transport or extra collection is needed.
  - Over the C(ssh) connection the chunks go without the compression ansible-core's default C(ssh_args)
    turn on (C(-C)), each on a connection of its own (the shared master is compressed); module runs keep
    it. ssh's zlib is CPU-bound at a few tens of MiB/s, far below a LAN's speed. Compression
    asked for in C(ansible_ssh_common_args), C(ansible_ssh_extra_args), C(ansible_sftp_extra_args) or
    C(ansible_scp_extra_args) (a slow link) is kept.
seealso:
  - module: airgap.vllm.bundle_verify
"""

EXAMPLES = r"""
- name: Stage the bundle from the controller's USB disk
  airgap.vllm.bundle_stage:
    src: /mnt/usb/airgap-vllm-bundle
    dest: /var/lib/airgap-vllm/bundle

- name: Stage from a USB disk mounted on the target itself
  airgap.vllm.bundle_stage:
    src: /media/usb/airgap-vllm-bundle
    dest: /var/lib/airgap-vllm/bundle
    remote_src: true
"""

RETURN = r"""
files:
  description: Per-file outcome.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Bundle-relative path.
      type: str
    state:
      description: V(current) (already staged), V(copied), or on failure V(missing), V(size_mismatch), V(checksum_mismatch).
      type: str
    part:
      description: On failure of a split file, the part on the medium that is missing or wrong.
      type: str
    bytes_copied:
      description: Bytes moved this run.
      type: int
    resumed_from:
      description: Offset a previous interrupted copy had reached.
      type: int
    restarted_stale_part:
      description: A C(.part) from another version of the file was found and copied again from the start.
      type: bool
bytes_copied:
  description: Total bytes moved this run (0 on a converged re-run).
  returned: always
  type: int
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import StampCache
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    BundleError,
    load_manifest,
    validate_entries,
)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_push import (
    append_segments,
    commit_parts,
    probe_dest,
)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_stage import (
    StageError,
    files_result,
    keep_stamps,
    parse_mode,
    stage_files,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        src=dict(type="path", required=True),
        dest=dict(type="path", required=True),
        remote_src=dict(type="bool", default=False),
        manifest=dict(type="path", default="manifest.yml"),
        artifacts=dict(type="list", elements="dict"),
        stamp_file=dict(type="path", default="/var/cache/airgap-vllm/stage-stamps.json"),
        log_path=dict(type="path", default="/var/log/airgap-vllm-stage.log"),
        chunk_size=dict(type="int", default=268435456),
        mode=dict(type="raw", default="0644"),
        min_free_bytes=dict(type="int", default=0),
        # Internal protocol of the action plugin (remote_src=false): probe, append, commit.
        _op=dict(type="str", choices=["stage", "probe", "append", "commit"], default="stage"),
        _chunk=dict(type="path"),
        _segments=dict(type="list", elements="dict"),
    ),
    errors=(StageError, BundleError),
    wording="staging failed: {0}",
)
def main(module):
    p = module.params
    stamps = StampCache(None)
    try:
        mode = parse_mode(p["mode"])
        entries = validate_entries(p["artifacts"]) if p["artifacts"] else None
        stamps = StampCache(p["stamp_file"] or None)
        if p["_op"] == "probe":
            files = probe_dest(p["dest"], entries, stamps, keep_free=p["min_free_bytes"])
            if not module.check_mode:
                stamps.save()
            module.exit_json(changed=False, files=files)
        if p["_op"] == "append":
            if module.check_mode:
                module.fail_json(msg="append is never called in check mode")
            sizes = append_segments(p["dest"], p["_chunk"], p["_segments"] or [], entries)
            module.exit_json(changed=True, part_sizes=sizes)
        if p["_op"] == "commit":
            files = commit_parts(p["dest"], entries, stamps, mode=mode, check_mode=module.check_mode)
            if not module.check_mode:
                stamps.save()
            module.exit_json(changed=bool(files), files=files)
        if not p["remote_src"]:
            module.fail_json(msg="remote_src=false needs the airgap.vllm.bundle_stage action plugin")
        if entries is None:
            entries = load_manifest(os.path.join(p["src"], p["manifest"]))
        results = stage_files(
            p["src"],
            p["dest"],
            entries,
            stamps=stamps,
            log_path=p["log_path"] or None,
            check_mode=module.check_mode,
            mode=mode,
            keep_free=p["min_free_bytes"],
        )
    except StageError as e:
        keep_stamps(stamps, e)
        raise
    if not module.check_mode:
        stamps.save()
    return files_result(results)


if __name__ == "__main__":
    main()
