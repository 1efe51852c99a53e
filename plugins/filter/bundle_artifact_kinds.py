# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The artifact kinds a bundle takes and the artifacts of another kind (module_utils/bundle/_bundle_pack.py, kind_check)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: bundle_artifact_kinds
short_description: The artifact kinds a bundle takes, and the artifacts of another kind
description:
  - Checks the kind of each C(bundle_build_artifacts) entry with the rule airgap.vllm.bundle_pack applies when it
    builds the bundle (module_utils/bundle/_bundle_pack.py), so the bundle_build role's preflight refuses an unknown kind
    before anything is read or saved, from the one list of kinds.
options:
  _input:
    description: The artifact list (C(bundle_build_artifacts)).
    type: list
    elements: raw
    required: true
'''

EXAMPLES = r'''
__bundle_build_kind_check: "{{ bundle_build_artifacts | airgap.vllm.bundle_artifact_kinds }}"
'''

RETURN = r'''
_value:
  description: The kinds and the problems.
  type: dict
  contains:
    kinds: {description: "Every kind a bundle takes, in order.", type: list, elements: str}
    problems:
      description: "One line per artifact whose kind is not one of them (C(artifact <src>: kind 'x' is not one of ...)); empty when none."
      type: list
      elements: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_pack import kind_check


def bundle_artifact_kinds(artifacts):
    return kind_check(artifacts)


class FilterModule(object):
    def filters(self):
        return {'bundle_artifact_kinds': bundle_artifact_kinds}
