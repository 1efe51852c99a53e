# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that runs every preflight decision (plugins/module_utils/host/_preflight.py) on what the role gathered."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: preflight_verdicts
short_description: Decide every preflight check from the facts the preflight role gathered
description:
  - OS, GPU on the PCI bus, driver version, NVML health, free memory on the selected GPUs, Docker's nvidia
    runtime, free disk and the service port (one verdict per service), decided in module_utils/host/_preflight.py
    (unit-tested there).
  - Several services (C(services) not empty) - each port free or published by that service's own container,
    free memory on the union of their GPUs with every one of their containers counted as ours.
  - Fails with a clear message on an unknown check name or a malformed C(services) list.
positional: settings
options:
  _input:
    description:
      - Gathered facts, keys C(host) (M(airgap.vllm.host_info) with C(pci=true)), C(distribution),
        C(distribution_major_version), C(nvml) (M(airgap.vllm.nvml_info)), C(toolkit_installed), C(toolkit_version) (the installed
        nvidia-container-toolkit version-release - with Docker's cgroup driver, the daemon-reload exposure in the
        C(docker_runtime) detail), C(disk_free)
        (M(airgap.vllm.host_info)'s C(disk), for C(settings.disk_requirements)) or C(disk) (one
        C({path, min_free_gb, rc, stdout}) per df run), C(listening_ports) (host_info's) or C(proc_net_tcp)
        (the text of C(/proc/net/tcp) and C(tcp6)), C(own_containers) (the
        registered loop of C(docker ps --quiet --filter name=^/NAME$) over container names, or
        a mapping of name to ids), C(port_owners) (the registered loop of C(docker ps --filter publish=PORT) over
        ports, or a mapping of port to container names).
      - Still read - C(own_container_ids) (ids counted as ours whatever their name) and C(port_publishers)
        (the container names publishing C(settings.port)).
    type: dict
    required: true
  settings:
    description:
      - C(checks), C(skip_checks), C(allow_best_effort_os), C(min_driver_version), C(gpu_memory_utilization),
        C(disk_requirements) (C({path, min_free_gb}) each, read with C(disk_free)),
        C(services) (a list of C({name, port, gpus}) with an optional C(gpu_memory_utilization) of the
        service's own; names and ports unique, empty C(gpus) = all GPUs), or
        when that is empty the one service of C(gpus) (indexes or UUIDs; empty = all), C(port),
        C(service_container_name).
    type: dict
    required: true
'''

EXAMPLES = r'''
verdicts: "{{ gathered | airgap.vllm.preflight_verdicts({'checks': ['os'], 'skip_checks': []}) }}"
ports: >-
  {{ gathered | airgap.vllm.preflight_verdicts({'checks': ['port'], 'services': [
       {'name': 'vllm', 'port': 8000, 'gpus': ['0']}, {'name': 'vllm-b', 'port': 8001, 'gpus': ['1']}]}) }}
'''

RETURN = r'''
_value:
  description:
    - C(records) (one C({check, status, detail, hint}) per check of this pass; status ok, fail, n/a or skipped),
      C(lines) (the summary table) and C(message) (every failing check with its fix; empty when none failed).
  type: dict
'''

from ansible_collections.airgap.vllm.plugins.module_utils.host._preflight import (
    evaluate,
    failure_message,
    summary_lines,
)
from ansible_collections.airgap.vllm.plugins.plugin_utils._filter import filter_errors


@filter_errors(ValueError, KeyError, TypeError, prefix='preflight_verdicts: ')
def preflight_verdicts(facts, settings):
    records = evaluate(facts, settings)
    return {'records': records, 'lines': summary_lines(records), 'message': failure_message(records)}


class FilterModule(object):
    def filters(self):
        return {'preflight_verdicts': preflight_verdicts}
