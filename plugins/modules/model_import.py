#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_import
short_description: Import a model archive or directory into the models directory, atomically and once
version_added: 0.1.0
description:
  - Puts the model from O(src) (a tar archive, optionally compressed, or a directory) at
    O(models_dir)/O(name).
  - Checks free space first, extracts into a hidden temporary sibling on the same filesystem and
    renames it into place, so a half-written model never appears under its real name.
  - Writes a stamp holding O(sha256) (the bundle manifest checksum); when the stamp matches, the
    import is skipped and the existing directory is only validated.
  - Validates what vLLM needs for an offline start - C(config.json), C(model.safetensors.index.json)
    and every shard it names (safetensors header), tokenizer files, a chat template (not for an embedding model or a
    cross-encoder, which its files name, since no chat is ever sent to it) and, unless O(language_model_only),
    C(preprocessor_config.json) - and names the missing file.
  - Files end up 0644 and directories 0755 (optionally owned by O(owner)/O(group)) so the container can read them;
    a file that is not world-readable in the source ends up 0640 (readable through O(group)), never 0644.
  - A directory source is read without following any symlink out of it; devices, FIFOs and sockets are refused.
  - O(sha256) is checked against the source before anything is swapped in - the archive's own sha256, or for a
    directory the bundle's digest (sha256 of the sorted C(<sha256>  <parent>/<dir>/<file>) lines; the same
    lines with paths relative to the directory are accepted too). A mismatch fails and changes nothing.
  - The previous model is renamed aside, the new one renamed in, then the old one removed. A run killed
    between the two renames is recovered by the next run (the previous model is put back first).
  - When O(models_dir)/O(name) is a symlink, the model is imported at the link's target (the link stays).
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  src:
    description:
      - Model archive or directory on the target.
      - Required unless O(validate_only).
    type: path
  models_dir:
    description: Parent directory of the imported models.
    type: path
    required: true
  name:
    description: Directory name of the model under O(models_dir).
    type: str
    required: true
  sha256:
    description:
      - Checksum of the source from the bundle manifest; checked against the source, then stored in the stamp.
      - Required unless O(validate_only).
    type: str
  owner:
    description: Owner (name or uid) of the imported files.
    type: str
  group:
    description: Group (name or gid) of the imported files.
    type: str
  language_model_only:
    description: The service runs with C(--language-model-only), so C(preprocessor_config.json) is optional.
    type: bool
    default: false
  force:
    description: Import even when the stamp matches.
    type: bool
    default: false
  validate_only:
    description:
      - Only validate the model already at O(models_dir)/O(name), with the same rules as an import (and as the
        launch planner's model reading); read nothing from O(src), write nothing, never changed.
      - C(config.json) must name C(model_type) or C(architectures) (either is enough for vLLM).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports whether the model would be imported; writes nothing.
  diff_mode:
    support: full
    description: Before/after stamp checksum.
  idempotent:
    support: full
    description: An unchanged source (same sha256) is not imported again.
seealso:
  - module: airgap.vllm.bundle_stage
"""

EXAMPLES = r"""
- name: Import the FP8 model from the staged bundle
  airgap.vllm.model_import:
    src: /var/lib/airgap-vllm/bundle/artifacts/qwen3.x-27b-fp8.tar
    models_dir: /opt/models
    name: qwen3.x-27b-fp8
    sha256: "{{ bundle_manifest_by_kind.model.sha256 }}"

- name: Check an imported model the way the import does (reads only, changes nothing)
  airgap.vllm.model_import:
    models_dir: /opt/models
    name: qwen3.x-27b-fp8
    validate_only: true
"""

RETURN = r"""
path:
  description: Directory of the imported model.
  returned: always
  type: str
imported:
  description: Whether the model was (or in check mode would be) extracted or copied this run.
  returned: success
  type: bool
shards:
  description: Number of safetensors shards found.
  returned: when validated
  type: int
total_size:
  description: metadata.total_size of the safetensors index (weight bytes); null without an index or that field.
  returned: when validated
  type: int
model_type:
  description: C(model_type) of C(config.json) (null when it names only C(architectures)).
  returned: when validated
  type: str
  sample: qwen3
architectures:
  description: C(architectures) of C(config.json) (empty when it names only C(model_type)).
  returned: when validated
  type: list
  elements: str
  sample: [Qwen3ForCausalLM]
pooling_task:
  description:
    - C(embed) or C(classify) when the model's own files make it a pooling model (a BERT-family encoder, a
      C(*ForSequenceClassification) checkpoint, sentence-transformers' C(modules.json)); null for a generative model.
  returned: when validated
  type: str
  sample: embed
"""

import grp
import pwd

from ansible_collections.airgap.vllm.plugins.module_utils.model._model_import import (
    ModelError,
    import_model,
    read_stamp,
    validate_model_dir,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


def _id(value, db):
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        return db(value)[2]
    except KeyError:
        raise ModelError("unknown user or group %r" % value)


@ansible_module(
    dict(
        src=dict(type="path"),
        models_dir=dict(type="path", required=True),
        name=dict(type="str", required=True),
        sha256=dict(type="str"),
        owner=dict(type="str"),
        group=dict(type="str"),
        language_model_only=dict(type="bool", default=False),
        force=dict(type="bool", default=False),
        validate_only=dict(type="bool", default=False),
    ),
    required_if=[("validate_only", False, ("src", "sha256"))],
    errors=(ModelError,),
    wording="model import failed: {0}",
)
def main(module):
    p = module.params
    if p["validate_only"]:
        path = "%s/%s" % (p["models_dir"], p["name"])
        info = validate_model_dir(path, p["language_model_only"])
        for w in info.pop("warnings", []):
            module.warn(w)
        module.exit_json(changed=False, path=path, imported=False, **info)
    uid = _id(p["owner"], pwd.getpwnam)
    gid = _id(p["group"], grp.getgrnam)
    before = read_stamp("%s/%s" % (p["models_dir"], p["name"]))
    result = import_model(
        p["src"],
        p["models_dir"],
        p["name"],
        p["sha256"].lower(),
        uid=uid,
        gid=gid,
        language_model_only=p["language_model_only"],
        check_mode=module.check_mode,
        force=p["force"],
    )
    for w in result.pop("warnings", []):
        module.warn(w)
    if module._diff:
        result["diff"] = {"before": {"sha256": (before or {}).get("sha256")}, "after": {"sha256": p["sha256"].lower()}}
    return result


if __name__ == "__main__":
    main()
