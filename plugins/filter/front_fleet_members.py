# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet balancer's members, each with the address it is reached at (module_utils/front/_front.py fleet_members)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: front_fleet_members
short_description: The fleet balancer's members, each with the address it is reached at
description:
  - Used by the vllm_front role (vars/main.yml C(__vllm_front_fleet_members)) on a fleet balancer.
  - C(vllm_front_fleet_members) as it is when it names any member. Else every host of O(names) (the group
    C(vllm_servers)), in its order, at its first C(vllm_front_addresses) entry, else its default IPv4 address (the
    facts of the rollout), else its C(ansible_host), else its name. Only a missing value falls through to the next.
options:
  _input:
    description: C(vllm_front_fleet_members) ([{name, address}]; empty - the hosts of O(names)).
    type: list
    elements: dict
    required: true
  names:
    description: The member hosts' inventory names (C(groups['vllm_servers'])).
    type: list
    elements: str
    required: true
  hostvars:
    description: Ansible's C(hostvars) (read are each member's C(vllm_front_addresses), C(ansible_facts) and
      C(ansible_host)).
    type: dict
    required: true
'''

EXAMPLES = r'''
members: "{{ vllm_front_fleet_members | airgap.vllm.front_fleet_members(groups['vllm_servers'] | default([]), hostvars) }}"
'''

RETURN = r'''
_value:
  description: The members as [{name, address}].
  type: list
  elements: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.front._front import fleet_members
from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import FrontError
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(FrontError)
def front_fleet_members(members, names, hostvars):
    return fleet_members(members, names, hostvars)


class FilterModule(object):
    def filters(self):
        return {'front_fleet_members': front_fleet_members}
