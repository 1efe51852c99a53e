# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The input of the filters that read a host's vLLM services (module_utils/service/_services.py)."""

    # The operator's list, before service_instances resolves it.
    DOCUMENTATION = r'''
options:
  _input:
    description: The C(airgap_vllm_services) list.
    type: list
    elements: dict
    required: true
'''

    # The services as service_instances resolved them.
    RESOLVED = r'''
options:
  _input:
    description: The host's resolved services (C(__airgap_vllm_services.services)).
    type: list
    elements: dict
    required: true
'''
