#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_versions
short_description: Keep model versions side by side behind one stable name, and prune old ones
version_added: 0.2.0
description:
  - Each model version lives in O(models_dir)/<name>@<version>; O(models_dir)/<name> is a symlink to the
    active one (the path the plan and the service use). Docker resolves the link when the container
    starts, so a running container keeps its version until the restart that brings the next one.
  - The version directory name is the bundle's version plus the first 8 hex digits of the checksum
    (two different models shipped under one version string never share a directory), or the first 12
    digits alone without a version.
  - O(state=prepared) migrates the older layout (O(models_dir)/<name> a real directory) by renaming it to
    a version directory (no copy; a running container keeps reading it) and linking the name to it.
  - O(state=active) points the name at the version and removes versions beyond O(keep). The version it
    replaces always stays (it serves until the new one is healthy, and a rollback returns to it), and so
    does every version in O(protect).
  - Retention acts only on what is ours - a version directory that airgap.vllm.model_import stamped, lying
    below O(models_dir) - and fails safe - with a damaged activation history nothing is removed (which
    versions were active before is unknown) and the history is left as it is. RV(held) and a warning say why.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  models_dir:
    description: Parent directory of the models.
    type: path
    required: true
  name:
    description: Stable model name (the link).
    type: str
    required: true
  version:
    description: Version from the bundle manifest (may be empty).
    type: str
    default: ""
  sha256:
    description: Manifest checksum of the model; names the version directory with O(version).
    type: str
    required: true
  keep:
    description: Previously activated versions kept besides the active one and the one it replaces.
    type: int
    default: 1
  protect:
    description: Version directory names never removed (e.g. the last known good one).
    type: list
    elements: str
    default: []
  language_model_only:
    description:
      - The model is served with C(--language-model-only). With O(state=prepared), RV(in_place) validates the
        version directory by the same rules as airgap.vllm.model_import.
    type: bool
    default: false
  state:
    description: V(prepared) names the version directory and migrates the older layout; V(active) switches the link.
    type: str
    choices: [prepared, active]
    default: prepared
attributes:
  check_mode:
    support: full
    description: Reports the migration, switch and removals it would make; changes nothing.
  diff_mode:
    support: full
    description: Link target and version list before/after.
  idempotent:
    support: full
    description: An active version with nothing to prune reports no change.
"""

EXAMPLES = r"""
- name: Name the version directory (and migrate the older layout)
  airgap.vllm.model_versions:
    models_dir: /opt/airgap-vllm/models
    name: qwen3.x-27b-fp8
    version: "2026.11"
    sha256: "{{ model_sha256 }}"
  register: model_version

- name: Import the model into its version directory
  airgap.vllm.model_import:
    src: /var/lib/airgap-vllm/bundle/artifacts/models/qwen3.x-27b-fp8
    models_dir: /opt/airgap-vllm/models
    name: "{{ model_version.version_name }}"
    sha256: "{{ model_sha256 }}"

- name: Point the name at it, keep one previous version
  airgap.vllm.model_versions:
    models_dir: /opt/airgap-vllm/models
    name: qwen3.x-27b-fp8
    version: "2026.11"
    sha256: "{{ model_sha256 }}"
    keep: 1
    state: active
"""

RETURN = r"""
version:
  description: Version directory suffix (after C(@)).
  returned: always
  type: str
  sample: 2026.11-3f2a9c01
version_name:
  description: Directory name of the version under O(models_dir) (what model_import takes as its name).
  returned: always
  type: str
  sample: qwen3.x-27b-fp8@2026.11-3f2a9c01
dir:
  description: The stable path (the link).
  returned: always
  type: str
  sample: /opt/airgap-vllm/models/qwen3.x-27b-fp8
previous:
  description: Version the link pointed at before (empty when none).
  returned: state=active
  type: str
removed:
  description: Version suffixes removed by the retention.
  returned: state=active
  type: list
  elements: str
held:
  description: Why versions the retention would have removed were kept (damaged history, not ours).
  returned: state=active
  type: list
  elements: str
  sample: ["nothing removed: /opt/airgap-vllm/models/.qwen.history.json is damaged (...); every version is kept"]
versions:
  description: Version suffixes present afterwards.
  returned: state=active
  type: list
  elements: str
in_place:
  description:
    - With O(state=prepared), nothing left to do for this version - imported (its stamp carries O(sha256)),
      the name pointing at it, a valid model directory, and activating it with O(keep) would change nothing -
      so the import and the activation can be skipped.
  returned: state=prepared
  type: bool
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.model._model_import import ModelError, validate_model_dir
from ansible_collections.airgap.vllm.plugins.module_utils.model._model_versions import (
    ModelVersionError,
    activate,
    current_version,
    in_place,
    prepare,
    version_dir,
    version_id,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


@ansible_module(
    dict(
        models_dir=dict(type="path", required=True),
        name=dict(type="str", required=True),
        version=dict(type="str", default=""),
        sha256=dict(type="str", required=True),
        keep=dict(type="int", default=1),
        protect=dict(type="list", elements="str", default=[]),
        language_model_only=dict(type="bool", default=False),
        state=dict(type="str", choices=["prepared", "active"], default="prepared"),
    ),
    errors=(ModelVersionError,),
    wording="cannot manage the versions of {name} in {models_dir}: {0}",
)
def main(module):
    p = module.params
    if p["keep"] < 0:
        module.fail_json(msg="keep must be 0 or more, got %d" % p["keep"])
    vid = version_id(p["version"], p["sha256"])
    common = dict(version=vid, version_name="%s@%s" % (p["name"], vid), dir=os.path.join(p["models_dir"], p["name"]))
    before = current_version(p["models_dir"], p["name"])
    if p["state"] == "prepared":
        changed, msg = prepare(p["models_dir"], p["name"], vid, p["sha256"], module.check_mode)
        done = not changed and in_place(p["models_dir"], p["name"], vid, p["sha256"], p["keep"])
        if done:
            try:
                validate_model_dir(version_dir(p["models_dir"], p["name"], vid), p["language_model_only"])
            except ModelError:
                done = False  # the import path validates again and says what is wrong
        module.exit_json(changed=changed, msg=msg, in_place=done, **common)
    result = activate(p["models_dir"], p["name"], vid, p["keep"], p["protect"], module.check_mode)
    result.update(common)
    for line in result["held"]:
        module.warn(line)
    after_versions = "\n".join(result["versions"]) + "\n"
    return dict(
        diff=dict(
            before="link -> %s\n" % (before or "(none)"), after="link -> %s\nversions:\n%s" % (vid, after_versions)
        ),
        **result,
    )


if __name__ == "__main__":
    main()
