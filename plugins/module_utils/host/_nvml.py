# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only GPU facts straight from libnvidia-ml through ctypes (no pip packages on targets).

Every NVML failure becomes a structured result (nvml_state + error code/name), never a traceback.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import os
import re

from ansible_collections.airgap.vllm.plugins.module_utils.common._files import read_text
from ansible_collections.airgap.vllm.plugins.module_utils.common._text import as_text as _text

NVML_SUCCESS = 0
NVML_ERROR_NAMES = {
    1: 'NVML_ERROR_UNINITIALIZED',
    2: 'NVML_ERROR_INVALID_ARGUMENT',
    3: 'NVML_ERROR_NOT_SUPPORTED',
    4: 'NVML_ERROR_NO_PERMISSION',
    5: 'NVML_ERROR_ALREADY_INITIALIZED',
    6: 'NVML_ERROR_NOT_FOUND',
    7: 'NVML_ERROR_INSUFFICIENT_SIZE',
    8: 'NVML_ERROR_INSUFFICIENT_POWER',
    9: 'NVML_ERROR_DRIVER_NOT_LOADED',
    10: 'NVML_ERROR_TIMEOUT',
    11: 'NVML_ERROR_IRQ_ISSUE',
    12: 'NVML_ERROR_LIBRARY_NOT_FOUND',
    13: 'NVML_ERROR_FUNCTION_NOT_FOUND',
    14: 'NVML_ERROR_CORRUPTED_INFOROM',
    15: 'NVML_ERROR_GPU_IS_LOST',
    16: 'NVML_ERROR_RESET_REQUIRED',
    17: 'NVML_ERROR_OPERATING_SYSTEM',
    18: 'NVML_ERROR_LIB_RM_VERSION_MISMATCH',
    19: 'NVML_ERROR_IN_USE',
    20: 'NVML_ERROR_MEMORY',
    21: 'NVML_ERROR_NO_DATA',
    22: 'NVML_ERROR_VGPU_ECC_NOT_ENABLED',
    23: 'NVML_ERROR_INSUFFICIENT_RESOURCES',
    24: 'NVML_ERROR_FREQ_NOT_SUPPORTED',
    25: 'NVML_ERROR_ARGUMENT_VERSION_MISMATCH',
    26: 'NVML_ERROR_DEPRECATED',
    27: 'NVML_ERROR_NOT_READY',
    28: 'NVML_ERROR_GPU_NOT_FOUND',
    29: 'NVML_ERROR_INVALID_STATE',
    999: 'NVML_ERROR_UNKNOWN',
}
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_VALUE_NOT_AVAILABLE_ULL = 0xFFFFFFFFFFFFFFFF

# What a read-only caller can do about each init failure.
STATE_BY_INIT_ERROR = {
    NVML_ERROR_DRIVER_NOT_LOADED: 'driver_not_loaded',
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: 'version_mismatch',
    NVML_ERROR_LIBRARY_NOT_FOUND: 'absent',
}

HINTS = {
    'absent': 'libnvidia-ml.so.1 is not installed: install the NVIDIA driver (nvidia_driver role).',
    'driver_not_loaded': 'The NVIDIA kernel module is not loaded: check "dkms status" and '
    '"modprobe nvidia" (a missing module for the running kernel, nouveau still '
    'bound, or Secure Boot refusing the module), or reboot after a driver install.',
    'version_mismatch': 'The loaded kernel module ({kernel}) is not the version of libnvidia-ml ({library}): '
    'reboot, or stop GPU users (nvidia-persistenced, GPU containers) and unload the old '
    'module (rmmod nvidia_drm nvidia_modeset nvidia_uvm nvidia) so the new one loads.',
    'error': 'NVML failed with {name}: see nvidia-smi and the kernel log (dmesg).',
}


