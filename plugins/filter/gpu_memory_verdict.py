# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that expose preflight decisions (plugins/module_utils/_preflight.py) to the roles."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: gpu_memory_verdict
short_description: Decide whether each GPU has room for vLLM's share of its memory
description:
  - Memory held by the collection's own service container counts as available (a re-run replaces it).
positional: utilization, own_container_ids
options:
  _input:
    description: The result of M(airgap.vllm.nvml_info).
    type: dict
    required: true
  utilization:
    description: Fraction of each GPU's memory vLLM takes.
    type: float
    required: true
  own_container_ids:
    description: Ids (full or at least 12 characters) of the service's own containers.
    type: list
    elements: str
    default: []
'''

EXAMPLES = r'''
verdict: "{{ nvml_result | airgap.vllm.gpu_memory_verdict(0.93, ['0123456789ab']) }}"
'''

RETURN = r'''
_value:
  description: C(status) (ok, fail, n/a), C(detail) (one line per GPU) and C(short) (indexes without room).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils._preflight import gpu_memory_verdict


class FilterModule(object):
    def filters(self):
        return {'gpu_memory_verdict': gpu_memory_verdict}
