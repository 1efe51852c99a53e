# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter naming the probes a preflight pass needs (plugins/module_utils/host/_preflight.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: preflight_probes
short_description: The host probes a preflight pass needs for its checks
description:
  - Each check reads some of the preflight role's probes (host facts, PCI, NVML, the toolkit binary, free disk,
    listening sockets, Docker's port publishers, our own containers); a pass runs only those of its checks,
    so a converged re-run's two passes do not read the same host twice.
  - Fails with a clear message on an unknown check name.
positional: skip_checks
options:
  _input:
    description: The checks of this pass (C(preflight_checks)).
    type: list
    elements: str
    required: true
  skip_checks:
    description: Checks skipped (C(preflight_skip_checks)); their probes are not needed.
    type: list
    elements: str
    default: []
'''

EXAMPLES = r'''
probes: "{{ ['os', 'disk'] | airgap.vllm.preflight_probes([]) }}"  # ['disk', 'host']
'''

RETURN = r'''
_value:
  description: Probe names, sorted - C(host), C(pci), C(nvml), C(toolkit), C(disk), C(tcp), C(port_owners), C(own_containers).
  type: list
  elements: str
'''

from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import probes_for
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ValueError, KeyError, TypeError, prefix='preflight_probes: ')
def preflight_probes(checks, skip_checks=None):
    return probes_for(checks, skip_checks or [])


class FilterModule(object):
    def filters(self):
        return {'preflight_probes': preflight_probes}
