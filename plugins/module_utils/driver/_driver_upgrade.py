# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A driver change on a host that serves: who holds the GPU, what is stopped, in which order modules go.

The kernel refuses to unload nvidia while anything holds it ("rmmod: ERROR: Module nvidia is in use"), and the
.run refuses to install over a loaded module of another version. So before an upgrade the nvidia_driver role
stops, in this order: our vLLM services (their units; the engine confirms its plan again when the service
stage runs), host units that hold the driver (nvidia-persistenced), and parks foreign GPU containers the way
gpu_free does (airgap.vllm.gpu_release, its own record). Then the modules go dependents first
(MODULE_ORDER), the new driver is installed and loaded, and everything stopped is started again from the
record written before the first stop (WorkloadRecord), so an interrupted run still puts it back.

Pure functions; the modules airgap.vllm.driver_workloads and airgap.vllm.driver_modules do the I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# Unload order, dependents first: nvidia_drm uses nvidia_modeset, which uses nvidia; nvidia_uvm uses nvidia.
MODULE_ORDER = ('nvidia_drm', 'nvidia_modeset', 'nvidia_uvm', 'nvidia')
RECORD_VERSION = 1
# systemd ActiveState values of a unit that runs (or is about to).
RUNNING_STATES = ('active', 'activating', 'reloading', 'deactivating')


class DriverUpgradeError(Exception):
    """A record or input of the wrong shape; the message says what to do."""


def parse_proc_modules(text):
    """{name: {'refcount': int, 'users': [names], 'state': str}} from /proc/modules' text.

    A line: `nvidia 54525952 2 nvidia_uvm,nvidia_modeset, Live 0x0 (POE)`; users '-' means none.
    """
    modules = {}
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        try:
            refcount = int(parts[2])
        except ValueError:
            refcount = -1
        users = parts[3] if len(parts) > 3 else '-'
        modules[parts[0]] = {
            'refcount': refcount,
            'users': [u for u in users.split(',') if u and u != '-'],
            'state': parts[4] if len(parts) > 4 else '',
        }
    return modules


def nvidia_modules(modules):
    """The loaded modules of the driver and those that use them (nvidia_peermem, gdrdrv...), in unload order.

    Modules outside MODULE_ORDER that use one of ours go first (they would keep ours in use), each after its own
    users; then MODULE_ORDER's loaded ones.
    """
    ours = [m for m in MODULE_ORDER if m in modules]
    extra = []

    def visit(name, depth=0):
        for user in (modules.get(name) or {}).get('users', []):
            if user in MODULE_ORDER or user in extra or depth > 16:
                continue
            visit(user, depth + 1)
            if user not in extra:
                extra.append(user)

    for name in ours:
        visit(name)
    return extra + ours


def holder_text(name, modules, processes, rmmod_error=''):
    """One line naming what holds module `name`: other modules, the GPU processes (with their containers), the
    kernel's own words."""
    info = modules.get(name) or {}
    parts = []
    users = [u for u in info.get('users', []) if u in modules]
    if users:
        parts.append('used by module(s) %s' % ', '.join(users))
    held = [_process_text(p) for p in processes or []]
    if held:
        parts.append('GPU process(es) %s' % '; '.join(held))
    if info.get('refcount', 0) > len(users) and not held:
        parts.append(
            '%d reference(s) no process on this host accounts for (a leaked reference or a process '
            'NVML cannot see)' % (info['refcount'] - len(users))
        )
    if rmmod_error:
        parts.append('rmmod said: %s' % rmmod_error.strip())
    return '%s: %s' % (name, ', '.join(parts) or 'nothing visible holds it')


