#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_workloads
short_description: Stop our vLLM services and the driver's host users for a driver change, and start them again
version_added: 0.3.0
description:
  - With O(state=stopped), decides from our services (M(airgap.vllm.owned_services)), the host units that hold the
    driver (O(host_units), for example C(nvidia-persistenced)) and NVML's GPU processes what must stop before the
    driver's kernel modules can be unloaded, writes that to O(record_file) before the first stop, then stops the
    units (ours first) and disables those that were enabled, so a reboot cannot start them on the old driver.
    The foreign GPU containers it names in RV(park_containers) are parked by M(airgap.vllm.gpu_release).
  - With O(state=started), enables and starts again what the record lists (host units first, then our services) and
    removes the record once they started. Nothing recorded, nothing to do.
  - The decisions are module_utils/driver/_driver_upgrade.py's.
options:
  state:
    description: Stop for the driver change, or start again what a stop recorded.
    type: str
    choices: [stopped, started]
    default: stopped
  services:
    description: RV(airgap.vllm.owned_services#module:services) of the host (only units that carry our mark are stopped).
    type: dict
    default: {}
  host_units:
    description: Host units that hold the driver while they run; stopped only when active.
    type: list
    elements: str
    default: []
  gpus:
    description: RV(airgap.vllm.nvml_info#module:gpus) (their C(processes) tell who holds the GPU).
    type: list
    elements: dict
    default: []
  record_file:
    description: Where what was stopped is recorded (root only).
    type: path
    default: /var/lib/airgap-vllm/driver-upgrade.json
  from_version:
    description: The driver being replaced (recorded and reported).
    type: str
    default: ""
  to_version:
    description: The driver being installed (recorded and reported).
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Says what it would stop or start; stops, starts and writes nothing.
  diff_mode:
    support: none
    description: The record is reported in RV(record).
  idempotent:
    support: full
    description: Stopped units stay stopped; a second start finds no record.
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
- name: Stop what holds the driver
  airgap.vllm.driver_workloads:
    state: stopped
    services: "{{ owned.services }}"
    host_units: [nvidia-persistenced]
    gpus: "{{ nvml.gpus }}"
  register: stopped

- name: Start it again after the driver change
  airgap.vllm.driver_workloads:
    state: started
"""

RETURN = r"""
stopped_units:
  description: Units stopped (or, in check mode, that would be).
  returned: state=stopped
  type: list
  elements: str
park_containers:
  description: Foreign containers holding the GPU, for M(airgap.vllm.gpu_release).
  returned: state=stopped
  type: list
  elements: str
outside:
  description: GPU processes in no container (not ours to stop; the unload fails while they run).
  returned: state=stopped
  type: list
  elements: dict
started_units:
  description: Units started again (or, in check mode, that would be).
  returned: state=started
  type: list
  elements: str
lines:
  description: What happens, one readable line each.
  returned: always
  type: list
  elements: str
record:
  description: The record (what is started again afterwards).
  returned: always
  type: dict
"""

import json
import os

from ansible_collections.airgap.vllm.plugins.module_utils.driver._driver_upgrade import (
    DriverUpgradeError,
    gpu_processes,
    load_record,
    merge_record,
    new_record,
    start_order,
    workload_plan,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._files import write_atomic
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module


def unit_states(module, units):
    states = {}
    systemctl = module.get_bin_path('systemctl', required=True)
    for unit in units:
        rc, out, err = module.run_command([systemctl, 'show', '--property=ActiveState,UnitFileState,LoadState', unit])
        values = dict(line.split('=', 1) for line in out.splitlines() if '=' in line)
        states[unit] = values
    return states


def systemctl(module, *args):
    rc, out, err = module.run_command([module.get_bin_path('systemctl', required=True)] + list(args))
    if rc != 0:
        module.fail_json(msg='systemctl %s failed (rc %d): %s' % (' '.join(args), rc, (err or out).strip()))


def read_record(path):
    if not os.path.exists(path):
        return {}
    with open(path, 'rb') as handle:
        return load_record(handle.read().decode('utf-8'))


def stop(module, p):
    services = p['services'] or {}
    units = [n + '.service' for n in sorted(services) if (services[n] or {}).get('unit_ours')] + list(p['host_units'])
    states = unit_states(module, units)
    plan = workload_plan(services, states, p['host_units'], gpu_processes(p['gpus']))
    record = merge_record(read_record(p['record_file']), new_record(plan, states, p['from_version'], p['to_version']))
    result = dict(
        changed=bool(plan['stop_units']),
        stopped_units=plan['stop_units'],
        park_containers=plan['park_containers'],
        outside=plan['outside'],
        lines=plan['lines'],
        record=record,
    )
    if module.check_mode or not plan['stop_units']:
        return result
    # Record first: a run that dies after a stop still knows what to start again.
    write_atomic(
        p['record_file'],
        json.dumps(record, indent=2, sort_keys=True) + '\n',
        mode=0o600,
        makedirs=0o700,
        prefix='.driver-upgrade-',
    )
    for unit in plan['stop_units']:
        systemctl(module, 'stop', unit)
        if record['units'].get(unit, {}).get('enabled'):
            # Kept from grabbing the GPU at a boot on the old driver; enabled again with the start.
            systemctl(module, 'disable', '--quiet', unit)
    return result


def start(module, p):
    record = read_record(p['record_file'])
    order = start_order(record) if record else []
    lines = ['start %s again%s' % (u, ' (and enable it)' if record['units'][u].get('enabled') else '') for u in order]
    result = dict(changed=bool(record), started_units=order, lines=lines, record=record)
    if module.check_mode or not record:
        return result
    for unit in order:
        if record['units'][unit].get('enabled'):
            systemctl(module, 'enable', '--quiet', unit)
        systemctl(module, 'start', unit)
    os.unlink(p['record_file'])
    return result


@ansible_module(
    dict(
        state=dict(type='str', choices=['stopped', 'started'], default='stopped'),
        services=dict(type='dict', default={}),
        host_units=dict(type='list', elements='str', default=[]),
        gpus=dict(type='list', elements='dict', default=[]),
        record_file=dict(type='path', default='/var/lib/airgap-vllm/driver-upgrade.json'),
        from_version=dict(type='str', default=''),
        to_version=dict(type='str', default=''),
    ),
    wording='driver upgrade record {record_file}: {0}. It lists the units stopped for a driver change: start '
    'them by hand (systemctl enable --now UNIT) and delete the file',
    worded=(DriverUpgradeError, IOError, OSError, ValueError),
)
def main(module):
    return (stop if module.params['state'] == 'stopped' else start)(module, module.params)


if __name__ == '__main__':
    main()
