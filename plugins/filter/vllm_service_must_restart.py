# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the running vllm_service unit must restart (module_utils/service/_service_config.py must_restart)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_service_must_restart
short_description: Whether a vllm_service unit must restart to run its configuration
description:
  - Called by the vllm_service role (tasks/configure.yml) after its probe and its writes.
  - True when a write of this run changed a file of the configuration (O(written)), or when a file of it is newer
    than the start of the unit's running instance, or systemd has not loaded the unit file as written - what a run
    cut between the write and the restart leaves (the next run finds the files in place and writes nothing).
options:
  _input:
    description: The result of M(airgap.vllm.host_info) with the configuration's paths (filter
      airgap.vllm.vllm_service_config_expected; its files are judged, not its directories) and the unit in its units.
    type: dict
    required: true
  unit:
    description: The unit's name (C(vllm_service_name)).
    type: str
    required: true
  written:
    description: The registered results of the tasks that wrote them.
    type: list
    elements: dict
    default: []
'''

EXAMPLES = r'''
restart: "{{ probe | airgap.vllm.vllm_service_must_restart('vllm', [unit_written, env_written]) }}"
'''

RETURN = r'''
_value:
  description: Whether the unit must restart.
  type: bool
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._service_config import must_restart


def vllm_service_must_restart(probe, unit, written=None):
    return must_restart(probe, unit, list(written or []))[0]


class FilterModule(object):
    def filters(self):
        return {'vllm_service_must_restart': vllm_service_must_restart}
