# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What bundle_build does about the control-node image (module_utils/bundle/_control_image.py, plan)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: control_image_plan
short_description: Whether the bundle carries a control-node image, which one, and its manifest artifact
description:
  - From the bundle_build role's variables, whether a control-node image goes into the bundle, whether the role
    builds it from a base image or takes the operator's, the name:tag C(docker save) saves, and the manifest
    artifact (kind C(control), which the bundle role never stages to a server). The rule is
    module_utils/bundle/_control_image.py's (issue 47).
options:
  _input:
    description: C(bundle_build_control_image).
    type: bool
    required: true
  source:
    description: An image here to take as it is (C(bundle_build_control_image_source)).
    type: str
    default: ""
  base:
    description: A local image to build one from (C(bundle_build_control_image_base)).
    type: str
    default: ""
  version:
    description: The collection's version (the built image's tag and the artifact's version).
    type: str
    default: ""
  wheels:
    description: Whether the bundle carries ansible-core wheels (a build installs from them).
    type: bool
    default: true
  wheel_pythons:
    description: The Pythons the bundle has wheels for (X.Y).
    type: list
    elements: str
    default: []
'''

EXAMPLES = r'''
__bundle_build_control: >-
  {{ bundle_build_control_image | airgap.vllm.control_image_plan(source=bundle_build_control_image_source,
     base=bundle_build_control_image_base, version=__bundle_build_collection_version) }}
'''

RETURN = r'''
_value:
  description: The plan.
  type: dict
  contains:
    enabled: {description: "Whether the bundle carries the image.", type: bool}
    build: {description: "Whether the role builds it from the base.", type: bool}
    image: {description: "The name:tag saved into the bundle.", type: str}
    tag: {description: "The tag a build gives (airgap-vllm-control:<version>).", type: str}
    artifact: {description: "The manifest artifact (kind, name, version, image), or None.", type: dict}
    probe: {description: "The shell script that reports what an image holds (for the verdict).", type: str}
    problems: {description: "Why not, each with the variable to set; empty when none.", type: list, elements: str}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.bundle._control_image import PROBE, plan


def control_image_plan(enabled, source="", base="", version="", wheels=True, wheel_pythons=None):
    out = plan(enabled, source=source, base=base, version=version, wheels=wheels, wheel_pythons=wheel_pythons or ())
    out["probe"] = PROBE
    return out


class FilterModule(object):
    def filters(self):
        return {'control_image_plan': control_image_plan}
