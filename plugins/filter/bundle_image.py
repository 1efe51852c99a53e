# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bundle's staged image artifact of the engine or of the front door, by name (module_utils/bundle/_bundle_images.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: bundle_image
short_description: The bundle's staged image artifact of the engine or of the front door, by name
description:
  - Selects from the bundle role's fact C(bundle_staged) the image artifact of V(engine) (named C(vllm-openai); else
    the one image not named C(haproxy)) or of V(front) (named C(haproxy)), never by position.
  - Returns the artifact (C(name), C(version), C(path), C(sha256), C(size)), or an empty dict when the bundle has none.
  - Several engine candidates and none named C(vllm-openai) is an error naming them.
options:
  _input:
    description: The C(bundle_staged) fact (kind to list of artifacts).
    type: dict
    required: true
  role:
    description: Whose image.
    type: str
    choices: [engine, front]
    required: true
'''

EXAMPLES = r'''
vllm_image_archive: "{{ ((bundle_staged | default({})) | airgap.vllm.bundle_image('engine')).path | default('/srv/vllm.tar') }}"
'''

RETURN = r'''
_value:
  description: The staged artifact, or an empty dict.
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._bundle_images import BundleImageError, select_image
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(BundleImageError)
def _bundle_image(staged, role):
    return select_image(staged, role)


class FilterModule(object):
    def filters(self):
        return {'bundle_image': _bundle_image}
