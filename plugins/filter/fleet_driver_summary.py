# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which host of a rollout is on which driver (module_utils/_fleet_summary.py)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
name: fleet_driver_summary
short_description: One line per host of the rollout - its driver now and what this run did to it
description:
  - Used by site.yml's rollout at the end of each batch; says whether the rollout ends with this batch (a host
    failed, or every host was reached), which hosts it never reached, and per host the driver version and
    C(changed), C(unchanged), C(failed) or C(not reached).
options:
  _input:
    description: The play's hosts in order (ansible_play_hosts_all).
    type: list
    elements: str
    required: true
  batch:
    description: The hosts of this batch (ansible_play_batch).
    type: list
    elements: str
    required: true
  hostvars:
    description: The play's hostvars (each host's driver read, rollout marker and driver stage results).
    type: dict
    required: true
  unreached_reads:
    description: nvml_info results for the hosts not reached (a loop's results, C(item) the host).
    type: list
    elements: dict
'''

EXAMPLES = r'''
summary: "{{ ansible_play_hosts_all | airgap.vllm.fleet_driver_summary(ansible_play_batch, hostvars) }}"
'''

RETURN = r'''
_value:
  description: C(ends_here) (bool), C(unreached) (hosts), C(hosts) (host -> driver_version, outcome, changed)
    and C(lines) (one per host).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils._fleet_summary import fleet_driver_summary


class FilterModule(object):
    def filters(self):
        return {'fleet_driver_summary': fleet_driver_summary}
