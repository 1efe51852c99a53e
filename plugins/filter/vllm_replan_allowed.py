# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a start of this plan may be re-planned from the engine's own numbers (module_utils/planner/_plan_refusal.py replan_allowed)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_replan_allowed
short_description: Whether a start of this plan may be re-planned from the engine's own numbers
description:
  - Called by the vllm_service role (vars/main.yml C(__vllm_service_replan_allowed), read by tasks/confirm.yml and,
    through airgap.vllm.vllm_replan_refusal, by tasks/start.yml).
  - True only with O(replan) on, a plan, and a context the planner chose itself (C(max), from its estimate). A
    context the operator stated (the ledger's C(context_requested), true when the ledger does not say) is theirs, and
    a refusal of it fails with vLLM's own numbers instead.
options:
  _input:
    description: The service's plan, the result of M(airgap.vllm.vllm_launch_plan) (empty - no plan).
    type: dict
    required: true
  replan:
    description: C(vllm_service_replan).
    type: bool
    default: true
'''

EXAMPLES = r'''
allowed: "{{ vllm_service_plan | airgap.vllm.vllm_replan_allowed(vllm_service_replan) }}"
'''

RETURN = r'''
_value:
  description: Whether the engine's numbers may re-plan this plan (once).
  type: bool
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_refusal import replan_allowed


class FilterModule(object):
    def filters(self):
        return {'vllm_replan_allowed': replan_allowed}
