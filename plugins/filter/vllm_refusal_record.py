# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The service's last good record with vLLM's refusal of a plan noted (module_utils/planner/_plan_refusal.py refusal_record)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_refusal_record
short_description: The service's last good record with vLLM's refusal of a plan noted
description:
  - After a rollback, the last good record plus C(refused_plan) (fingerprint, cause, context), so an unchanged
    inventory does not deploy the refused plan again.
  - Null when vLLM refused nothing of the plan's own (a broken image, a card another process holds), when there
    is no last good record, or when the refused plan is the last good one.
options:
  _input:
    description: The result of M(airgap.vllm.vllm_launch_plan).
    type: dict
    required: true
  journal:
    description: The journal of the failed start.
    type: str
    required: true
  last_record:
    description: The service stage's record of the service (its last good configuration).
    type: dict
    required: true
'''

EXAMPLES = r'''
record: "{{ vllm_plan_result | airgap.vllm.vllm_refusal_record(journal.stdout, last_record) }}"
'''

RETURN = r'''
_value:
  description: The record to write, or null.
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_refusal import refusal_record


class FilterModule(object):
    def filters(self):
        return {'vllm_refusal_record': refusal_record}
