#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_peer_fetch
short_description: Fetch the staged bundle from a peer (the site's seed) - resumable, verified, all-or-nothing
version_added: 0.2.0
description:
  - Fetches the manifest's artifacts that this host lacks from the seed host of its site, which serves its
    staged bundle with M(airgap.vllm.bundle_peer_serve), so the bundle crosses the controller's link once
    per site.
  - Each file goes to C(<file>.part) (with the same C(.part.json) record as M(airgap.vllm.bundle_stage));
    after an interruption the next run, or the next attempt of this one, resumes from the part's size with an
    HTTP Range request. Bytes are hashed while written; the part's prefix is re-hashed from local disk.
  - Nothing is renamed into place until every fetched file matches the manifest's size and sha256. A file
    that does not match is discarded and the task fails naming it, with the staged directory unchanged.
  - A converged host (every file current, known from the stamp cache) contacts nobody.
  - Reaches only O(url) - plain http to the seed's LAN address, no proxy from the environment, no redirect
    followed, only C(<url>/<token>/<manifest path>).
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  url:
    description: The seed's server, C(http://ADDRESS:PORT) (no path).
    type: str
    required: true
  token:
    description: The random path segment the seed serves the bundle under (not logged).
    type: str
    required: true
  dest:
    description: Staging directory on this host; artifacts keep their bundle-relative paths below it.
    type: path
    required: true
  artifacts:
    description: The manifest's C(artifacts) list; entries need C(path), C(size), C(sha256).
    type: list
    elements: dict
    required: true
  stamp_file:
    description: Stamp cache of the staged files (on this host). Empty string disables it.
    type: path
    default: /var/cache/airgap-vllm/stage-stamps.json
  log_path:
    description: Progress log on this host (percent, rate, ETA). Empty string disables it.
    type: path
    default: /var/log/airgap-vllm-peer-fetch.log
  mode:
    description: Mode of the fetched files, a quoted octal string (V(0644)) or an integer.
    type: raw
    default: "0644"
  min_free_bytes:
    description: Free space to leave on the staging filesystem; checked before anything is fetched.
    type: int
    default: 0
  timeout:
    description: Seconds without a byte from the seed before a connection counts as cut.
    type: int
    default: 60
  retries:
    description: Cut connections resumed within this run (from the part's size) before the task fails.
    type: int
    default: 3
  connect_wait:
    description: Seconds a refused connection is retried (the seed's server may still be starting).
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    description: Reports which files would be fetched from the local stamps and parts; contacts nobody.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Files already staged (matching the manifest) are not fetched or re-hashed.
seealso:
  - module: airgap.vllm.bundle_peer_serve
  - module: airgap.vllm.bundle_stage
"""

EXAMPLES = r"""
- name: Fetch the bundle from the seed of this site
  airgap.vllm.bundle_peer_fetch:
    url: http://10.20.0.11:8477
    token: "{{ hostvars[seed].__bundle_peer_token }}"
    dest: /var/lib/airgap-vllm/bundle
    artifacts: "{{ manifest.artifacts }}"
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
      description: V(current) (already here), V(copied) (fetched now, or would be in check mode), or on failure
        V(interrupted) (part kept for the next run) or V(checksum_mismatch).
      type: str
    offset:
      description: Size of the part found before this run (where the fetch resumes).
      type: int
    bytes_copied:
      description: Bytes fetched this run.
      type: int
    resumed_from:
      description: Offset a previous interrupted fetch (or copy) had reached.
      type: int
bytes_copied:
  description: Total bytes fetched this run (0 on a converged re-run and in check mode).
  returned: always
  type: int
"""

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import StampCache
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import BundleError, validate_entries
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_stage import (
    StageError,
    files_result,
    keep_stamps,
    parse_mode,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._peer_fetch import fetch_files


@ansible_module(
    dict(
        url=dict(type="str", required=True),
        token=dict(type="str", required=True, no_log=True),
        dest=dict(type="path", required=True),
        artifacts=dict(type="list", elements="dict", required=True),
        stamp_file=dict(type="path", default="/var/cache/airgap-vllm/stage-stamps.json"),
        log_path=dict(type="path", default="/var/log/airgap-vllm-peer-fetch.log"),
        mode=dict(type="raw", default="0644"),
        min_free_bytes=dict(type="int", default=0),
        timeout=dict(type="int", default=60),
        retries=dict(type="int", default=3),
        connect_wait=dict(type="int", default=60),
    ),
    errors=(StageError, BundleError),
    wording="fetching from the seed failed: {0}",
)
def main(module):
    p = module.params
    stamps = StampCache(None)
    try:
        mode = parse_mode(p["mode"])
        entries = [dict(path=e["path"], size=e["size"], sha256=e["sha256"]) for e in validate_entries(p["artifacts"])]
        stamps = StampCache(p["stamp_file"] or None)
        results = fetch_files(
            p["url"],
            p["token"],
            p["dest"],
            entries,
            stamps=stamps,
            log_path=p["log_path"] or None,
            check_mode=module.check_mode,
            mode=mode,
            keep_free=p["min_free_bytes"],
            timeout=float(p["timeout"]),
            retries=p["retries"],
            connect_wait=float(p["connect_wait"]),
        )
        if not module.check_mode:
            stamps.save()
    except StageError as e:
        keep_stamps(stamps, e)
        raise
    return files_result(results)


if __name__ == "__main__":
    main()
