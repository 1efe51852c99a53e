# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The options of the modules that ask NVML (their argument spec: module_utils/host/_nvml.py's NVML_ARGUMENT_SPEC)."""

    DOCUMENTATION = r'''
options:
  library:
    description: Name or path of the NVML library to load.
    type: str
    default: libnvidia-ml.so.1
  driver_version_file:
    description:
      - File giving the loaded kernel module's version (C(/sys/module/nvidia/version) is tried next).
    type: path
    default: /proc/driver/nvidia/version
'''
