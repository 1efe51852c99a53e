# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vllm_observe role's controller files (module_utils/observe/_observe.py role_outputs): plan rules and scrape targets."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: vllm_observe_outputs
short_description: A host's plan-derived Prometheus alerts and its file_sd scrape targets
version_added: 0.3.0
description:
  - Used by the vllm_observe role. Each service's limits come from its recorded plan (C(--max-num-seqs),
    C(--gpu-memory-utilization)) and its load check (C(figures.p95_ttft_ms)); C(vllm_observe_services) overrides
    them. Metrics ports are the front door's (C(front_inputs)' rule).
options:
  host:
    description: The host's inventory name (the C(host) label of its targets and rules).
    type: str
    required: true
  address:
    description: The address Prometheus scrapes the host at.
    type: str
    required: true
  node_port:
    description: node_exporter's port (0 - no node target).
    type: int
    required: true
  instances:
    description: C(instances) of C(airgap.vllm.stage_state) read (each service's plan).
    type: dict
    default: {}
  loadchecks:
    description: Each service's C(loadcheck.json) as a mapping (or null).
    type: dict
    default: {}
  front:
    description: The host's C(vllm_front_*) per-service values when the front door is on; null when it is off.
    type: dict
  overrides:
    description: C(vllm_observe_services).
    type: list
    elements: dict
    default: []
  thresholds:
    description: C(vllm_observe_thresholds).
    type: dict
    default: {}
  dcgm_port:
    description: Port of NVIDIA's DCGM exporter on the host (0 - none).
    type: int
    default: 0
extends_documentation_fragment:
  - airgap.vllm.services.resolved
'''

EXAMPLES = r'''
outputs: "{{ __airgap_vllm_services.services | airgap.vllm.vllm_observe_outputs(inventory_hostname, '10.0.0.5', 9100) }}"
'''

RETURN = r'''
_value:
  description: C(services) (each service's limits and metrics port), C(base_rules) (the site's rule file at the
    deployment's thresholds), C(plan_rules) (the host's rule file), C(targets) (C(node), C(vllm) and C(dcgm)
    file_sd target groups).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.front._front_settings import FrontError
from ansible_collections.airgap.vllm.plugins.module_utils.observe._observe import ObserveError, role_outputs
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


# The filter is role_outputs itself (its arguments are the filter's), its errors the playbook's.
vllm_observe_outputs = filter_errors(ObserveError, FrontError, TypeError, ValueError, prefix='vllm_observe: ')(
    role_outputs
)


class FilterModule(object):
    def filters(self):
        return {'vllm_observe_outputs': vllm_observe_outputs}
