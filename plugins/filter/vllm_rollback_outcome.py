# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sentences a failed vLLM start ends with after the rollback (module_utils/common/_unit_wait.py rollback_outcome)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_rollback_outcome
short_description: The sentences a failed vLLM start ends with after the rollback
description:
  - From the health wait of the restarted last good configuration, what the failure says happened to the service -
    healthy again (and after how long), not healthy (why), or no earlier good configuration (stopped) - and whether
    the refused plan was noted.
  - The vllm_service role's failure only lists these sentences; they are composed here, not in Jinja.
options:
  _input:
    description: The result of C(airgap.vllm.unit_health_wait) for the last good configuration (skipped when none was restarted).
    type: dict
    required: true
  name:
    description: The service (unit) name.
    type: str
    required: true
  last_good_dir:
    description: Where the last good configuration is kept.
    type: str
    required: true
  last_good_exists:
    description: Whether there was a last good configuration to put back.
    type: bool
    required: true
  refused_noted:
    description: Whether the rollback noted the plan as refused in the service's state record.
    type: bool
    default: false
'''

EXAMPLES = r'''
__outcome: >-
  {{ __vllm_service_back | airgap.vllm.vllm_rollback_outcome(vllm_service_name, __vllm_service_dir ~ '/last-good',
       __vllm_service_last_good.stat.exists, __vllm_service_refused_note is not skipped) }}
'''

RETURN = r'''
_value:
  description: The sentences.
  type: dict
  contains:
    headline: {description: "C(<name> did not come up healthy with the new configuration.)", type: str}
    rollback: {description: "What the rollback did: healthy again after N s, not healthy (why), or the service is stopped.", type: str}
    refused: {description: "The sentence that the plan is noted as refused, or empty.", type: str}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.common._unit_wait import rollback_outcome


def vllm_rollback_outcome(back, name, last_good_dir, last_good_exists, refused_noted=False):
    return rollback_outcome(name, last_good_dir, last_good_exists, back, refused_noted)


class FilterModule(object):
    def filters(self):
        return {'vllm_rollback_outcome': vllm_rollback_outcome}
