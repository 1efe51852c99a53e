#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_modules
short_description: Unload the NVIDIA kernel modules in order, naming what holds them, or load the driver
version_added: 0.3.0
description:
  - With O(state=absent), reads the loaded modules from O(modules_file) and runs C(rmmod) on the driver's modules,
    dependents first (C(nvidia_drm), C(nvidia_modeset), C(nvidia_uvm), C(nvidia), after any other module that uses
    them). A module still in use is tried again until O(wait) seconds have passed (a stopped container's process
    takes a moment to exit); then the module returns RV(unloaded)=false with RV(failed_module) and RV(holders) -
    the modules that use it, NVML's GPU processes and their containers, and rmmod's own words. It never fails
    for that - the role decides between a reboot and a failure.
  - With O(state=present), runs C(modprobe) for O(load) when it is not loaded.
  - The order and the holder text are module_utils/driver/_driver_upgrade.py's.
options:
  state:
    description: Unload the driver's modules, or load the driver.
    type: str
    choices: [absent, present]
    default: absent
  modules_file:
    description: The kernel's list of loaded modules.
    type: path
    default: /proc/modules
  wait:
    description: Seconds to keep trying a module that is in use.
    type: int
    default: 60
  load:
    description: Module to load with O(state=present).
    type: str
    default: nvidia
  driver_version_file:
    description: Where the loaded driver reports its version (NVML's processes are read only to name holders).
    type: path
    default: /proc/driver/nvidia/version
attributes:
  check_mode:
    support: full
    description: Says which modules it would unload or load; runs neither rmmod nor modprobe.
  diff_mode:
    support: none
    description: Nothing to show as a diff.
  idempotent:
    support: full
    description: Nothing loaded (absent) or already loaded (present) changes nothing.
author:
  - airgap.vllm maintainers (@airgap-vllm)
"""

EXAMPLES = r"""
- name: Unload the old driver's modules
  airgap.vllm.driver_modules:
    state: absent
  register: unload

- name: Load the new driver
  airgap.vllm.driver_modules:
    state: present
"""

RETURN = r"""
order:
  description: The driver's modules that were loaded, in unload order.
  returned: always
  type: list
  elements: str
removed:
  description: Modules unloaded (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
unloaded:
  description: Whether none of the driver's modules is left loaded (O(state=absent)).
  returned: always
  type: bool
failed_module:
  description: The module that stayed in use.
  returned: when unloaded is false
  type: str
holders:
  description: What holds it, readable.
  returned: when unloaded is false
  type: str
seconds:
  description: Seconds the unload or load took.
  returned: always
  type: float
"""

import time

from ansible_collections.airgap.vllm.plugins.module_utils.driver._driver_upgrade import (
    gpu_processes,
    holder_text,
    nvidia_modules,
    parse_proc_modules,
)
from ansible_collections.airgap.vllm.plugins.module_utils.common._module import ansible_module
from ansible_collections.airgap.vllm.plugins.module_utils.host._nvml import collect


def read_modules(path):
    try:
        with open(path) as handle:
            return parse_proc_modules(handle.read())
    except (IOError, OSError):
        return {}


def nvml_processes(driver_version_file):
    try:
        return gpu_processes(collect(driver_version_file=driver_version_file).get('gpus'))
    except Exception:  # pylint: disable=broad-except
        return []  # naming holders is best effort: a broken NVML must not hide rmmod's own words


def unload(module, p):
    started = time.time()
    modules = read_modules(p['modules_file'])
    order = nvidia_modules(modules)
    result = dict(changed=False, order=order, removed=[], unloaded=not order)
    if module.check_mode or not order:
        result.update(removed=order if module.check_mode else [], seconds=0.0)
        return result
    rmmod = module.get_bin_path('rmmod', required=True)
    deadline = started + p['wait']
    pending = list(order)
    error = ''
    while pending:
        name = pending[0]
        if name not in read_modules(p['modules_file']):
            pending.pop(0)
            continue
        rc, out, err = module.run_command([rmmod, name])
        if rc == 0:
            result['removed'].append(name)
            result['changed'] = True
            pending.pop(0)
            continue
        error = (err or out).strip()
        if time.time() >= deadline:
            break
        time.sleep(1)
    left = nvidia_modules(read_modules(p['modules_file']))
    result['unloaded'] = not left
    if left:
        name = pending[0] if pending else left[0]
        result['failed_module'] = name
        result['holders'] = holder_text(
            name, read_modules(p['modules_file']), nvml_processes(p['driver_version_file']), error
        )
    result['seconds'] = round(time.time() - started, 1)
    return result


def load(module, p):
    started = time.time()
    modules = read_modules(p['modules_file'])
    name = p['load']
    result = dict(changed=name not in modules, order=[], removed=[], unloaded=False)
    if name in modules or module.check_mode:
        result['seconds'] = 0.0
        return result
    rc, out, err = module.run_command([module.get_bin_path('modprobe', required=True), name])
    if rc != 0:
        result['changed'] = False
        module.fail_json(msg='modprobe %s failed (rc %d): %s' % (name, rc, (err or out).strip()), **result)
    result['seconds'] = round(time.time() - started, 1)
    return result


@ansible_module(
    dict(
        state=dict(type='str', choices=['absent', 'present'], default='absent'),
        modules_file=dict(type='path', default='/proc/modules'),
        wait=dict(type='int', default=60),
        load=dict(type='str', default='nvidia'),
        driver_version_file=dict(type='path', default='/proc/driver/nvidia/version'),
    ),
)
def main(module):
    p = module.params
    return unload(module, p) if p['state'] == 'absent' else load(module, p)


if __name__ == '__main__':
    main()
