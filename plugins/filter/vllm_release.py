# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vLLM release an image says it is, and the known release whose rules plan for it (module_utils/planner/_plan_common)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_release
short_description: The vLLM release an image says it is
description:
  - Reads what C(importlib.metadata.version('vllm')) printed in the image (the last line that holds a version;
    vLLM's log lines before it are ignored), or a dist-info directory name, and says which release the
    collection knows plans for it (C(_plan_common.KNOWN_RELEASES), C(release_rules)).
  - Text without a version (the image has no vLLM package metadata) gives C(version) empty, never an error.
options:
  _input:
    description: The output of the version read.
    type: str
    required: true
'''

EXAMPLES = r'''
release: "{{ read.stdout | airgap.vllm.vllm_release }}"
'''

RETURN = r'''
_value:
  description: >-
    C(version) (e.g. C(0.27.1+cpu), empty when unreadable), C(known) (a release the collection lists),
    C(rules) (the listed release whose rules plan for it, empty when unreadable), C(relation) (C(known), C(newer),
    C(between), C(older), C(prerelease), C(unreadable)).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import release_rules


def vllm_release(text):
    try:
        r = release_rules(str(text if text is not None else ""))
    except ValueError:
        return {"version": "", "known": False, "rules": "", "relation": "unreadable"}
    return {"version": r["version"], "known": r["known"], "rules": r["rules"]["release"], "relation": r["relation"]}


class FilterModule(object):
    def filters(self):
        return {'vllm_release': vllm_release}
