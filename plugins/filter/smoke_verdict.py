# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdict on the service's smoke-test completion (module_utils/service/_smoke.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: smoke_verdict
short_description: Verdict on the service's smoke-test chat completion
description:
  - Accepts a tool call with or without reasoning text; names an answer cut at max_tokens while thinking, a
    tool call left unparsed as text, and an answer without the tool, and shows what the server answered.
options:
  _input:
    description: JSON body of the /v1/chat/completions response.
    type: dict
    required: true
  tools_offered:
    description: Whether the request offered a tool with tool_choice auto.
    type: bool
    required: true
  max_tokens:
    description: The request's max_tokens (named in the advice).
    type: int
  kind:
    description:
      - What the service serves (the C(kind) of the C(airgap.vllm.vllm_smoke_request) filter's request). For
        C(embed) the answer must hold one embedding of finite numbers per input, for C(classify) one finite
        relevance score per document; C(tools_offered) and C(max_tokens) then do not apply.
    type: str
    default: generate
    choices: [generate, embed, classify]
'''

EXAMPLES = r'''
verdict: "{{ smoke.json | airgap.vllm.smoke_verdict(true, 1024) }}"
embeddings: "{{ smoke.json | airgap.vllm.smoke_verdict(false, kind='embed') }}"
'''

RETURN = r'''
_value:
  description: C(ok) (bool), C(reason) (empty when ok) and C(answer) (what the server returned, shortened).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._smoke import service_smoke_verdict


def smoke_verdict(response, tools_offered, max_tokens=None, kind='generate'):
    return service_smoke_verdict(response, kind, tools_offered, max_tokens)


class FilterModule(object):
    def filters(self):
        return {'smoke_verdict': smoke_verdict}
