# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The services that share a service's GPUs, each with its planning options (module_utils/planner/_plan_share.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_plan_card
short_description: The vLLM services sharing one service's GPUs, each with its own planning options
description:
  - From the services the vllm_plan role loops over (each C(name) and C(vars)), the ones that list the same GPUs
    as service O(name), in the operator's order and O(name) among them, each as C(name) and C(options) (its
    M(airgap.vllm.vllm_launch_plan) options from its own vllm_plan_* variables); what that module's
    C(card_services) takes to split the card between them.
  - An empty list when the service has its GPUs to itself (or lists none).
options:
  _input:
    description: The services, as the C(airgap.vllm.service_vars) filter gives them.
    type: list
    elements: dict
    required: true
  name:
    description: The service planned.
    type: str
    required: true
'''

EXAMPLES = r'''
card_services: "{{ __vllm_plan_instances | airgap.vllm.vllm_plan_card(vllm_plan_service_name) }}"
'''

RETURN = r'''
_value:
  description: C(name) and C(options) of each service on the card, or an empty list.
  type: list
  elements: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_share import card_services


class FilterModule(object):
    def filters(self):
        return {'vllm_plan_card': card_services}