class NvmlError(Exception):
    """An NVML call returned something other than NVML_SUCCESS."""

    def __init__(self, code, function, message=None):
        self.code = code
        self.function = function
        self.name = NVML_ERROR_NAMES.get(code, 'NVML_ERROR_%d' % code)
        self.message = message or self.name
        super(NvmlError, self).__init__('%s failed: %s (%d)' % (function, self.message, code))

    @classmethod
    def dlopen(cls, exc):
        """The library could not be loaded (an OSError of ctypes.CDLL), as an NVML error."""
        return cls(NVML_ERROR_LIBRARY_NOT_FOUND, 'dlopen', str(exc))

    def record(self, result, state):
        """Sets result's nvml_state and nvml_error (the one place the error dict is built); returns result."""
        result['nvml_state'] = state
        result['nvml_error'] = {
            'code': self.code,
            'name': self.name,
            'message': self.message,
            'function': self.function,
        }
        return result


class PciInfo(ctypes.Structure):
    _fields_ = [
        ('busIdLegacy', ctypes.c_char * 16),
        ('domain', ctypes.c_uint),
        ('bus', ctypes.c_uint),
        ('device', ctypes.c_uint),
        ('pciDeviceId', ctypes.c_uint),
        ('pciSubSystemId', ctypes.c_uint),
        ('busId', ctypes.c_char * 32),
    ]


class Memory(ctypes.Structure):
    _fields_ = [('total', ctypes.c_ulonglong), ('free', ctypes.c_ulonglong), ('used', ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [
        ('version', ctypes.c_uint),
        ('total', ctypes.c_ulonglong),
        ('reserved', ctypes.c_ulonglong),
        ('free', ctypes.c_ulonglong),
        ('used', ctypes.c_ulonglong),
    ]


MEMORY_V2_VERSION = ctypes.sizeof(MemoryV2) | (2 << 24)


class ProcessInfoV1(ctypes.Structure):
    _fields_ = [('pid', ctypes.c_uint), ('usedGpuMemory', ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):
    # nvmlProcessInfo_v2_t and nvmlProcessInfo_t (v3) have this layout
    _fields_ = [
        ('pid', ctypes.c_uint),
        ('usedGpuMemory', ctypes.c_ulonglong),
        ('gpuInstanceId', ctypes.c_uint),
        ('computeInstanceId', ctypes.c_uint),
    ]


class Nvml:
    """Thin ctypes binding: only the calls this collection reads."""

    BUF = 96

    def __init__(self, lib):
        self.lib = lib
        try:
            self.lib.nvmlErrorString.restype = ctypes.c_char_p
        except AttributeError:
            pass

    def error_string(self, code):
        try:
            return _text(self.lib.nvmlErrorString(ctypes.c_int(code)))
        except (AttributeError, TypeError):
            return NVML_ERROR_NAMES.get(code, 'Unknown Error')

    def has(self, name):
        return hasattr(self.lib, name)

    def call(self, name, *args):
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            raise NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND, name)
        rc = fn(*args)
        if rc != NVML_SUCCESS:
            raise NvmlError(rc, name, self.error_string(rc))

    def first(self, names, *args):
        """Call the newest of several versions of an entry point that the library exports."""
        for name in names:
            if self.has(name):
                return self.call(name, *args)
        raise NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND, names[0])

    def string(self, name, *args):
        buf = ctypes.create_string_buffer(self.BUF)
        self.call(name, *(args + (buf, ctypes.c_uint(self.BUF))))
        return _text(buf.value)

    def init(self):
        self.first(('nvmlInit_v2', 'nvmlInit'))

    def shutdown(self):
        try:
            self.call('nvmlShutdown')
        except NvmlError:
            pass


class DlInfo(ctypes.Structure):
    _fields_ = [
        ('dli_fname', ctypes.c_char_p),
        ('dli_fbase', ctypes.c_void_p),
        ('dli_sname', ctypes.c_char_p),
        ('dli_saddr', ctypes.c_void_p),
    ]


def library_file(lib, symbol='nvmlInit_v2'):
    """File a loaded library came from, via dladdr (libc on glibc >= 2.34, libdl before)."""
    try:
        addr = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p)
    except AttributeError:
        return None
    for libc in (None, 'libdl.so.2'):
        try:
            dladdr = ctypes.CDLL(libc).dladdr
        except (OSError, AttributeError):
            continue
        info = DlInfo()
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(_text(info.dli_fname))
    return None


