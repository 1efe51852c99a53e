# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The smoke test's request for a service: chat, embeddings or rerank (module_utils/service/_smoke.py smoke_request)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_smoke_request
short_description: The smoke test's request for a vLLM service, by what its plan says it serves
description:
  - A chat completion for a generative model (with a tool offered when auto tool choice is on); for an embedding
    model an embeddings request (C(/v1/embeddings)) of two inputs; for a reranker a rerank request (C(/v1/rerank))
    of a query and two documents. Decided from the plan's pooling decision (its ledger's C(pooling.task)).
  - Returns C(kind) (C(generate), C(embed) or C(classify)), C(path) on the engine and C(body).
options:
  _input:
    description: The service's plan (the result of M(airgap.vllm.vllm_launch_plan)); empty for an argv given by hand.
    type: dict
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  max_tokens:
    description: The chat completion's max_tokens.
    type: int
    required: true
  tools:
    description: Offer a tool (the engine runs with auto tool choice).
    type: bool
    required: true
'''

EXAMPLES = r'''
request: "{{ vllm_service_plan | airgap.vllm.vllm_smoke_request('bge-m3', 1024, false) }}"
'''

RETURN = r'''
_value:
  description: C(kind), C(path) and C(body) of the request.
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._smoke import smoke_request


class FilterModule(object):
    def filters(self):
        return {'vllm_smoke_request': smoke_request}
