# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the host's HAProxy new enough for the front door (module_utils/front/_front_haproxy.py version_ok)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: front_haproxy_version
short_description: Whether the output of C(haproxy -vv) names a HAProxy the front door can use (>= 2.2, with Lua)
version_added: 0.2.0
description:
  - Used by the vllm_front role in host mode.
options:
  _input:
    description: The output of C(haproxy -vv) (its version, and Lua in its build options).
    type: str
    required: true
'''

EXAMPLES = r'''
verdict: "{{ haproxy_v.stdout | airgap.vllm.front_haproxy_version }}"
'''

RETURN = r'''
_value:
  description: A list - C([ok, sentence]).
  type: list
'''

from ansible_collections.airgap.vllm.plugins.module_utils.front._front_haproxy import version_ok


def front_haproxy_version(text):
    return list(version_ok(text))


class FilterModule(object):
    def filters(self):
        return {'front_haproxy_version': front_haproxy_version}
