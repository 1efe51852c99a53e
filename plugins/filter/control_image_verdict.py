# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether an image will do as a base or as the control node (module_utils/bundle/_control_image.py, verdict)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: control_image_verdict
short_description: Whether an image will do as the base of the control-node image, or as the control node itself
description:
  - Reads what the probe of airgap.vllm.control_image_plan printed inside an image (its Pythons, ssh, ansible-core,
    the collection) and says whether it will do (module_utils/bundle/_control_image.py).
  - As a V(base), the newest Python >= 3.10 that the bundle has wheels for, with its venv module, and ssh.
  - As the V(control) node, a Python >= 3.10, ansible-core within the collection's C(requires_ansible), this
    collection's version installed, and ssh.
options:
  _input:
    description: The probe's output.
    type: str
    required: true
  role:
    description: What the image is for.
    type: str
    choices: [base, control]
    required: true
  image:
    description: The image's name, for the messages.
    type: str
    default: ""
  requires_ansible:
    description: The collection's ansible-core range (meta/runtime.yml), for V(control).
    type: str
    default: ""
  collection_version:
    description: This collection's version, for V(control).
    type: str
    default: ""
  wheel_pythons:
    description: The Pythons the bundle has wheels for, for V(base).
    type: list
    elements: str
    default: []
'''

EXAMPLES = r'''
__bundle_build_base_verdict: "{{ probe.stdout | airgap.vllm.control_image_verdict('base', image=base, wheel_pythons=['3.11']) }}"
'''

RETURN = r'''
_value:
  description: The verdict.
  type: dict
  contains:
    python: {description: "The Python X.Y chosen (empty when none fits).", type: str}
    python_path: {description: "Its path in the image.", type: str}
    ssh: {description: "The ssh client's path (empty when none).", type: str}
    ansible_core: {description: "ansible-core's version (empty when none).", type: str}
    collection: {description: "The installed airgap.vllm's version (empty when none).", type: str}
    problems: {description: "Why the image will not do; empty when it will.", type: list, elements: str}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._control_image import ControlImageError, verdict
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ControlImageError)
def control_image_verdict(text, role, image="", requires_ansible="", collection_version="", wheel_pythons=None):
    return verdict(
        text,
        role,
        image=image,
        requires_ansible=requires_ansible,
        collection_version=collection_version,
        wheel_pythons=wheel_pythons or (),
    )


class FilterModule(object):
    def filters(self):
        return {'control_image_verdict': control_image_verdict}
