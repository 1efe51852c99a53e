# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is this plan one vLLM already refused on this host (module_utils/planner/_plan_refusal.py refused_plan_check)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_refused_plan
short_description: Is this plan one vLLM already refused on this host
description:
  - C(refused) and C(msg) (naming the refusal and what to change in the inventory) when the plan's fingerprint is
    the one the service's record notes as refused.
options:
  _input:
    description: The result of M(airgap.vllm.vllm_launch_plan).
    type: dict
    required: true
  service_record:
    description: The service stage's record of the service.
    type: dict
    required: true
  service_name:
    description: The service's name, for the message.
    type: str
    default: vllm
  retry:
    description: Deploy it anyway.
    type: bool
    default: false
'''

EXAMPLES = r'''
check: "{{ vllm_plan_result | airgap.vllm.vllm_refused_plan(service_record, 'vllm') }}"
'''

RETURN = r'''
_value:
  description: C(refused) (bool), C(msg) (str), C(fingerprint) (str).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_refusal import refused_plan_check


class FilterModule(object):
    def filters(self):
        return {'vllm_refused_plan': refused_plan_check}
