#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_pack
short_description: Put the operator's artifacts into the offline bundle (split for FAT32) and hash its payload
version_added: 0.1.0
description:
  - Runs on the build machine (the bundle_build role calls it on localhost).
  - Copies each artifact (a file or a directory) under C(artifacts/<basename>) of O(dest). A file bigger
    than O(split_size) is written as numbered parts C(<name>.part000), C(<name>.part001), ... straight from
    the source, hashing the whole file and each part in the same read.
  - A file, or every part of one, whose size and modification time equal the source's is not copied
    again; hashes are remembered in O(stamp_file), so an unchanged bundle is neither copied nor read.
  - Removes files under C(artifacts/) that no artifact produces any more, so disk and manifest agree.
  - Returns the manifest's C(artifacts) list (whole files with their C(parts)) and the SHA256SUMS text
    (the files as they are on the medium), and hashes C(collections/) and C(wheels/) as found.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  dest:
    description: Bundle root directory.
    type: path
    required: true
  artifacts:
    description:
      - Each C(kind) (driver, fabricmanager, toolkit, rpms, image, model, file), C(name), C(version) and C(src) (a file or
        directory on this machine).
    type: list
    elements: dict
    required: true
  split_size:
    description:
      - Files bigger than this many bytes are stored as parts of this size. V(0) stores every file whole
        (exFAT, ext4, XFS, NTFS disks). The default is 1 MiB under 4 GiB (FAT32 keeps at most 4 GiB - 1 byte).
    type: int
    default: 4293918720
  stamp_file:
    description: Hash stamps (JSON); empty string disables them. Not written in check mode.
    type: path
    default: ~/.cache/airgap-vllm/bundle-build-stamps.json
  collection_version:
    description: Version recorded for the files under C(collections/).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reports what would be copied or removed and returns the manifest it would write; writes nothing.
  diff_mode:
    support: none
    description: The role writes the manifest with M(ansible.builtin.copy), which shows the diff.
  idempotent:
    support: full
    description: An unchanged artifact is neither copied nor hashed again.
seealso:
  - module: airgap.vllm.bundle_stage
  - module: airgap.vllm.bundle_verify
"""

EXAMPLES = r"""
- name: Put the artifacts into the bundle, split for FAT32
  airgap.vllm.bundle_pack:
    dest: /media/usb/airgap-vllm-bundle
    artifacts:
      - {kind: driver, name: nvidia-driver, version: 580.65.06, src: ~/dl/NVIDIA-Linux-x86_64-580.65.06.run}
      - {kind: image, name: vllm-openai, version: v0.27.1, src: ~/dl/vllm-openai-v0.27.1.tar}
  register: packed
"""

RETURN = r"""
entries:
  description: The manifest's artifacts (kind, name, version, path, size, sha256; parts for a split file).
  returned: always
  type: list
  elements: dict
sums:
  description: SHA256SUMS text of the files on the medium (parts, not the whole of a split file).
  returned: always
  type: str
copied:
  description: Bundle paths (re)written from their sources this run.
  returned: always
  type: list
  elements: str
removed:
  description: Files under artifacts/ removed because no artifact produces them any more.
  returned: always
  type: list
  elements: str
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_hash import StampCache
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_manifest import BundleError
from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_pack import FAT32_SPLIT, pack
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        dest=dict(type="path", required=True),
        artifacts=dict(type="list", elements="dict", required=True),
        split_size=dict(type="int", default=FAT32_SPLIT),
        stamp_file=dict(type="path", default="~/.cache/airgap-vllm/bundle-build-stamps.json"),
        collection_version=dict(type="str", default=""),
    ),
    errors=(BundleError,),
    wording="packing the bundle failed: {0}",
)
def main(module):
    p = module.params
    if not module.check_mode and not os.path.isdir(p["dest"]):
        os.makedirs(p["dest"], 0o755)
    stamps = StampCache(p["stamp_file"] or None)
    out = pack(
        p["dest"],
        p["artifacts"],
        split_size=p["split_size"],
        stamps=stamps,
        check_mode=module.check_mode,
        collection_version=p["collection_version"],
    )
    if not module.check_mode:
        stamps.save()
    return dict(changed=bool(out["copied"] or out["removed"]), **out)


if __name__ == "__main__":
    main()
