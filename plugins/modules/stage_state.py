#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: stage_state
short_description: Read or write the per-stage state files that let each stage run alone
version_added: 0.2.0
description:
  - Each role of the collection records at its end what later stages need (the staged bundle, the model
    pointer and version, the launch plan, the image ID the unit runs) in O(dir)/<stage>.json on the host.
  - A run that selects stages by tag (C(--tags service)) reads them back instead of relying on facts of
    stages that did not run.
  - With O(state=read) (the default) returns every stage's data and the facts they publish (each
    stage's C(facts) mapping); nothing is written.
  - With O(state=present) writes O(data) for O(stage) atomically (fsync, rename), only when it differs.
  - With O(state=absent) removes the stage's file (uninstall).
  - Stages that exist once per vLLM service of a host (plan, service) name the service in O(instance). Its
    file is O(dir)/<stage>@<instance>.json, and the default service C(vllm) keeps O(dir)/<stage>.json.
author:
  - airgap.vllm maintainers (@airgap-vllm)
options:
  dir:
    description: Directory of the state files.
    type: path
    default: /var/lib/airgap-vllm/state
  stage:
    description: Stage name (lowercase letters, digits, C(_)); required unless O(state=read).
    type: str
  instance:
    description:
      - The vLLM service (its C(vllm_service_name)) a per-service stage belongs to; omitted or C(vllm) = the
        default service.
    type: str
  data:
    description: What the stage records (JSON-serialisable mapping); required with O(state=present).
    type: dict
  state:
    description: Read all stages, write one, or remove one.
    type: str
    choices: [read, present, absent]
    default: read
attributes:
  check_mode:
    support: full
    description: Reports whether the file would change; writes nothing.
  diff_mode:
    support: full
    description: Before/after JSON of the stage's file.
  idempotent:
    support: full
    description: Unchanged data leaves the file untouched (changed=false).
"""

EXAMPLES = r"""
- name: Record where the model lives
  airgap.vllm.stage_state:
    stage: model
    state: present
    data:
      version: "2026.11"
      facts:
        vllm_model_dir: /opt/airgap-vllm/models/qwen3-tiny

- name: Read what earlier runs recorded
  airgap.vllm.stage_state:
  register: airgap_state

- name: Use the model directory of the last model stage
  ansible.builtin.debug:
    msg: "{{ airgap_state.facts.vllm_model_dir }}"
"""

RETURN = r"""
stages:
  description: Every stage's data by stage name (O(state=read)); C({}) when nothing was recorded yet.
  returned: state=read
  type: dict
  sample: {model: {dir: /opt/airgap-vllm/models/qwen3-tiny, version: "2026.11"}}
instances:
  description:
    - Every service's record of each stage, by stage and then by service name (O(state=read)). The default
      service is C(vllm).
  returned: state=read
  type: dict
  sample: {service: {vllm: {image: "sha256:0a1b..."}, vllm-b: {image: "sha256:0a1b..."}}}
facts:
  description:
    - The facts the stages publish for later stages (each stage's C(facts) mapping, merged), e.g.
      C(vllm_model_dir), C(vllm_image_ref), C(vllm_plan_result), C(bundle_staged).
  returned: state=read
  type: dict
  sample: {vllm_model_dir: /opt/airgap-vllm/models/qwen3-tiny}
path:
  description: The stage's state file.
  returned: state=present or state=absent
  type: str
  sample: /var/lib/airgap-vllm/state/model.json
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airgap.vllm.plugins.module_utils._stage_state import (
    StageStateError,
    by_instance,
    published_facts,
    read_all,
    remove_stage,
    stage_key,
    write_stage,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", default="/var/lib/airgap-vllm/state"),
            stage=dict(type="str"),
            instance=dict(type="str"),
            data=dict(type="dict"),
            state=dict(type="str", choices=["read", "present", "absent"], default="read"),
        ),
        required_if=[("state", "present", ("stage", "data")), ("state", "absent", ("stage",))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["state"] == "read":
            stages = read_all(p["dir"])
            module.exit_json(changed=False, stages=stages, instances=by_instance(stages),
                             facts=published_facts(stages))
        path = os.path.join(p["dir"], stage_key(p["stage"], p["instance"]) + ".json")
        if p["state"] == "present":
            changed, before, after = write_stage(p["dir"], p["stage"], p["data"], module.check_mode,
                                                 instance=p["instance"])
        else:
            changed, before = remove_stage(p["dir"], p["stage"], module.check_mode, instance=p["instance"])
            after = ""
    except StageStateError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=changed, path=path,
                     diff=dict(before=before, after=after, before_header=path, after_header=path))


if __name__ == "__main__":
    main()
