# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host has staged once a delta bundle is staged over its bundle (module_utils/service/_release.merge_staged)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_release_staged
short_description: The staged artifacts once a delta bundle (the new image alone) is staged beside the earlier bundle
description:
  - An entry of the delta replaces the earlier entry of its kind with the same name; every other earlier entry stays
    (the model already on the host, the driver, the proxy's image), so stages run later still find them.
  - Decided in C(plugins/module_utils/service/_release.py) (C(merge_staged)).
options:
  _input:
    description: The C(bundle_staged) the host recorded before the delta (kind to entries).
    type: dict
    required: true
  delta:
    description: The delta bundle's C(bundle_staged).
    type: dict
    required: true
'''

EXAMPLES = r'''
bundle_staged: "{{ __previous_staged | airgap.vllm.vllm_release_staged(bundle_staged) }}"
'''

RETURN = r'''
_value:
  description: Kind to entries (C(name), C(version), C(path), C(sha256), C(size)).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.service._release import ReleaseError, merge_staged
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ReleaseError, prefix="the staged bundle cannot be merged: ")
def _vllm_release_staged(previous, delta):
    return merge_staged(previous, delta)


class FilterModule(object):
    def filters(self):
        return {'vllm_release_staged': _vllm_release_staged}
