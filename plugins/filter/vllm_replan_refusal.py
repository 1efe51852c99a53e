# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a failed start is re-planned once from vLLM's refusal (module_utils/planner/_plan_refusal.py replan_refusal)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_replan_refusal
short_description: Whether a failed start is re-planned once from vLLM's refusal
description:
  - Called by the vllm_service role (tasks/start.yml) after a start that failed.
  - True when re-planning is allowed (airgap.vllm.vllm_replan_allowed - O(replan) on, a plan, a context the planner
    chose itself), this start was not itself a re-plan (O(replanned) - a re-plan never re-plans again) and the
    journal of this start holds vLLM's refusal of the context (airgap.vllm.vllm_journal_facts C(refusal)); a broken
    image or a card another process holds is no refusal.
options:
  _input:
    description: The service's plan, the result of M(airgap.vllm.vllm_launch_plan) (empty - no plan).
    type: dict
    required: true
  journal:
    description: Text of the service's journal (the failed start's).
    type: str
    required: true
  replan:
    description: C(vllm_service_replan).
    type: bool
    default: true
  replanned:
    description: This start was already the re-plan.
    type: bool
    default: false
'''

EXAMPLES = r'''
replan: "{{ vllm_service_plan | airgap.vllm.vllm_replan_refusal(journal.stdout, replan=true, replanned=false) }}"
'''

RETURN = r'''
_value:
  description: Whether to re-plan from vLLM's refusal and start once more.
  type: bool
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_refusal import replan_refusal


class FilterModule(object):
    def filters(self):
        return {'vllm_replan_refusal': replan_refusal}
