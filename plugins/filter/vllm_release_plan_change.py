# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Release day's dry run: one service's release, argv and plan numbers before and after (module_utils/service/_release)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_release_plan_change
short_description: The dry run's lines for one service - release, argv and the plan's numbers, before and after
description:
  - The release the service runs and the one it moves to, the new argv (which the new release's own parser judges in
    the service stage), the flags that go and come, and the plan's context, concurrency, KV pool, KV blocks and
    prefill chunk where they change.
  - Composed in C(plugins/module_utils/service/_release.py) (C(plan_change)).
options:
  _input:
    description: The service's name.
    type: str
    required: true
  previous_release:
    description: The vLLM release the service runs now.
    type: str
    required: true
  release:
    description: The vLLM release it moves to.
    type: str
    required: true
  previous_plan:
    description: The plan the service runs now (C(vllm_plan_result)), empty when none was recorded.
    type: dict
    required: true
  plan:
    description: The new plan.
    type: dict
    required: true
'''

EXAMPLES = r'''
msg: "{{ name | airgap.vllm.vllm_release_plan_change(old_release, new_release, old_plan, new_plan) }}"
'''

RETURN = r'''
_value:
  description: The lines.
  type: list
  elements: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._release import ReleaseError, plan_change
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ReleaseError, prefix="the dry run cannot compare the plans: ")
def _vllm_release_plan_change(service, previous_release, release, previous_plan, plan):
    return plan_change(service, previous_release, release, previous_plan, plan)


class FilterModule(object):
    def filters(self):
        return {'vllm_release_plan_change': _vllm_release_plan_change}
