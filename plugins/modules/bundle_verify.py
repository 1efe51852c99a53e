#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_verify
short_description: Verify an offline bundle against its manifest, fast and only once per change
version_added: 0.1.0
description:
  - Checks every artifact listed in the bundle manifest (size, then sha256) and reports each file's
    state - V(ok), V(missing) (also a dangling symlink), V(not_a_file) (a directory or special file where
    the manifest lists a file), V(size_mismatch), V(checksum_mismatch), or V(unlisted) for a file under
    C(artifacts/), C(collections/) or C(wheels/) that the manifest does not name.
  - A file the bundle build split into parts for FAT32 (its manifest entry lists C(parts)) is checked part
    by part where the whole file is absent (the bundle disk), and whole where it is present (a host's
    staged copy); RV(failures) names a bad part and the file it belongs to.
  - Hashes files in parallel with large reads (throughput close to C(sha256sum); see bench/).
  - Remembers each hash in a stamp cache keyed by path, size, mtime, ctime, inode and device, so an
    unchanged file is not read again on the next run. ctime cannot be set back from user space, so a file
    edited in place with its mtime restored is hashed again.
  - Fails, naming the files, when any file is not V(ok); it changes nothing on the host except the
    stamp cache, so a playbook stops before the host is touched.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  path:
    description: Bundle root directory (the one holding C(manifest.yml)).
    type: path
    required: true
  manifest:
    description:
      - Manifest file, relative to O(path) or absolute. Needs PyYAML where the module runs unless the
        file is JSON; pass O(artifacts) instead to avoid that.
    type: path
    default: manifest.yml
  artifacts:
    description:
      - The manifest's C(artifacts) list, already parsed (takes precedence over O(manifest)).
    type: list
    elements: dict
  stamp_file:
    description:
      - Stamp cache file. Empty string disables the cache (every file is hashed).
    type: path
    default: /var/cache/airgap-vllm/verify-stamps.json
  workers:
    description: Files hashed in parallel. On one slow USB disk, 2 is usually best.
    type: int
    default: 4
  allow_unlisted:
    description: Report unlisted files without failing.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Verification is read-only; in check mode the stamp cache is not written either.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Never reports changed.
seealso:
  - module: airgap.vllm.bundle_stage
"""

EXAMPLES = r"""
- name: Verify the bundle on the USB disk before anything is installed
  airgap.vllm.bundle_verify:
    path: /mnt/usb/airgap-vllm-bundle
  delegate_to: localhost
  run_once: true

- name: Verify without a cache, tolerating extra files
  airgap.vllm.bundle_verify:
    path: /mnt/usb/airgap-vllm-bundle
    stamp_file: ""
    allow_unlisted: true
"""

RETURN = r"""
files:
  description: One entry per listed or unlisted file.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Path relative to the bundle root.
      type: str
    state:
      description: V(ok), V(missing), V(not_a_file), V(size_mismatch), V(checksum_mismatch) or V(unlisted).
      type: str
    hashed:
      description: Whether the file was read this run (false on a stamp-cache hit).
      type: bool
    size:
      description: Size found.
      type: int
    expected_size:
      description: Size in the manifest.
      type: int
    sha256:
      description: Checksum found (absent when not hashed because of a size problem).
      type: str
    expected_sha256:
      description: Checksum in the manifest.
      type: str
    parts:
      description: For a split file checked on the disk, each part's C(path), C(state), C(size), C(sha256), C(hashed).
      type: list
      elements: dict
      returned: when the entry has parts and its whole file is absent
summary:
  description: Count per state, plus C(hashed_files) and C(hashed_bytes) read this run.
  returned: always
  type: dict
  sample: {ok: 5, missing: 0, size_mismatch: 0, checksum_mismatch: 0, unlisted: 0, not_a_file: 0, hashed_files: 0,
           hashed_bytes: 0}
failures:
  description: Human-readable list of the files that are wrong.
  returned: always
  type: list
  elements: str
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import (
    StampCache,
    verify_bundle,
    verify_failures,
)
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import (
    BundleError,
    load_manifest,
    validate_entries,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        path=dict(type="path", required=True),
        manifest=dict(type="path", default="manifest.yml"),
        artifacts=dict(type="list", elements="dict"),
        stamp_file=dict(type="path", default="/var/cache/airgap-vllm/verify-stamps.json"),
        workers=dict(type="int", default=4),
        allow_unlisted=dict(type="bool", default=False),
    ),
    errors=(BundleError,),
)
def main(module):
    p = module.params
    if not os.path.isdir(p["path"]):
        module.fail_json(msg="bundle directory %s not found" % p["path"])
    if p["artifacts"]:
        entries = validate_entries(p["artifacts"])
    else:
        entries = load_manifest(os.path.join(p["path"], p["manifest"]))
    stamps = StampCache(p["stamp_file"] or None)
    results, summary = verify_bundle(p["path"], entries, stamps=stamps, workers=p["workers"])
    if not module.check_mode:
        try:
            stamps.save()
        except (BundleError, IOError, OSError) as e:
            module.warn("stamp cache not written (the next run hashes again): %s" % e)
    failures = verify_failures(results, p["allow_unlisted"])
    out = dict(changed=False, files=results, summary=summary, failures=failures)
    if failures:
        module.fail_json(msg="bundle %s failed verification: %s" % (p["path"], "; ".join(failures)), **out)
    return out


if __name__ == "__main__":
    main()
