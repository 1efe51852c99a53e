# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter: the daemon-reload hazard of the systemd cgroup driver and NVIDIA's remedy (module_utils/driver/_dev_char.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: dev_char_remedy
short_description: Decide whether a host needs NVIDIA's /dev/char remedy for the systemd cgroup driver
description:
  - With Docker's systemd cgroup driver, a C(systemctl daemon-reload) takes the GPU device nodes from running GPU
    containers ("Failed to initialize NVML - Unknown Error") unless each NVIDIA device node has a
    C(/dev/char/MAJOR:MINOR) link. NVIDIA's remedy - C(nvidia-ctk system create-dev-char-symlinks --create-all)
    now and a udev rule on the nvidia driver that runs it at boot.
  - Decided in module_utils/driver/_dev_char.py (unit-tested there).
positional: toolkit_version, dev_char, nvidia_ctk
options:
  _input:
    description: M(airgap.vllm.host_info)'s C(docker) facts (C(running), C(cgroup_driver), C(cgroup_version)).
    type: dict
    required: true
  toolkit_version:
    description: The installed nvidia-container-toolkit version-release; empty when unknown.
    type: str
    default: ''
  dev_char:
    description: M(airgap.vllm.host_info)'s C(dev_char) (C(nodes), C(links), C(missing)).
    type: dict
    default: {}
  nvidia_ctk:
    description: Absolute path of nvidia-ctk, as the udev rule runs it.
    type: str
    default: /usr/bin/nvidia-ctk
'''

EXAMPLES = r'''
remedy: "{{ probe.docker | airgap.vllm.dev_char_remedy('1.17.8-1', probe.dev_char) }}"
'''

RETURN = r'''
_value:
  description:
    - C(status) (exposed, safe or unknown), C(remedy) (whether the remedy applies), C(detail), C(error) (empty
      unless the installed toolkit is too old for the remedy), C(missing) (device nodes without a link),
      C(links) (run C(argv) now), C(rule) (install the udev rule), C(argv), C(content) (the rule file).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.driver._dev_char import remedy_plan
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ValueError, KeyError, TypeError, prefix='dev_char_remedy: ')
def dev_char_remedy(docker, toolkit_version='', dev_char=None, nvidia_ctk='/usr/bin/nvidia-ctk'):
    return remedy_plan(docker, toolkit_version, dev_char, nvidia_ctk)


class FilterModule(object):
    def filters(self):
        return {'dev_char_remedy': dev_char_remedy}
