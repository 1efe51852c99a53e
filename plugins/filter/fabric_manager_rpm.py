# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Fabric Manager RPM the nvidia_driver role installs (module_utils/driver/_fabric_manager.py, rpm_choice)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: fabric_manager_rpm
short_description: The Fabric Manager RPM the nvidia_driver role installs
description:
  - From C(nvidia_driver_fabric_manager_rpm) (empty means derive it), the bundle role's fact C(bundle_staged) and
    the driver version, the RPM file on the target.
  - "The operator's path when set; else the staged C(fabricmanager) entry that holds the RPM of that version (NVIDIA's
    file name for it, else for a renamed file the entry's C(version), never a C(-devel) or NSCQ RPM: the rule
    airgap.vllm.validate checks the bundle's manifest with); else NVIDIA's file name under the staging directory."
options:
  _input:
    description: C(nvidia_driver_fabric_manager_rpm); empty or null derives it.
    type: str
    required: true
  staged:
    description: The C(bundle_staged) fact (kind to list of artifacts), or null.
    type: dict
    required: true
  version:
    description: The driver version.
    type: str
    required: true
  stage_dir:
    description: The directory the bundle role stages artifacts to (the fallback's directory).
    type: str
    required: true
'''

EXAMPLES = r'''
__nvidia_driver_fm_rpm: >-
  {{ nvidia_driver_fabric_manager_rpm | airgap.vllm.fabric_manager_rpm(bundle_staged | default({}),
  nvidia_driver_version, '/var/lib/airgap-vllm/bundle/artifacts') }}
'''

RETURN = r'''
_value:
  description: The choice.
  type: dict
  contains:
    path: {description: The RPM file on the target., type: str}
    file_name: {description: "NVIDIA's file name of the RPM of O(version) (C(nvidia-fabric-manager-<version>-1.x86_64.rpm)), for messages.", type: str}
    source: {description: "Where the path came from: V(setting), V(staged) or V(default).", type: str}
    package: {description: "The RPM's package name (C(nvidia-fabric-manager)): the role reads, installs and removes it by this name.", type: str}
    unit: {description: "The systemd unit the RPM ships (C(nvidia-fabricmanager.service)).", type: str}
'''

from ansible_collections.airgap.vllm.plugins.module_utils.driver._fabric_manager import rpm_choice


def fabric_manager_rpm(setting, staged, version, stage_dir):
    return rpm_choice(setting, staged, version, stage_dir)


class FilterModule(object):
    def filters(self):
        return {'fabric_manager_rpm': fabric_manager_rpm}
