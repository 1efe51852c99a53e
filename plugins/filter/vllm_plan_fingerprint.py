# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fingerprint of a launch plan (what it puts into the unit) (module_utils/planner/_plan_refusal.py plan_fingerprint)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_plan_fingerprint
short_description: The fingerprint of a launch plan (what it puts into the unit)
description:
  - "sha256 of the plan's argv, Docker options and environment: equal plans, equal fingerprints."
options:
  _input:
    description: The result of M(airgap.vllm.vllm_launch_plan).
    type: dict
    required: true
'''

EXAMPLES = r'''
fingerprint: "{{ vllm_plan_result | airgap.vllm.vllm_plan_fingerprint }}"
'''

RETURN = r'''
_value:
  description: The sha256 hex digest, or null without a plan.
  type: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_refusal import plan_fingerprint


class FilterModule(object):
    def filters(self):
        return {'vllm_plan_fingerprint': plan_fingerprint}