def loaded_library_path(name_fragment='libnvidia-ml', maps_path='/proc/self/maps'):
    """Resolved path of the NVML library this process has mapped (its file name carries its version)."""
    try:
        with open(maps_path, 'rb') as f:
            for raw in f:
                line = _text(raw)
                parts = line.split(None, 5)
                if len(parts) == 6 and name_fragment in os.path.basename(parts[5].strip()):
                    return os.path.realpath(parts[5].strip())
    except (IOError, OSError):
        pass
    return None


def library_version_from_path(path):
    m = re.search(r'\.so\.(\d+\.\d+(?:\.\d+)?)$', path or '')
    return m.group(1) if m else None


def parse_kernel_module_version(text):
    """Version from /proc/driver/nvidia/version (proprietary and open module wordings)."""
    m = re.search(r'Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)', text or '')
    return m.group(1) if m else None


def read_kernel_module_version(path):
    for candidate in (path, '/sys/module/nvidia/version'):
        try:
            with open(candidate, 'rb') as f:
                text = _text(f.read(65536))  # bytes that are not UTF-8 (a damaged or odd file) never raise
        except (IOError, OSError):
            continue
        if candidate.endswith('/sys/module/nvidia/version'):
            return text.strip() or None
        found = parse_kernel_module_version(text)
        if found:
            return found
    return None


def container_id_from_cgroup(text):
    """Container id of a process from /proc/<pid>/cgroup: the last 64-hex path component (docker,
    containerd, cri-o, podman and kubepods all name the cgroup after the full id)."""
    found = None
    for line in (text or '').splitlines():
        path = line.split(':', 2)[-1]
        ids = re.findall(r'(?:^|[/:\-])([0-9a-f]{64})(?:\.scope)?(?=/|$)', path)
        if ids:
            found = ids[-1]
    return found


def process_details(nvml, pid, proc_root='/proc'):
    comm = read_text(os.path.join(proc_root, str(pid), 'comm'))
    name = comm.strip() if comm else None
    if not name:
        try:
            name = os.path.basename(nvml.string('nvmlSystemGetProcessName', ctypes.c_uint(pid))) or None
        except NvmlError:
            name = None
    return {
        'name': name,
        'container_id': container_id_from_cgroup(read_text(os.path.join(proc_root, str(pid), 'cgroup'))),
    }


def _processes(nvml, handle):
    for name, struct in (
        ('nvmlDeviceGetComputeRunningProcesses_v3', ProcessInfo),
        ('nvmlDeviceGetComputeRunningProcesses_v2', ProcessInfo),
        ('nvmlDeviceGetComputeRunningProcesses', ProcessInfoV1),
    ):
        if not nvml.has(name):
            continue
        count = ctypes.c_uint(0)
        for dummy in range(5):  # the list can grow between the size probe and the read
            size = count.value
            infos = (struct * max(size, 1))()
            try:
                nvml.call(name, handle, ctypes.byref(count), infos if size else None)
            except NvmlError as e:
                if e.code == NVML_ERROR_INSUFFICIENT_SIZE:
                    count = ctypes.c_uint(count.value + 4)
                    continue
                raise
            return [(infos[i].pid, infos[i].usedGpuMemory) for i in range(count.value)]
        raise NvmlError(NVML_ERROR_INSUFFICIENT_SIZE, name)
    raise NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND, 'nvmlDeviceGetComputeRunningProcesses_v3')


def _memory(nvml, handle):
    if nvml.has('nvmlDeviceGetMemoryInfo_v2'):
        mem = MemoryV2(version=MEMORY_V2_VERSION)
        try:
            nvml.call('nvmlDeviceGetMemoryInfo_v2', handle, ctypes.byref(mem))
            return {
                'memory_total': mem.total,
                'memory_used': mem.used,
                'memory_free': mem.free,
                'memory_reserved': mem.reserved,
            }
        except NvmlError as e:
            if e.code not in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_ARGUMENT_VERSION_MISMATCH):
                raise
    mem = Memory()
    nvml.call('nvmlDeviceGetMemoryInfo', handle, ctypes.byref(mem))
    return {'memory_total': mem.total, 'memory_used': mem.used, 'memory_free': mem.free, 'memory_reserved': None}


