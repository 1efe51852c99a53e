# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Dockerfile of the control-node image built from a base (module_utils/bundle/_control_image.py, dockerfile)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: control_image_dockerfile
short_description: The Dockerfile that builds the control-node image from a base image, offline
description:
  - A virtual environment with the base's Python, ansible-core from the bundle's wheels (C(pip --no-index)), and
    this collection from the tarball C(ansible-galaxy collection build) made for the bundle, installed offline
    (module_utils/bundle/_control_image.py). The build context holds C(wheels/) and the tarball.
options:
  _input:
    description: The base verdict (airgap.vllm.control_image_verdict V(base)).
    type: dict
    required: true
  base:
    description: The base image.
    type: str
    required: true
  requirements:
    description: The pip requirements (C(bundle_build_wheels_requirements)).
    type: list
    elements: str
    required: true
  tarball:
    description: The collection tarball's file name in the context.
    type: str
    required: true
  version:
    description: The collection's version (a label).
    type: str
    default: ""
'''

EXAMPLES = r'''
content: "{{ verdict | airgap.vllm.control_image_dockerfile(base=base, requirements=reqs, tarball='airgap-vllm-0.1.0.tar.gz') }}"
'''

RETURN = r'''
_value:
  description: The Dockerfile's text.
  type: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._control_image import ControlImageError, dockerfile
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ControlImageError)
def control_image_dockerfile(base_verdict, base, requirements, tarball, version=""):
    return dockerfile(
        base, base_verdict.get("python_path"), base_verdict.get("python"), requirements, tarball, version=version
    )


class FilterModule(object):
    def filters(self):
        return {'control_image_dockerfile': control_image_dockerfile}