def _process_text(process):
    text = 'pid %s (%s' % (process.get('pid'), process.get('name') or '?')
    if process.get('container_name') or process.get('container_id'):
        text += ', container %s' % (process.get('container_name') or process['container_id'][:12])
    mib = int((process.get('used_memory') or 0) // 1048576)
    return text + (', %d MiB)' % mib if mib else ')')


def gpu_processes(nvml_gpus):
    """Every compute process of every GPU (nvml_info's gpus[].processes), each pid once."""
    seen, out = set(), []
    for gpu in nvml_gpus or []:
        for process in gpu.get('processes') or []:
            if process.get('pid') in seen:
                continue
            seen.add(process.get('pid'))
            out.append(process)
    return out


def workload_plan(services, unit_states, host_units, processes):
    """What must stop before the driver's modules can go.

    services: owned_services' `services` ({name: {unit, unit_ours, containers, ...}}); unit_states: {unit name:
    {'ActiveState', 'UnitFileState'}} of our service units and of `host_units` (systemctl show); host_units: host
    units that hold the driver when they run (nvidia-persistenced); processes: gpu_processes() of NVML.

    Returns {'stop_units': [unit names, ours first, then host ones], 'services': [our service names stopped],
    'park_containers': [foreign container ids holding the GPU], 'outside': [processes in no container: not ours to
    stop], 'ours_holding': [our service names whose container holds the GPU], 'lines': [what happens, readable]}.
    """
    stop_units, stopped_services, lines = [], [], []
    our_containers = {}
    for name in sorted(services or {}):
        svc = services[name] or {}
        if not svc.get('unit_ours'):
            continue
        for cid in svc.get('containers') or []:
            our_containers[cid] = name
        unit = name + '.service'
        state = (unit_states or {}).get(unit) or {}
        if state.get('ActiveState') in RUNNING_STATES:
            stop_units.append(unit)
            stopped_services.append(name)
            lines.append(
                'stop our service %s (systemctl stop %s; started again after the driver change)' % (name, unit)
            )
    for unit in host_units or []:
        state = (unit_states or {}).get(unit) or {}
        if state.get('ActiveState') in RUNNING_STATES and unit not in stop_units:
            stop_units.append(unit)
            lines.append('stop %s (holds the driver open; started again after)' % unit)
    park, outside, ours_holding = [], [], []
    for process in processes or []:
        cid = process.get('container_id')
        if not cid:
            outside.append(process)
            continue
        owner = _owner(cid, our_containers)
        if owner:
            if owner not in ours_holding:
                ours_holding.append(owner)
            continue
        if cid not in park:
            park.append(cid)
            lines.append(
                'park foreign GPU container %s (airgap.vllm.gpu_release; put back after)'
                % (process.get('container_name') or cid[:12])
            )
    for process in outside:
        lines.append(
            'cannot stop %s: it runs outside any container and is not ours; the unload fails while it '
            'runs' % _process_text(process)
        )
    for name in ours_holding:
        if name not in stopped_services:
            lines.append(
                'our service %s holds the GPU but its unit is not running: its container is stopped with '
                'the unit name' % name
            )
    return {
        'stop_units': stop_units,
        'services': stopped_services,
        'park_containers': park,
        'outside': outside,
        'ours_holding': ours_holding,
        'lines': lines,
    }


def _owner(cid, our_containers):
    for full, name in our_containers.items():
        if full == cid or (len(cid) >= 12 and full.startswith(cid)) or (len(full) >= 12 and cid.startswith(full)):
            return name
    return None


def new_record(plan, unit_states, from_version, to_version):
    """The record written before the first stop: what to start and enable again afterwards."""
    units = {}
    for unit in plan['stop_units']:
        state = (unit_states or {}).get(unit) or {}
        units[unit] = {'enabled': state.get('UnitFileState') == 'enabled'}
    return {
        'version': RECORD_VERSION,
        'units': units,
        'services': list(plan['services']),
        'from_driver': from_version or '',
        'to_driver': to_version or '',
    }


def merge_record(old, new):
    """A re-run after an interrupted upgrade keeps what the first run recorded (it saw the units running)."""
    if not old:
        return new
    merged = json.loads(json.dumps(old))
    for unit, info in new['units'].items():
        merged['units'].setdefault(unit, info)
    for name in new['services']:
        if name not in merged['services']:
            merged['services'].append(name)
    merged['to_driver'] = new.get('to_driver') or merged.get('to_driver', '')
    return merged


def load_record(text):
    """The record's dict ({} when there is none); DriverUpgradeError on a damaged one."""
    if text is None or not text.strip():
        return {}
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise DriverUpgradeError('not valid JSON (%s)' % exc)
    if not isinstance(record, dict) or record.get('version') != RECORD_VERSION:
        raise DriverUpgradeError('not a version %d driver upgrade record' % RECORD_VERSION)
    units = record.get('units')
    if not isinstance(units, dict) or not all(isinstance(v, dict) for v in units.values()):
        raise DriverUpgradeError('"units" must map unit names to {"enabled": bool}')
    record.setdefault('services', [])
    return record


def start_order(record):
    """Units to start again: host units first (nvidia-persistenced before the engines), then our services."""
    services = set(s + '.service' for s in record.get('services') or [])
    units = sorted(record.get('units') or {})
    return [u for u in units if u not in services] + [u for u in units if u in services]