def _optional(fn, default=None):
    """Fields a GPU or a permission level may not offer are None, not a failure."""
    try:
        return fn()
    except NvmlError as e:
        if e.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION, NVML_ERROR_FUNCTION_NOT_FOUND):
            return default
        raise


def gpu_info(nvml, index, proc_root='/proc'):
    handle = ctypes.c_void_p()
    nvml.first(
        ('nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetHandleByIndex'), ctypes.c_uint(index), ctypes.byref(handle)
    )
    pci = PciInfo()
    nvml.call('nvmlDeviceGetPciInfo_v3', handle, ctypes.byref(pci))
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvml.call('nvmlDeviceGetCudaComputeCapability', handle, ctypes.byref(major), ctypes.byref(minor))
    mode = ctypes.c_int()

    def persistence():
        nvml.call('nvmlDeviceGetPersistenceMode', handle, ctypes.byref(mode))
        return bool(mode.value)

    info = {
        'index': index,
        'uuid': nvml.string('nvmlDeviceGetUUID', handle),
        'name': nvml.string('nvmlDeviceGetName', handle),
        'pci_bus_id': _text(pci.busId),
        'pci_device_id': '0x%08X' % pci.pciDeviceId,
        'compute_capability': '%d.%d' % (major.value, minor.value),
        # FP8 tensor cores arrived with Ada (8.9) and Hopper (9.0)
        'fp8_capable': (major.value, minor.value) >= (8, 9),
        'persistence_mode': _optional(persistence),
    }
    info.update(_memory(nvml, handle))
    processes = []
    for pid, used in _optional(lambda: _processes(nvml, handle), []):
        proc = {'pid': pid, 'used_memory': None if used == NVML_VALUE_NOT_AVAILABLE_ULL else used}
        proc.update(process_details(nvml, pid, proc_root))
        processes.append(proc)
    info['processes'] = processes
    return info


def empty_result():
    return {
        'nvml_state': None,
        'nvml_error': None,
        'hint': None,
        'library_path': None,
        'library_version': None,
        'kernel_module_version': None,
        'driver_version': None,
        'cuda_driver_version': None,
        'cuda_version': None,
        'nvml_version': None,
        'gpu_count': 0,
        'gpus': [],
    }


def _fail(result, state, err):
    err.record(result, state)
    result['hint'] = HINTS[state].format(
        kernel=result['kernel_module_version'] or 'unknown',
        library=result['library_version'] or 'unknown',
        name=err.name,
    )
    return result


# The options of every module that asks NVML (documented once: doc fragment airgap.vllm.nvml).
NVML_ARGUMENT_SPEC = dict(
    library=dict(type='str', default='libnvidia-ml.so.1'),
    driver_version_file=dict(type='path', default='/proc/driver/nvidia/version'),
)


