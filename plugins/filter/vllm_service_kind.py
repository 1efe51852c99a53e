# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a vLLM service serves, from its plan (module_utils/service/_smoke.py service_kind)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_service_kind
short_description: What a vLLM service serves - generate, embed or classify - from its plan
description:
  - C(embed) for an embedding model, C(classify) for a reranker (a cross-encoder), from the plan's pooling decision
    (its ledger's C(pooling.task)); C(generate) for a chat model and for a service without a plan.
options:
  _input:
    description: The service's plan (the result of M(airgap.vllm.vllm_launch_plan)).
    type: dict
    required: true
'''

EXAMPLES = r'''
kind: "{{ vllm_service_plan | airgap.vllm.vllm_service_kind }}"
'''

RETURN = r'''
_value:
  description: C(generate), C(embed) or C(classify).
  type: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._smoke import service_kind


class FilterModule(object):
    def filters(self):
        return {'vllm_service_kind': service_kind}
