# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a started vLLM service is not the planned, working one (module_utils/common/_unit_wait.py start_failure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_start_failure
short_description: Why a started vLLM service is not the planned, working one (empty when it is)
description:
  - From the health wait (with the /metrics it read), the engine's argv and the smoke test's verdict, the one reason a
    start failed - the health wait's own message, the cache settings /metrics shows against the planned
    C(--kv-cache-dtype) and prefix caching, or what the smoke-test completion got wrong - or an empty string.
  - The vllm_service role's verify reads and does not fail; its one failure, after the rollback, says this reason.
options:
  _input:
    description: "The result of C(airgap.vllm.unit_health_wait) (run with C(failed_when: false))."
    type: dict
    required: true
  argv:
    description: The engine's argv.
    type: list
    elements: str
    required: true
  smoke:
    description: The smoke test's verdict (C(ok), C(reason), C(answer); filter C(airgap.vllm.smoke_verdict)); null when it is off.
    type: dict
'''

EXAMPLES = r'''
__vllm_service_start_failure: "{{ __vllm_service_metrics | airgap.vllm.vllm_start_failure(__vllm_service_argv, none) }}"
'''

RETURN = r'''
_value:
  description: The reason, or an empty string when the service is healthy, runs the planned cache settings and answered.
  type: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.common._unit_wait import start_failure


def vllm_start_failure(health, argv, smoke=None):
    return start_failure(health, argv, smoke)


class FilterModule(object):
    def filters(self):
        return {'vllm_start_failure': vllm_start_failure}
