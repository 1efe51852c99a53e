# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Release day's gate: pass or stop a service moved to a new vLLM release (module_utils/service/_release.gate)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_release_gate
short_description: Pass or stop a service that moved to a new vLLM release, with one line why
description:
  - The engine's confirmation of the plan (its verdict C(confirmed), or C(not_measured) where a test setting fixed
    the pool), a load check with no failed request, the context promise MET, the concurrency promise not MISSED, the
    tools profile's tool-call rate at least O(thresholds.min_tool_call_rate), and each tok/s figure (single-stream
    decode, prefill, per-stream decode) at least O(thresholds.min_tok_s_ratio) of the same figure measured on the same
    host under the previous release.
  - Decided in C(plugins/module_utils/service/_release.py) (C(gate)); the vllm_release role's gate.yml only calls it.
options:
  _input:
    description: The new deployment's report.json (the engine's confirmation).
    type: dict
    required: true
  loadcheck:
    description: The new release's load check (its loadcheck.json).
    type: dict
    required: true
  previous_loadcheck:
    description: The same host's load check under the previous release, kept by the walk; empty when none is kept.
    type: dict
    required: true
  thresholds:
    description: C(min_tok_s_ratio) and C(min_tool_call_rate) over the defaults.
    type: dict
    default: {}
'''

EXAMPLES = r'''
__gate: >-
  {{ __report | airgap.vllm.vllm_release_gate(__loadcheck, __previous_loadcheck,
       {'min_tok_s_ratio': vllm_release_gate_min_tok_s_ratio, 'min_tool_call_rate': vllm_release_gate_min_tool_call_rate}) }}
'''

RETURN = r'''
_value:
  description: The gate's decision.
  type: dict
  contains:
    ok: {description: Whether the release passes on this service., type: bool}
    reason: {description: "One line: the first check that stopped it, else every check's figure.", type: str}
    checks: {description: "Each check: C(check), C(ok), C(detail).", type: list, elements: dict}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._release import ReleaseError, gate
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ReleaseError, prefix="the release gate cannot read its inputs: ")
def _vllm_release_gate(report, loadcheck, previous_loadcheck, thresholds=None):
    return gate(report, loadcheck, previous_loadcheck, thresholds)


class FilterModule(object):
    def filters(self):
        return {'vllm_release_gate': _vllm_release_gate}
