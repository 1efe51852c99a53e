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
  - With O(state=absent) removes the stage's file (uninstall). A damaged file is not deleted but set aside
    as C(<file>.damaged-<UTC time>) (RV(set_aside)), so what it may still say stays for the operator.
  - Each file is read on its own. A damaged one (unreadable, not JSON, not a mapping, named for a service name
    the collection refuses, or set aside earlier) fails the read by default, naming every damaged file (a
    decision that needed it must not be taken on the rest). With O(on_damaged=report) the read succeeds with
    the records that are intact and names the others in RV(damaged) (uninstall, which must find every service).
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
      - C(*) with O(state=absent) - every service's record of the stage (RV(paths) lists the files).
    type: str
  data:
    description: What the stage records (JSON-serialisable mapping); required with O(state=present).
    type: dict
  on_damaged:
    description:
      - With O(state=read), what a damaged file does - V(fail) the read (naming every damaged file), or
        V(report) it in RV(damaged) and return the intact ones.
    type: str
    choices: [fail, report]
    default: fail
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

- name: Read what is intact, name what is damaged (uninstall)
  airgap.vllm.stage_state:
    on_damaged: report
  register: airgap_state_all

- name: Forget every service's plan (uninstall)
  airgap.vllm.stage_state:
    stage: plan
    instance: "*"
    state: absent
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
damaged:
  description:
    - Each damaged file - C(path), C(stage) and C(instance) (from its name; C(instance) null when the name is
      not a service name the collection accepts), C(reason), C(set_aside) (a file set aside by an earlier removal).
  returned: state=read
  type: list
  elements: dict
  sample: [{path: /var/lib/airgap-vllm/state/service@vllm-b.json, stage: service, instance: vllm-b, set_aside: false,
            reason: "/var/lib/airgap-vllm/state/service@vllm-b.json is damaged (Expecting value ...)"}]
set_aside:
  description: Damaged files removed by renaming them aside - {file, where it went} (or would go, in check mode).
  returned: state=absent
  type: dict
  sample: {/var/lib/airgap-vllm/state/service@vllm-b.json: /var/lib/airgap-vllm/state/service@vllm-b.json.damaged-20261201T153000Z}
path:
  description: The stage's state file (the default service's with O(instance=*)).
  returned: state=present or state=absent
  type: str
  sample: /var/lib/airgap-vllm/state/model.json
paths:
  description: The files removed, or that would be in check mode.
  returned: state=absent
  type: list
  elements: str
  sample: [/var/lib/airgap-vllm/state/plan.json, /var/lib/airgap-vllm/state/plan@vllm-b.json]
"""

import os

from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.common._stage_state import (
    EVERY_INSTANCE,
    StageStateError,
    by_instance,
    published_facts,
    read_each,
    remove_every_instance,
    remove_stage,
    stage_key,
    write_stage,
)


@ansible_module(
    dict(
        dir=dict(type="path", default="/var/lib/airgap-vllm/state"),
        stage=dict(type="str"),
        instance=dict(type="str"),
        data=dict(type="dict"),
        state=dict(type="str", choices=["read", "present", "absent"], default="read"),
        on_damaged=dict(type="str", choices=["fail", "report"], default="fail"),
    ),
    required_if=[("state", "present", ("stage", "data")), ("state", "absent", ("stage",))],
    errors=(StageStateError,),
)
def main(module):
    p = module.params
    if p["state"] == "read":
        stages, damaged = read_each(p["dir"])
        if damaged and p["on_damaged"] == "fail":
            module.fail_json(
                msg="damaged state file(s), nothing decided on the rest: %s" % "; ".join(d["reason"] for d in damaged),
                damaged=damaged,
            )
        module.exit_json(
            changed=False,
            stages=stages,
            instances=by_instance(stages),
            facts=published_facts(stages),
            damaged=damaged,
        )
    every = p["instance"] == EVERY_INSTANCE
    if every and p["state"] != "absent":
        module.fail_json(msg="instance '*' (every service) works with state=absent only")
    path = os.path.join(p["dir"], stage_key(p["stage"], None if every else p["instance"]) + ".json")
    paths, aside = [], {}
    if every:
        changed, removed, aside = remove_every_instance(p["dir"], p["stage"], module.check_mode)
        paths = sorted(removed)
        before = "".join(removed[k] for k in paths)
        after = ""
    elif p["state"] == "present":
        changed, before, after = write_stage(p["dir"], p["stage"], p["data"], module.check_mode, instance=p["instance"])
    else:
        changed, before, moved = remove_stage(p["dir"], p["stage"], module.check_mode, instance=p["instance"])
        after = ""
        paths = [path] if changed else []
        aside = {path: moved} if moved else {}
    extra = dict(paths=paths, set_aside=aside) if p["state"] == "absent" else {}
    for src in sorted(extra.get("set_aside", {})):
        module.warn(
            "%s is damaged: %s it to %s instead of deleting it (inspect it, then remove it)"
            % (src, "would move" if module.check_mode else "moved", aside[src])
        )
    return dict(
        changed=changed,
        path=path,
        diff=dict(before=before, after=after, before_header=path, after_header=path),
        **extra,
    )


if __name__ == "__main__":
    main()
