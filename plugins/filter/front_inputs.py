# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The front door's per-service inputs (module_utils/front/_front_settings.py front_inputs): ports, clients as key hashes, limits, the keys apart."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: front_inputs
short_description: Each vLLM service's front door inputs, client keys hashed on the controller
version_added: 0.2.0
description:
  - Used by the vllm_front role. A service of C(airgap_vllm_services) may set its own C(vllm_front_port),
    C(vllm_front_clients), limits and metrics port; what it does not set it takes from the host. A service without its
    own port takes the host's plus its index.
  - Client and metrics keys are replaced by their SHA-256 digests (C(key_sha256)); the engine keys (the first of each
    service's C(vllm_service_api_keys)) come back apart in C(engine_keys), and the key of each service's first client
    that has one (the role's own check asks with it) in C(client_keys). Register the result with C(no_log).
options:
  host_values:
    description: The host's C(vllm_front_*) per-service variables and C(vllm_service_api_keys).
    type: dict
    required: true
  argvs:
    description: Each service's planned argv (its C(--max-num-seqs) is the total concurrency cap).
    type: dict
    default: {}
extends_documentation_fragment:
  - airgap.vllm.services.resolved
'''

EXAMPLES = r'''
inputs: "{{ __airgap_vllm_services.services | airgap.vllm.front_inputs(host_values, argvs) }}"
'''

RETURN = r'''
_value:
  description: C(services) (key hashes only), C(engine_keys) ({service - key}) and C(client_keys) ({service - the first
    client key, or empty}).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import (
    FrontError,
    front_inputs as _front_inputs,
)
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(FrontError)
def front_inputs(services, host_values, argvs=None):
    result = _front_inputs(services, host_values, argvs)
    result.pop("check")
    return result


class FilterModule(object):
    def filters(self):
        return {'front_inputs': front_inputs}
