# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each service's recorded plan from the plan stage's records (module_utils/service/_services.py recorded_plans)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: recorded_plans
short_description: Each vLLM service's recorded plan, by service name
description:
  - From the plan stage's records by service (M(airgap.vllm.stage_state)'s C(instances.plan)), the plan each
    service was last planned with. A run without the plan stage (C(--tags service), C(--tags loadcheck)) serves
    these, each service its own.
  - A record without a plan is left out.
options:
  _input:
    description: The plan stage's records by service name.
    type: dict
    required: true
'''

EXAMPLES = r'''
vllm_plan_results: "{{ state.instances.plan | default({}) | airgap.vllm.recorded_plans }}"
'''

RETURN = r'''
_value:
  description: The plan (the result of M(airgap.vllm.vllm_launch_plan)) of each service, by name.
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._services import recorded_plans


class FilterModule(object):
    def filters(self):
        return {'recorded_plans': recorded_plans}
