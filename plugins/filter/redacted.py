# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A value with its secrets redacted (module_utils/common/_secrets.py redacted)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: redacted
short_description: A value with every secret it holds replaced by C((hidden))
version_added: 0.2.0
description:
  - Walks mappings and lists; whatever sits under a secret name (C(vllm_service_api_keys),
    C(vllm_service_extra_env), C(vllm_front_clients), C(vllm_front_metrics_tokens), or a name saying key, token,
    secret or password that is not a path, digest or count) is replaced by C((hidden)). Names and limits of
    clients stay, an empty list or mapping stays empty, so what is set can still be read.
  - The rule is module_utils/common/_secrets.py's, the one home of which variables hold secrets.
options:
  _input:
    description: Any value, e.g. the host's resolved services with their settings.
    type: raw
    required: true
'''

EXAMPLES = r'''
services_public: "{{ __airgap_vllm_services | airgap.vllm.redacted }}"
'''

RETURN = r'''
_value:
  description: The value, its secrets redacted.
  type: raw
'''

from ansible_collections.airgap.vllm.plugins.module_utils.common._secrets import redacted


class FilterModule(object):
    def filters(self):
        return {'redacted': redacted}
