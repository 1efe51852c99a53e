# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM services of a host (module_utils/service/_services.py resolve)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: service_instances
short_description: The vLLM services of a host, checked
description:
  - Resolves C(airgap_vllm_services) (one mapping of vllm_plan_* / vllm_service_* variables per service) into
    the services site.yml plans and runs one after another. An empty list is one service from the host's own
    variables.
  - Fails with every problem (a missing or repeated name, a host port or GPU two services share, a variable
    that is one per host) in one message.
options:
  host_values:
    description:
      - The host's own C(vllm_service_name), C(vllm_service_port), C(vllm_plan_gpus),
        C(vllm_plan_gpu_memory_utilization) and C(vllm_plan_kv_offloading_gib), as the play sees them (site.yml
        imports the vllm_plan and vllm_service roles, so their defaults are among them). A name that is missing,
        null or empty is the default service's (C(vllm)); another value that is missing stays unknown (null).
    type: dict
    required: true
extends_documentation_fragment:
  - airgap.vllm.services
'''

EXAMPLES = r'''
services: >-
  {{ airgap_vllm_services | airgap.vllm.service_instances({
       'vllm_service_name': lookup('ansible.builtin.vars', 'vllm_service_name', default=''),
       'vllm_service_port': lookup('ansible.builtin.vars', 'vllm_service_port', default=''),
       'vllm_plan_gpus': lookup('ansible.builtin.vars', 'vllm_plan_gpus', default=''),
       'vllm_plan_gpu_memory_utilization': lookup('ansible.builtin.vars', 'vllm_plan_gpu_memory_utilization', default='')}) }}
'''

RETURN = r'''
_value:
  description:
    - C(services), each with C(name), C(port) (on the host), C(gpus) (empty = all) and C(settings) (the
      variables it sets); C(variables), every variable any service sets; C(preflight), what the preflight role
      checks per service; C(gpu_memory_utilization), the highest of the services'; C(kv_offloading), whether any
      service offloads KV to CPU memory.
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._services import HOST_VALUES, resolve
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ValueError, prefix="airgap_vllm_services does not hold: ")
def _service_instances(services, host_values):
    # lookup('ansible.builtin.vars', name, default='') answers '' for a variable nobody set.
    values = dict((name, (host_values or {}).get(name)) for name in HOST_VALUES)
    values = dict((k, None if v == '' else v) for k, v in values.items())
    return resolve(services or [], values)


class FilterModule(object):
    def filters(self):
        return {'service_instances': _service_instances}
