# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each vLLM service's variables for the roles that loop over the services (module_utils/service/_services.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: service_vars
short_description: Each vLLM service of a host with its variables, for the roles that run every service
description:
  - The vllm_plan and vllm_service roles run every service of the host (C(airgap_vllm_services)) in a loop of
    their own. This filter gives each service its variables - the role's own (as the role sees them, its
    defaults included) with the service's settings over them - so no service inherits what the one before it set.
  - An empty list is the host's one service, from the role's variables alone.
  - Fails with every problem of the list (a missing or repeated name, a host port or GPU two services share, a
    variable that is one per host) in one message.
options:
  host_vars:
    description: The role's variables as the role sees them (C(vllm_plan_*), C(vllm_service_*)).
    type: dict
    required: true
  plans:
    description:
      - The plan of each service by name (the vllm_service role); each service then gets C(plan), its own plan
        (for the host's one service its C(vllm_service_plan) when none is named), else a skipped result.
    type: dict
  part:
    description:
      - V(public), each service's C(vars) with every secret redacted (the rule of module_utils/common/_secrets.py, the API
        keys, the container environment, client keys and metrics tokens, and any variable named like a key, token,
        secret or password), so the result may be printed, at any verbosity, and looped over.
      - V(secret), a mapping of each service's name to its secret variables alone, as given; take it in a
        C(no_log) task.
      - V(all), every value as given (never set a fact from it in a task that is not C(no_log)).
    type: str
    choices: [public, secret, all]
    default: public
extends_documentation_fragment:
  - airgap.vllm.services
'''

EXAMPLES = r'''
instances: >-
  {{ airgap_vllm_services | airgap.vllm.service_vars(
       dict(names | zip(query('ansible.builtin.vars', *names))), vllm_service_plans) }}
# In a no_log task: the secret variables of each service, by its name.
secrets: >-
  {{ airgap_vllm_services | airgap.vllm.service_vars(
       dict(names | zip(query('ansible.builtin.vars', *names))), part='secret') }}
'''

RETURN = r'''
_value:
  description:
    - One item per service, in order - C(name), C(listed) (the service is one of C(airgap_vllm_services)),
      C(vars) (every variable given, with the service's own over them and C(vllm_service_name) its name; secrets
      redacted unless O(part=all)) and, with O(plans), C(plan).
    - With O(part=secret), a mapping of each service's name to its secret variables.
  type: raw
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._services import instances
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ValueError, prefix="airgap_vllm_services does not hold: ")
def _service_vars(services, host_vars, plans=None, part="public"):
    return instances(services or [], host_vars or {}, plans, part=part)


class FilterModule(object):
    def filters(self):
        return {'service_vars': _service_vars}
