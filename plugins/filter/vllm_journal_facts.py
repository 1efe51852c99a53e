# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's own start-up numbers from its log (module_utils/planner/_plan_confirm_parse.py parse_journal)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_journal_facts
short_description: vLLM's own start-up numbers from its log
description:
  - Reads what vLLM 0.27.1 prints while it starts (available KV cache memory, GPU KV cache size, maximum
    concurrency) and, when it refused the configuration, its refusal with the estimated maximum model length.
  - Reads only the last start in the text, from the last systemd C(Starting)/C(Started) line of the unit or
    vLLM's start banner on; an earlier start's refusal says nothing about this one.
  - With tensor parallelism every rank prints its own available KV cache memory; vLLM sizes every rank to the
    smallest, and so does this. C(available_kv_gib) is the minimum, C(available_kv_gib_by_rank) all of them.
options:
  _input:
    description: Text of the service's journal (or C(docker logs)).
    type: str
    required: true
'''

EXAMPLES = r'''
cause: "{{ journal.stdout | airgap.vllm.vllm_journal_facts }}"
'''

RETURN = r'''
_value:
  description: >-
    C(available_kv_gib), C(model_loading_gib), C(kv_cache_tokens), C(max_concurrency), C(max_concurrency_len),
    C(refusal) (C(max_model_len), C(needed_gib), C(available_gib), C(estimated_max_model_len)) or null,
    C(no_memory), C(not_free), C(argv_refused) (the message of vLLM's argument parser, or null),
    C(available_kv_gib_by_rank), C(memory_summary) (the one-line memory summary as numbers in GiB - free_gib,
    total_gib, utilization, requested_gib, weights_gib, activation_gib, non_torch_gib, consumed_gib, cudagraph_gib,
    kv_cache_gib - or null), and C(cause): the sentence a failed start tells the operator from those.
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_parse import parse_journal


class FilterModule(object):
    def filters(self):
        return {'vllm_journal_facts': parse_journal}