def collect(library='libnvidia-ml.so.1', driver_version_file='/proc/driver/nvidia/version', proc_root='/proc'):
    """Everything NVML says about the host, as a dict; nvml_state tells whether it could say anything."""
    result = empty_result()
    result['kernel_module_version'] = read_kernel_module_version(driver_version_file)
    try:
        lib = ctypes.CDLL(library)
    except OSError as e:
        return _fail(result, 'absent', NvmlError.dlopen(e))
    result['library_path'] = library_file(lib) or loaded_library_path() or (library if os.path.isabs(library) else None)
    result['library_version'] = library_version_from_path(result['library_path'])
    nvml = Nvml(lib)
    try:
        nvml.init()
    except NvmlError as e:
        return _fail(result, STATE_BY_INIT_ERROR.get(e.code, 'error'), e)
    try:
        result['driver_version'] = nvml.string('nvmlSystemGetDriverVersion')
        result['library_version'] = result['library_version'] or result['driver_version']
        result['nvml_version'] = nvml.string('nvmlSystemGetNVMLVersion')
        cuda = ctypes.c_int()
        nvml.first(('nvmlSystemGetCudaDriverVersion_v2', 'nvmlSystemGetCudaDriverVersion'), ctypes.byref(cuda))
        result['cuda_driver_version'] = cuda.value
        result['cuda_version'] = '%d.%d' % (cuda.value // 1000, (cuda.value % 1000) // 10)
        count = ctypes.c_uint()
        nvml.first(('nvmlDeviceGetCount_v2', 'nvmlDeviceGetCount'), ctypes.byref(count))
        result['gpus'] = [gpu_info(nvml, i, proc_root) for i in range(count.value)]
        result['gpu_count'] = len(result['gpus'])
        result['nvml_state'] = 'ok'
    except NvmlError as e:
        _fail(result, 'error', e)
    finally:
        nvml.shutdown()
    return result


# --- GPU health (read by the vllm_observe exporter, _gpu_health.py) -------------------------------------------
# Enum values from nvml.h (they are part of NVML's ABI and have not changed since they were introduced).
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_CORRECTED = 0
NVML_MEMORY_ERROR_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT = 1
# nvmlClocksEventReasons (formerly ClocksThrottleReasons) bits, by the name this collection's metrics use.
THROTTLE_REASONS = (
    (0x1, 'gpu_idle'),
    (0x2, 'applications_clocks_setting'),
    (0x4, 'sw_power_cap'),
    (0x8, 'hw_slowdown'),
    (0x10, 'sync_boost'),
    (0x20, 'sw_thermal_slowdown'),
    (0x40, 'hw_thermal_slowdown'),
    (0x80, 'hw_power_brake_slowdown'),
    (0x100, 'display_clock_setting'),
)


class Utilization(ctypes.Structure):
    _fields_ = [('gpu', ctypes.c_uint), ('memory', ctypes.c_uint)]


def _uint(nvml, name, handle, *args):
    value = ctypes.c_uint()
    nvml.call(name, handle, *(args + (ctypes.byref(value),)))
    return value.value


def _ulonglong(nvml, names, handle, *args):
    value = ctypes.c_ulonglong()
    nvml.first(names, handle, *(args + (ctypes.byref(value),)))
    return value.value


def _retired_pages(nvml, handle, cause):
    """Number of pages retired for a cause: asked with a zero-size buffer (NVML answers the count, with
    NVML_SUCCESS when there are none and NVML_ERROR_INSUFFICIENT_SIZE when there are some)."""
    count = ctypes.c_uint(0)
    try:
        nvml.call('nvmlDeviceGetRetiredPages', handle, ctypes.c_int(cause), ctypes.byref(count), None)
    except NvmlError as e:
        if e.code != NVML_ERROR_INSUFFICIENT_SIZE:
            raise
    return count.value


def _remapped_rows(nvml, handle):
    corr, unc, pending, failure = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    nvml.call(
        'nvmlDeviceGetRemappedRows',
        handle,
        ctypes.byref(corr),
        ctypes.byref(unc),
        ctypes.byref(pending),
        ctypes.byref(failure),
    )
    return {
        'correctable': corr.value,
        'uncorrectable': unc.value,
        'pending': bool(pending.value),
        'failure': bool(failure.value),
    }


def gpu_health(nvml, index):
    """Health figures of one GPU; each is None where the GPU, driver or permission level does not offer it."""
    handle = ctypes.c_void_p()
    nvml.first(
        ('nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetHandleByIndex'), ctypes.c_uint(index), ctypes.byref(handle)
    )
    pci = PciInfo()
    nvml.call('nvmlDeviceGetPciInfo_v3', handle, ctypes.byref(pci))

    def utilization():
        u = Utilization()
        nvml.call('nvmlDeviceGetUtilizationRates', handle, ctypes.byref(u))
        return {'gpu': u.gpu, 'memory': u.memory}

    def ecc(error_type, counter_type):
        return lambda: _ulonglong(
            nvml, ('nvmlDeviceGetTotalEccErrors',), handle, ctypes.c_int(error_type), ctypes.c_int(counter_type)
        )

    info = {
        'index': index,
        'uuid': nvml.string('nvmlDeviceGetUUID', handle),
        'name': nvml.string('nvmlDeviceGetName', handle),
        'pci_bus_id': _text(pci.busId),
        'temperature_c': _optional(
            lambda: _uint(nvml, 'nvmlDeviceGetTemperature', handle, ctypes.c_int(NVML_TEMPERATURE_GPU))
        ),
        'power_mw': _optional(lambda: _uint(nvml, 'nvmlDeviceGetPowerUsage', handle)),
        'power_limit_mw': _optional(lambda: _uint(nvml, 'nvmlDeviceGetEnforcedPowerLimit', handle)),
        'energy_mj': _optional(lambda: _ulonglong(nvml, ('nvmlDeviceGetTotalEnergyConsumption',), handle)),
        'sm_clock_mhz': _optional(lambda: _uint(nvml, 'nvmlDeviceGetClockInfo', handle, ctypes.c_int(NVML_CLOCK_SM))),
        'mem_clock_mhz': _optional(lambda: _uint(nvml, 'nvmlDeviceGetClockInfo', handle, ctypes.c_int(NVML_CLOCK_MEM))),
        # the newer name first (drivers >= 535); the older one is kept by NVML as an alias
        'throttle_reasons': _optional(
            lambda: _ulonglong(
                nvml, ('nvmlDeviceGetCurrentClocksEventReasons', 'nvmlDeviceGetCurrentClocksThrottleReasons'), handle
            )
        ),
        'utilization': _optional(utilization),
        'ecc_sbe_volatile': _optional(ecc(NVML_MEMORY_ERROR_CORRECTED, NVML_VOLATILE_ECC)),
        'ecc_dbe_volatile': _optional(ecc(NVML_MEMORY_ERROR_UNCORRECTED, NVML_VOLATILE_ECC)),
        'ecc_sbe_aggregate': _optional(ecc(NVML_MEMORY_ERROR_CORRECTED, NVML_AGGREGATE_ECC)),
        'ecc_dbe_aggregate': _optional(ecc(NVML_MEMORY_ERROR_UNCORRECTED, NVML_AGGREGATE_ECC)),
        'retired_sbe': _optional(lambda: _retired_pages(nvml, handle, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT)),
        'retired_dbe': _optional(lambda: _retired_pages(nvml, handle, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT)),
        'retired_pending': _optional(lambda: bool(_uint(nvml, 'nvmlDeviceGetRetiredPagesPendingStatus', handle))),
        'remapped_rows': _optional(lambda: _remapped_rows(nvml, handle)),
    }
    info.update(_memory(nvml, handle))
    return info


def collect_health(library='libnvidia-ml.so.1'):
    """{nvml_state, nvml_error, driver_version, gpus: [gpu_health...]}: what the GPU exporter writes out.
    A GPU whose reads fail (fallen off the bus) is reported in gpu_errors, the others still are."""
    result = {'nvml_state': None, 'nvml_error': None, 'driver_version': None, 'gpus': [], 'gpu_errors': []}
    try:
        lib = ctypes.CDLL(library)
    except OSError as e:
        return NvmlError.dlopen(e).record(result, 'absent')
    nvml = Nvml(lib)
    try:
        nvml.init()
    except NvmlError as e:
        return e.record(result, STATE_BY_INIT_ERROR.get(e.code, 'error'))
    try:
        result['driver_version'] = nvml.string('nvmlSystemGetDriverVersion')
        count = ctypes.c_uint()
        nvml.first(('nvmlDeviceGetCount_v2', 'nvmlDeviceGetCount'), ctypes.byref(count))
        for i in range(count.value):
            try:
                result['gpus'].append(gpu_health(nvml, i))
            except NvmlError as e:
                result['gpu_errors'].append({'index': i, 'code': e.code, 'name': e.name, 'function': e.function})
        result['nvml_state'] = 'ok'
    except NvmlError as e:
        e.record(result, 'error')
    finally:
        nvml.shutdown()
    return result
